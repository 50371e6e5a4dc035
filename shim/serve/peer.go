package serve

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// portPeer finds who owns the other end of a TCP connection accepted on
// the PMI_PORT listener. The kernel lists every TCP socket of the network
// namespace, with its owner's uid and its inode, in /proc/net/tcp and
// tcp6: the peer's socket is the one whose local address is the
// connection's remote one and the other way round. A peer found there is
// the job's owner when its uid is this process's (a shim runs as the job's
// user); a peer not found (another network namespace, another host, a
// socket already closed) is not. source names who the peer is for the
// connection budgets (portBudget): "uid N" on this host, "host A" for an
// address not on its socket table.
func portPeer(conn net.Conn, procDir string) (peer bridge.PortPeer, source string) {
	if uc, ok := conn.(*net.UnixConn); ok {
		return unixPeer(uc, procDir)
	}
	la, ok1 := conn.LocalAddr().(*net.TCPAddr)
	ra, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		at := conn.RemoteAddr().String()
		return bridge.PortPeer{Describe: func() string { return "a peer at " + at }}, "host " + at
	}
	uid, inode, found := findTCPSocket(procDir, ra, la)
	if !found {
		at := ra.String()
		return bridge.PortPeer{Describe: func() string { return at + " (its owner is not on this host's socket table)" }}, "host " + ra.IP.String()
	}
	return bridge.PortPeer{
		Owner: uid == os.Geteuid(),
		Describe: func() string {
			d := "uid " + strconv.Itoa(uid)
			if pid, comm := peercred.OwnerPID(procDir, inode); pid > 0 {
				d += fmt.Sprintf(", pid %d (%s)", pid, comm)
			}
			return d + " at " + ra.String()
		},
	}, "uid " + strconv.Itoa(uid)
}

// findTCPSocket looks for the live, established socket with local
// address local and remote address remote: on this host (procDir /proc)
// the kernel is asked for it by its 4-tuple (sock_diag), since the
// table in procDir/net/tcp and tcp6, read in pages, misses a line now and
// then while sockets come and go; the table answers where sock_diag
// cannot, and for another procDir (a test's).
func findTCPSocket(procDir string, local, remote *net.TCPAddr) (uid int, inode uint64, found bool) {
	if procDir == "/proc" {
		s, err := peercred.LookupTCP(local, remote)
		switch {
		case err == nil:
			return s.UID, s.Inode, s.State == peercred.TCPEstablished && s.Live()
		case errors.Is(err, peercred.ErrNoSocket):
			return 0, 0, false
		}
	}
	for _, name := range []string{"tcp", "tcp6"} {
		socks, _ := peercred.ReadTCP(filepath.Join(procDir, "net", name), local.Port)
		for _, s := range socks {
			if s.State == peercred.TCPEstablished && s.Live() && s.Joins(*local, *remote) {
				return s.UID, s.Inode, true
			}
		}
	}
	return 0, 0, false
}

// unixPeer reads a unix socket peer's credentials (SO_PEERCRED), as they
// were when it connected.
func unixPeer(uc *net.UnixConn, procDir string) (bridge.PortPeer, string) {
	cred, err := peercred.Of(uc)
	if err != nil {
		return bridge.PortPeer{Describe: func() string { return "a unix socket peer whose credentials cannot be read" }}, "unknown"
	}
	uid, pid := int(cred.Uid), int(cred.Pid)
	return bridge.PortPeer{
		Owner: uid == os.Geteuid(),
		Describe: func() string {
			comm, _ := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "comm"))
			return fmt.Sprintf("uid %d, pid %d (%s)", uid, pid, bytes.TrimSpace(comm))
		},
	}, "uid " + strconv.Itoa(uid)
}
