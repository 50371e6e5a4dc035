// Package peercred reads who is at the other end of a unix socket: the
// kernel's SO_PEERCRED, as it was when the peer connected (or, from a
// client's side, when the server listened). The shim's PMI_PORT, gopmi
// run's universe, a Slurm step's and the node daemon all decide access by
// it; a resource manager's backend that serves a unix socket can too.
package peercred

import (
	"errors"
	"net"
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
