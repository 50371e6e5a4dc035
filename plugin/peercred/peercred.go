// Package peercred reads who is at the other end of a unix socket: the
// kernel's SO_PEERCRED, as it was when the peer connected (or, from a
// client's side, when the server listened). The shim's PMI_PORT, gopmi
// run's universe, a Slurm step's and the node daemon all decide access by
// it; a resource manager's backend that serves a unix socket can too.
package peercred

import (
	"errors"
	"net"
	"os/user"
	"strconv"
	"sync"
	"syscall"
)

// Of returns the credentials of c's peer; c must be a unix socket.
func Of(c net.Conn) (*syscall.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("peercred: not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if cerr != nil {
		return nil, cerr
	}
	return cred, err
}

var userNames sync.Map // uint32 -> string

// UserName is uid's login name, or the number when it has none: how
// gopmi names a peer, a job's owner or a name's publisher to people.
// Names are looked up once per uid in a process's life.
func UserName(uid uint32) string {
	if v, ok := userNames.Load(uid); ok {
		return v.(string)
	}
	n := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(n); err == nil {
		n = u.Username
	}
	userNames.Store(uid, n)
	return n
}
