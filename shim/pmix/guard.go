//go:build pmix

package pmix

// Who may reach the server: each connection vetted at its accept (vet),
// a guarded call refused and its caller cut (check), refusals logged
// within a rate.

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/peercred"
	"github.com/gopmi/gopmi/shim/internal/loglines"
)

// cutRecent is how long after a cut connection a client's loss is said to
// be perhaps that connection's.
const cutRecent = 10 * time.Second

// cutAfter is how long check lets a refused call's answer go out before
// it cuts the caller's connection: libpmix cannot tell the caller that
// its connection is gone, so a tool cut before its answer would wait for
// ever.
const cutAfter = 200 * time.Millisecond

// handshakeWait bounds how long a connection may say nothing before
// libpmix reads it (vetPeer): a client sends its handshake as it
// connects.
const handshakeWait = time.Second

// refusalsPerSecond bounds the refusals logged one by one: a flood of
// connections is summed up instead.
const refusalsPerSecond = 5

// guard is the server's watch over who is connected to it.
type guard struct {
	log  zerolog.Logger
	crew *crew.Crew // the cuts run on it

	mu       sync.Mutex
	refusing loglines.Budget // refused connections' lines; guarded by mu
	// lastCut and lastCutUID say when check last cut another user's
	// connection, and whose; guarded by mu.
	lastCut    time.Time
	lastCutUID int
	// listening are libpmix's listening sockets, found at the first
	// check; guarded by mu.
	listening []net.TCPAddr
}

func newGuard(log zerolog.Logger, c *crew.Crew) *guard {
	return &guard{log: log, crew: c, refusing: loglines.Budget{PerSecond: refusalsPerSecond}}
}

// vet judges a connection libpmix's listener accepted, before libpmix
// reads a byte of it; a refusal is logged on g (nil: the server closed).
func vet(fd int, g *guard) bool {
	r := vetPeer(fd, os.Geteuid(), peercred.LookupTCP, handshakeWait)
	if r == nil {
		return true
	}
	if g != nil {
		g.refused(r)
	}
	return false
}

// cutLately reports whether check cut another user's connection within
// cutRecent, and whose.
func (g *guard) cutLately() (uid int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastCutUID, !g.lastCut.IsZero() && time.Since(g.lastCut) < cutRecent
}

// listeningSockets are libpmix's listening sockets, read once: libpmix
// makes its listener at its init.
func (g *guard) listeningSockets() ([]net.TCPAddr, error) {
	g.mu.Lock()
	listening := g.listening
	g.mu.Unlock()
	if listening != nil {
		return listening, nil
	}
	listening, err := listeners("/proc/self/net", "/proc/self/fd")
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.listening = listening
	g.mu.Unlock()
	return listening, nil
}

// refused logs r, naming the peer's user and process, at most
// refusalsPerSecond a second; the others are counted and said with the
// next one logged.
func (g *guard) refused(r *refusal) {
	g.mu.Lock()
	ok, quiet, _ := g.refusing.Take(time.Now())
	g.mu.Unlock()
	if !ok {
		return
	}
	ev := g.log.Warn().Int("uid", r.uid).Str("why", r.why)
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

// check refuses the call it is asked for (ErrPermission) while a
// connection to the server has a peer of another user or not on this
// host (intruders, toolpeer.go), or when it cannot tell: the call may be
// theirs. It cuts (shutdown) those connections after cutAfter. It reads
// the host's TCP table (/proc/net/tcp, a few ms on a busy host), so it
// guards the calls that act beyond the node's data and are rare (query,
// abort, spawn, publish, unpublish, lookup, log, event), not a client's
// connect nor its fences.
func (g *guard) check(what string) error {
	listening, err := g.listeningSockets()
	var in []intruder
	if err == nil {
		in, err = intruders("/proc/self/net", "/proc/self/fd", os.Geteuid(), listening, peercred.LookupTCP)
	}
	if err != nil {
		g.log.Warn().Err(err).Str("call", what).Msg("pmix: refused: who is connected to this server is unknown")
		return plugin.Errorf(plugin.ErrPermission, "%s: who is connected to this PMIx server is unknown: %v", what, err)
	}
	if len(in) == 0 {
		return nil
	}
	// On the server's crew: its close cuts at once.
	if !g.crew.Spawn(func(ctx context.Context) {
		g.crew.Sleep(ctx, cutAfter)
		cut(in)
	}) {
		cut(in) // the server is closing: at once
	}
	for _, c := range in {
		user := "a peer not on this host"
		if c.uid >= 0 {
			user = peercred.UserName(uint32(c.uid))
		}
		g.log.Warn().Int("uid", c.uid).Str("user", user).Str("call", what).
			Msg("pmix: refused, and cuts, a connection of another user to this server (libpmix takes the uid a client or tool claims on its word)")
	}
	g.mu.Lock()
	g.lastCut, g.lastCutUID = time.Now(), in[len(in)-1].uid
	g.mu.Unlock()
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
