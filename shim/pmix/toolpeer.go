package pmix

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/plugin/peercred"
)

// libpmix 4.2.2 serves its clients and tools on TCP (127.0.0.1), where
// any local user can connect, and takes the uid a client or a tool claims
// on its word: another user could become a client of a job (and abort
// it, publish, look up) or a tool (and query it). So before each call a
// client or tool makes that acts beyond the node's data (a query, abort,
// spawn, publish, unpublish, lookup, log, event) the server looks at who
// holds the other end of each connection it accepted (intruders): while
// one is another user's (neither the server's nor root's) or not on this
// host, it refuses the call and cuts (shutdown) that connection. Not at
// a client's connect: refusing it through libpmix closes the socket twice
// (a refused tool made libpmix stop listening), and reading the host's
// TCP table for every client costs milliseconds each on a host with many
// sockets. Under Slurm the server runs as the job's user, as its tasks do.

// intruder is an accepted connection the server must not serve.
type intruder struct {
	fd    int
	inode uint64
	uid   int // the peer socket's owner; -1: no peer socket on this host
}

// listeners returns the listening TCP sockets of the process whose
// descriptors are in fdDir, from netDir's tcp and tcp6 (the process's
// network namespace: /proc/self/net).
func listeners(netDir, fdDir string) ([]net.TCPAddr, error) {
	fds, err := peercred.SocketInodes(fdDir)
	if err != nil {
		return nil, err
	}
	var out []net.TCPAddr
	for _, name := range []string{"tcp", "tcp6"} {
		socks, err := peercred.ReadTCP(filepath.Join(netDir, name), 0)
		if err != nil && name == "tcp" {
			return nil, err
		}
		for _, s := range socks {
			if _, ok := fds[s.Inode]; ok && s.State == peercred.TCPListen {
				out = append(out, s.Local)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listening TCP socket of this server in %s", netDir)
	}
	return out, nil
}

// intruders returns the established connections accepted on listening
// (sockets of the process whose descriptors are in fdDir) whose peer
// socket is owned by neither uid self nor root, or is not on this host,
// reading netDir's tcp and tcp6. A connection whose peer closed (its end
// is not established any more) is left to libpmix. Only the lines of the
// listening ports are read; the descriptors, only when there is an
// intruder.
func intruders(netDir, fdDir string, self int, listening []net.TCPAddr, lookup lookupTCP) ([]intruder, error) {
	var socks []peercred.TCPSocket
	for _, l := range listening {
		for _, name := range []string{"tcp", "tcp6"} {
			s, err := peercred.ReadTCP(filepath.Join(netDir, name), l.Port)
			if err != nil && name == "tcp" {
				return nil, err
			}
			socks = append(socks, s...)
		}
	}
	accepted := func(s peercred.TCPSocket) bool {
		for _, l := range listening {
			if s.Local.Port == l.Port && (l.IP.IsUnspecified() || s.Local.IP.Equal(l.IP)) {
				return true
			}
		}
		return false
	}
	var out []intruder
	for _, s := range socks {
		if s.State != peercred.TCPEstablished || !s.Live() || !accepted(s) {
			continue
		}
		uid, ok := peerUID(s, socks, lookup)
		if ok && uid != self && uid != 0 {
			out = append(out, intruder{inode: s.Inode, uid: uid, fd: -1})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	fds, err := peercred.SocketInodes(fdDir)
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, in := range out {
		if fd, ok := fds[in.inode]; ok {
			in.fd = fd
			kept = append(kept, in)
		}
	}
	return kept, nil
}

// lookupTCP describes a TCP socket by its 4-tuple: peercred.LookupTCP,
// which tests fake.
type lookupTCP func(local, remote *net.TCPAddr) (peercred.Socket, error)

// peerUID is the uid of the peer of s, an accepted connection: -1 when
// its peer is not on this host. ok is false when the connection is
// closing (its peer closed it): no one to judge. The kernel is asked for
// the peer by its 4-tuple (sock_diag): the host's table (socks) is read
// in pages, and misses a socket now and then while others come and go,
// which passed a job's own client for one not on this host, cut it, and
// hung the job (a spawn under srun, 1 run in 20). The table answers only
// where sock_diag cannot.
func peerUID(s peercred.TCPSocket, socks []peercred.TCPSocket, lookup lookupTCP) (uid int, ok bool) {
	peer, err := lookup(&s.Remote, &s.Local)
	switch {
	case err == nil && peer.Live():
		return peer.UID, true
	case err == nil || errors.Is(err, peercred.ErrNoSocket):
		// No live peer here: one that closed just now leaves this end
		// established no more.
		own, oerr := lookup(&s.Local, &s.Remote)
		if oerr != nil || own.State != peercred.TCPEstablished {
			return 0, false
		}
		return -1, true
	}
	for _, p := range socks {
		if p.Live() && p.Joins(s.Remote, s.Local) {
			return p.UID, true
		}
	}
	return -1, true
}

// pendingWrites counts the descriptors a level-triggered epoll instance
// of this process (libevent's, libpmix's event loop) waits to write to:
// a connection its loop still has something queued for. The Go runtime's
// netpoller registers every descriptor edge-triggered, for reading and
// writing alike, and is not counted. fdDir and infoDir are the process's
// /proc fd and fdinfo directories.
func pendingWrites(fdDir, infoDir string) (int, error) {
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil || target != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join(infoDir, e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
				continue
			}
			ev, err := strconv.ParseUint(f[3], 16, 32)
			if err == nil && ev&epollOut != 0 && ev&epollET == 0 {
				n++
			}
		}
	}
	return n, nil
}

// The epoll event bits pendingWrites reads (linux/eventpoll.h).
const (
	epollOut = 0x004
	epollET  = 1 << 31
)

// refusal is why a connection to the server was refused before libpmix
// read a byte of it (vetPeer).
type refusal struct {
	uid   int    // the peer's owner; -1: not on this host
	inode uint64 // the peer's socket, when on this host
	why   string
}

// vetPeer judges a connection the server accepted (fd) before libpmix
// reads a byte of it: its peer must be a socket of this host held by the
// server's own user (self) or root, which the kernel says by the
// connection's 4-tuple (lookup), and it must say something within
// handshake (libpmix reads a handshake blocking, and its whole listener
// waits meanwhile). nil: libpmix may have it.
func vetPeer(fd int, self int, lookup lookupTCP, handshake time.Duration) *refusal {
	la, err1 := unix.Getsockname(fd)
	ra, err2 := unix.Getpeername(fd)
	local, remote := tcpAddr(la), tcpAddr(ra)
	if err1 != nil || err2 != nil || local == nil || remote == nil {
		return &refusal{uid: -1, why: "not a TCP connection whose ends can be read"}
	}
	peer, err := lookup(remote, local)
	switch {
	case err == nil && peer.Live():
	case err == nil || errors.Is(err, peercred.ErrNoSocket):
		return &refusal{uid: -1, why: "its peer " + remote.String() + " is not on this host"}
	default:
		return &refusal{uid: -1, why: "who holds its other end cannot be read: " + err.Error()}
	}
	if peer.UID != self && peer.UID != 0 {
		return &refusal{uid: peer.UID, inode: peer.Inode, why: "another user's"}
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(handshake); ; {
		left := time.Until(deadline)
		if left <= 0 {
			return &refusal{uid: peer.UID, inode: peer.Inode, why: "it said nothing in " + handshake.String()}
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			return nil // bytes, or an end libpmix sees at once
		}
	}
}

// tcpAddr is sa as a TCP address, nil if it is none.
func tcpAddr(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return nil
}
