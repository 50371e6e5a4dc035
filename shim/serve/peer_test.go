package serve

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPortPeerTCP: the peer of a loopback connection is found in the
// kernel's socket table with its uid and its pid.
func TestPortPeerTCP(t *testing.T) {
	c, s := dialPair(t, "tcp", "127.0.0.1:0")
	p, _ := portPeer(s, "/proc")
	if !p.Owner {
		t.Errorf("a connection from this process is not the owner's")
	}
	want := "uid " + strconv.Itoa(os.Geteuid()) + ", pid " + strconv.Itoa(os.Getpid()) + " ("
	if d := p.Describe(); !strings.HasPrefix(d, want) || !strings.HasSuffix(d, " at "+c.LocalAddr().String()) {
		t.Errorf("Describe() = %q, want %q... at %s", d, want, c.LocalAddr())
	}
}

// TestPortPeerTable: the socket table is matched on both addresses and
// read for its uid; a peer missing from it is nobody's.
func TestPortPeerTable(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	// 127.0.0.1:40000 -> 127.0.0.1:5000 owned by uid 4242, and the
	// other end, owned by this process's uid.
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1388 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 111 1 0 20 4 30 10 -1\n" +
		"   1: 0100007F:9C40 0100007F:1388 01 00000000:00000000 00:00000000 00000000  4242        0 222 1 0 20 4 30 10 -1\n" +
		// A client that closed before the accept: TIME_WAIT, uid 0.
		"   2: 0100007F:9C41 0100007F:1388 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0000000000000000\n"
	if err := os.WriteFile(filepath.Join(dir, "net", "tcp"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	lo := net.IPv4(127, 0, 0, 1)
	uid, inode, ok := findTCPSocket(dir, &net.TCPAddr{IP: lo, Port: 40000}, &net.TCPAddr{IP: lo, Port: 5000})
	if !ok || uid != 4242 || inode != 222 {
		t.Errorf("findTCPSocket = %d, %d, %v; want 4242, 222, true", uid, inode, ok)
	}
	if _, _, ok := findTCPSocket(dir, &net.TCPAddr{IP: lo, Port: 40001}, &net.TCPAddr{IP: lo, Port: 5000}); ok {
		t.Error("a closed socket's TIME_WAIT entry passes for root's")
	}
	if _, _, ok := findTCPSocket(dir, &net.TCPAddr{IP: lo, Port: 40002}, &net.TCPAddr{IP: lo, Port: 5000}); ok {
		t.Error("found a socket on another port")
	}
	if _, _, ok := findTCPSocket(dir, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 40000}, &net.TCPAddr{IP: lo, Port: 5000}); ok {
		t.Error("found a socket on another address")
	}
}

// TestPortPeerUnix: a unix socket peer's credentials come from the kernel.
func TestPortPeerUnix(t *testing.T) {
	_, s := dialPair(t, "unix", filepath.Join(t.TempDir(), "p.sock"))
	p, _ := portPeer(s, "/proc")
	want := "uid " + strconv.Itoa(os.Geteuid()) + ", pid " + strconv.Itoa(os.Getpid()) + " ("
	if !p.Owner || !strings.HasPrefix(p.Describe(), want) {
		t.Errorf("peer = %v %q, want owner %q...", p.Owner, p.Describe(), want)
	}
}

// dialPair returns both ends of a connection to a listener on addr,
// closed when the test ends.
func dialPair(t *testing.T, network, addr string) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := net.Dial(network, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}
