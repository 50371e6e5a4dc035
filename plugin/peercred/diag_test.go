package peercred

import (
	"errors"
	"net"
	"os"
	"testing"
)

// LookupTCP finds both ends of a loopback connection by their 4-tuples,
// each with this process's uid and a live inode, and nothing for a
// 4-tuple no socket has.
func TestLookupTCP(t *testing.T) {
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp4", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	local, remote := a.LocalAddr().(*net.TCPAddr), a.RemoteAddr().(*net.TCPAddr)
	for _, end := range []struct{ l, r *net.TCPAddr }{{local, remote}, {remote, local}} {
		s, err := LookupTCP(end.l, end.r)
		if err != nil || s.State != TCPEstablished || s.UID != os.Geteuid() || !s.Live() {
			t.Errorf("LookupTCP(%s, %s) = %+v, %v; want an established live socket of uid %d", end.l, end.r, s, err, os.Geteuid())
		}
	}
	s, err := LookupTCP(local, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
	if !errors.Is(err, ErrNoSocket) {
		t.Errorf("a 4-tuple no socket has: %+v, %v; want ErrNoSocket", s, err)
	}
	// The listener, by its address and no peer.
	if s, err := LookupTCP(ln.Addr().(*net.TCPAddr), &net.TCPAddr{IP: net.IPv4zero}); err != nil || s.State != TCPListen {
		t.Errorf("the listener: %+v, %v", s, err)
	}
	// A closed client's end: gone from its process (no inode), or from
	// the kernel.
	c.Close()
	if s, err := LookupTCP(remote, local); err == nil && s.Live() && s.State == TCPEstablished {
		t.Errorf("the closed client's end: %+v", s)
	}
}
