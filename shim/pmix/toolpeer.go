package pmix

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/gopmi/gopmi/plugin/peercred"
)

// libpmix 4.2.2 serves its clients and tools on TCP (127.0.0.1), where
// any local user can connect, and takes a tool's uid on its word. So the
// server accepts a tool only while every live connection to its
// listening sockets comes from a socket of the server's user or of root
// (foreignPeer): with another user's connection there, it refuses the
// tool that is connecting, which may be that one (it cannot tell which).
// Under Slurm the server runs as the job's user, as its tasks do.

// foreignPeer returns the uid of a live TCP connection to a listening
// socket of the process whose descriptors are in fdDir, from a socket
// owned neither by uid self nor by root, reading netDir's tcp and tcp6
// (the process's network namespace: /proc/self/net). found is false when
// there is none; err says why it could not tell (no listening socket),
// and the caller refuses then too.
func foreignPeer(netDir, fdDir string, self int) (uid int, found bool, err error) {
	ours, err := peercred.SocketInodes(fdDir)
	if err != nil {
		return 0, false, err
	}
	var socks []peercred.TCPSocket
	for _, name := range []string{"tcp", "tcp6"} {
		s, err := peercred.ReadTCP(filepath.Join(netDir, name), 0)
		if err != nil && name == "tcp" {
			return 0, false, err
		}
		socks = append(socks, s...)
	}
	var listening []net.TCPAddr
	for _, s := range socks {
		if s.State == peercred.TCPListen && ours[s.Inode] {
			listening = append(listening, s.Local)
		}
	}
	if len(listening) == 0 {
		return 0, false, fmt.Errorf("no listening TCP socket of this server in %s", netDir)
	}
	for _, s := range socks {
		if s.State == peercred.TCPListen || !s.Live() || ours[s.Inode] || s.UID == self || s.UID == 0 {
			continue
		}
		for _, l := range listening {
			if s.Remote.Port == l.Port && (l.IP.IsUnspecified() || s.Remote.IP.Equal(l.IP)) {
				return s.UID, true, nil
			}
		}
	}
	return 0, false, nil
}
