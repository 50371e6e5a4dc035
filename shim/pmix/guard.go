//go:build pmix

package pmix

// Who may reach the server: each connection vetted at its accept (goVetPeer),
// a guarded call refused and its caller cut, refusals logged within a rate.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"net"
	"os"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
)

//export goRefuse
func goRefuse(ns *C.char, rank C.uint32_t, key *C.char, typ C.uint16_t) C.int {
	if s := server(); s != nil {
		s.log.Warn().Str("proc", procOf(ns, rank).String()).Str("key", C.GoString(key)).Int("type", int(typ)).
			Msg("pmix: publish of a value libpmix cannot pack refused")
	}
	return C.PMIX_ERR_NOT_SUPPORTED
}

// cutRecent is how long after a cut connection a client's loss is said to
// be perhaps that connection's.
const cutRecent = 10 * time.Second

// cutAfter is how long guard lets a refused call's answer go out before
// it cuts the caller's connection: libpmix cannot tell the caller that
// its connection is gone, so a tool cut before its answer would wait for
// ever.
const cutAfter = 200 * time.Millisecond

// listeningSockets are libpmix's listening sockets, read once: libpmix
// makes its listener at its init.
func (s *Server) listeningSockets() ([]net.TCPAddr, error) {
	s.mu.Lock()
	listening := s.listening
	s.mu.Unlock()
	if listening != nil {
		return listening, nil
	}
	listening, err := listeners("/proc/self/net", "/proc/self/fd")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.listening = listening
	s.mu.Unlock()
	return listening, nil
}

// handshakeWait bounds how long a connection may say nothing before
// libpmix reads it (vetPeer): a client sends its handshake as it
// connects.
const handshakeWait = time.Second

// goVetPeer judges a connection libpmix's listener accepted, before
// libpmix reads a byte of it (rendezvous.c's accept): 1 to serve it.
//
//export goVetPeer
func goVetPeer(fd C.int) C.int {
	r := vetPeer(int(fd), os.Geteuid(), peercred.LookupTCP, handshakeWait)
	if r == nil {
		return 1
	}
	if s := server(); s != nil {
		s.refused(r)
	}
	return 0
}

// refusalsPerSecond bounds the refusals logged one by one: a flood of
// connections is summed up instead.
const refusalsPerSecond = 5

// refused logs r, naming the peer's user and process, at most
// refusalsPerSecond a second; the others are counted and said with the
// next one logged.
func (s *Server) refused(r *refusal) {
	s.mu.Lock()
	ok, quiet, _ := s.refusing.Take(time.Now())
	s.mu.Unlock()
	if !ok {
		return
	}
	ev := s.log.Warn().Int("uid", r.uid).Str("why", r.why)
	if r.uid >= 0 {
		ev = ev.Str("user", peercred.UserName(uint32(r.uid)))
	}
	if r.inode != 0 {
		if pid, comm := peercred.OwnerPID("/proc", r.inode); pid > 0 {
			ev = ev.Int("pid", pid).Str("comm", comm)
		}
	}
	if quiet > 0 {
		ev = ev.Int("more_refused", quiet)
	}
	ev.Msg("pmix: refused a connection before libpmix read it (libpmix takes the uid a client or tool claims on its word; the kernel says whose it is)")
}

// guard refuses the call it is asked for (ErrPermission) while a
// connection to the server has a peer of another user or not on this
// host (intruders, toolpeer.go), or when it cannot tell: the call may be
// theirs. It cuts (shutdown) those connections after cutAfter. It reads
// the host's TCP table (/proc/net/tcp, a few ms on a busy host), so it
// guards the calls that act beyond the node's data and are rare (query,
// abort, spawn, publish, unpublish, lookup, log, event), not a client's
// connect nor its fences.
func (s *Server) guard(what string) error {
	listening, err := s.listeningSockets()
	var in []intruder
	if err == nil {
		in, err = intruders("/proc/self/net", "/proc/self/fd", os.Geteuid(), listening, peercred.LookupTCP)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("call", what).Msg("pmix: refused: who is connected to this server is unknown")
		return plugin.Errorf(plugin.ErrPermission, "%s: who is connected to this PMIx server is unknown: %v", what, err)
	}
	if len(in) == 0 {
		return nil
	}
	// On the server's owner: Close waits for it, and cuts at once.
	s.spawn(func() {
		wait := time.NewTimer(cutAfter)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-s.ctx.Done():
		}
		cut(in)
	})
	for _, c := range in {
		user := "a peer not on this host"
		if c.uid >= 0 {
			user = peercred.UserName(uint32(c.uid))
		}
		s.log.Warn().Int("uid", c.uid).Str("user", user).Str("call", what).
			Msg("pmix: refused, and cuts, a connection of another user to this server (libpmix takes the uid a client or tool claims on its word)")
	}
	s.mu.Lock()
	s.lastCut, s.lastCutUID = time.Now(), in[len(in)-1].uid
	s.mu.Unlock()
	return plugin.Errorf(plugin.ErrPermission, "%s: another user connected to this PMIx server; its connection is cut", what)
}

// cut shuts the connections in down. The descriptors are libpmix's: each
// is cut only while it is still the socket that was found (it may have
// been closed and its number reused).
func cut(in []intruder) {
	for _, c := range in {
		var st syscall.Stat_t
		if syscall.Fstat(c.fd, &st) == nil && st.Ino == c.inode {
			_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
		}
	}
}
