package serve

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
// socket already closed) is not.
func portPeer(conn net.Conn, procDir string) bridge.PortPeer {
	if uc, ok := conn.(*net.UnixConn); ok {
		return unixPeer(uc, procDir)
	}
	la, ok1 := conn.LocalAddr().(*net.TCPAddr)
	ra, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return bridge.PortPeer{Describe: func() string { return "a peer at " + conn.RemoteAddr().String() }}
	}
	uid, inode, found := findTCPSocket(procDir, ra, la)
	if !found {
		at := ra.String()
		return bridge.PortPeer{Describe: func() string { return at + " (its owner is not on this host's socket table)" }}
	}
	return bridge.PortPeer{
		Owner: uid == os.Geteuid(),
		Describe: func() string {
			d := "uid " + strconv.Itoa(uid)
			if pid, comm := socketOwnerPID(procDir, inode); pid > 0 {
				d += fmt.Sprintf(", pid %d (%s)", pid, comm)
			}
			return d + " at " + ra.String()
		},
	}
}

// findTCPSocket looks for the socket with local address local and remote
// address remote in procDir/net/tcp and tcp6.
func findTCPSocket(procDir string, local, remote *net.TCPAddr) (uid int, inode uint64, found bool) {
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(procDir, "net", name))
		if err != nil {
			continue
		}
		// Lines without the local port are skipped before being split:
		// a job of many ranks has many sockets, each accept reads them all.
		port := []byte(fmt.Sprintf(":%04X ", local.Port))
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			if !bytes.Contains(sc.Bytes(), port) {
				continue
			}
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 {
				continue
			}
			// Only a live socket says who owns it: a client that closed
			// before the accept leaves a TIME_WAIT entry with uid 0
			// and inode 0, which must not pass for root's.
			if fs[3] != "01" || fs[9] == "0" || !sameAddr(fs[1], local) || !sameAddr(fs[2], remote) {
				continue
			}
			u, err1 := strconv.Atoi(fs[7])
			ino, err2 := strconv.ParseUint(fs[9], 10, 64)
			if err1 == nil && err2 == nil {
				f.Close()
				return u, ino, true
			}
		}
		f.Close()
	}
	return 0, 0, false
}

// sameAddr compares a /proc/net/tcp address ("0100007F:1F90": the IP as
// 32-bit words in host byte order, the port in hex) with a.
func sameAddr(field string, a *net.TCPAddr) bool {
	ipHex, portHex, ok := strings.Cut(field, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || len(raw)%4 != 0 {
		return false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	return ip.Equal(a.IP)
}

// socketOwnerPID finds a process holding the socket inode, for messages
// only: it reads every process's fd table this process may read.
func socketOwnerPID(procDir string, inode uint64) (int, string) {
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	dirs, _ := os.ReadDir(procDir)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fdDir := filepath.Join(procDir, d.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && l == want {
				comm, _ := os.ReadFile(filepath.Join(procDir, d.Name(), "comm"))
				return pid, string(bytes.TrimSpace(comm))
			}
		}
	}
	return 0, ""
}

// unixPeer reads a unix socket peer's credentials (SO_PEERCRED), as they
// were when it connected.
func unixPeer(uc *net.UnixConn, procDir string) bridge.PortPeer {
	cred, err := peercred.Of(uc)
	if err != nil {
		return bridge.PortPeer{Describe: func() string { return "a unix socket peer whose credentials cannot be read" }}
	}
	uid, pid := int(cred.Uid), int(cred.Pid)
	return bridge.PortPeer{
		Owner: uid == os.Geteuid(),
		Describe: func() string {
			comm, _ := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "comm"))
			return fmt.Sprintf("uid %d, pid %d (%s)", uid, pid, bytes.TrimSpace(comm))
		},
	}
}
