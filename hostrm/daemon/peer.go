package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/gopmi/gopmi/hostrm/internal/procstat"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// peer is who is at the other end of a connection, from the kernel
// (SO_PEERCRED), not from anything the caller says.
type peer struct {
	uid uint32
	pid int32
	// node is the node whose daemon relayed the call to this hub, and
	// start the caller's start time there; "" for a caller on this node.
	node  string
	start string
}

// conn is one connection's context: its peer, its life and the runs it
// registered.
type conn struct {
	ctx   context.Context // ends when the connection does
	peer  peer
	known bool // the kernel gave the peer's credentials
	mu    sync.Mutex
	runs  map[*run]bool
}

// attach records that the connection registered r; it reports whether
// that is new. A run that ended and registers again is a new *run.
func (c *conn) attach(r *run) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs[r] {
		return false
	}
	if c.runs == nil {
		c.runs = map[*run]bool{}
	}
	c.runs[r] = true
	return true
}

type connKey struct{}

// ConnContext is link.ServeConns's hook: it reads the peer's credentials
// from the unix socket and keeps them, with the connection's life, in the
// context every call on it gets.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	cc := &conn{}
	if cred, err := peercred.Of(c); err == nil {
		cc.peer, cc.known = peer{uid: cred.Uid, pid: cred.Pid}, true
	}
	ctx = context.WithValue(ctx, connKey{}, cc)
	cc.ctx = ctx
	return ctx
}

// withPeer is ConnContext for a call a node's daemon relayed: its peer is
// who that daemon's kernel said the caller is.
func withPeer(ctx context.Context, p peer) context.Context {
	cc := &conn{peer: p, known: true}
	ctx = context.WithValue(ctx, connKey{}, cc)
	cc.ctx = ctx
	return ctx
}

// connOf is the connection a call came on, nil outside ServeConns.
func connOf(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

// peerOf is the caller, and whether the kernel said who it is.
func peerOf(ctx context.Context) (peer, bool) {
	if c := connOf(ctx); c != nil && c.known {
		return c.peer, true
	}
	return peer{}, false
}

// userName is uid's login name, or the number.
func userName(uid uint32) string { return peercred.UserName(uid) }

// callerRun checks that run names the calling process itself: a run's
// name is "<host>:<pid>:<start time>" (RunName), and the pid must be the
// caller's (SO_PEERCRED) with that start time, so that no process can
// register, or take over, another's run.
//
// A call relayed by another node's daemon carries the start time that
// daemon read.
func callerRun(run string, p peer) error {
	parts := strings.Split(run, ":")
	if len(parts) < 3 {
		return fmt.Errorf("run %q is not <host>:<pid>:<start time>", run)
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || int32(pid) != p.pid {
		return fmt.Errorf("run %q is not the calling process (pid %d)", run, p.pid)
	}
	start := p.start
	if p.node == "" {
		start = procStart(pid)
	}
	if start == "" || start != parts[len(parts)-1] {
		return fmt.Errorf("run %q: pid %d started at another time", run, pid)
	}
	return nil
}

// procStart is pid's start time, "" when unknown.
func procStart(pid int) string {
	st, _ := procstat.Read(pid)
	return st.Start
}

// runAlive reports whether the run id, whose process is pid on node ("":
// this one), still runs: its pid with the start time in its name. A run
// whose pid is unknown counts as alive, as does one on a node that does
// not answer.
func (s *Server) runAlive(node string, pid int, id string) bool {
	if pid <= 0 {
		return true
	}
	parts := strings.Split(id, ":")
	start := ""
	if len(parts) >= 3 {
		start = parts[len(parts)-1]
	}
	if node != "" {
		return s.remoteAlive(node, pid, start)
	}
	return pidAlive(pid, start)
}

// pidAlive reports whether pid runs on this node, and started at start
// when that is not "".
func pidAlive(pid int, start string) bool {
	st, ok := procstat.Read(pid)
	// A killed process is a zombie when its sockets close.
	return ok && !st.Exited() && (start == "" || start == st.Start)
}

// String names a peer for messages.
func (p peer) String() string {
	if p.node != "" {
		return fmt.Sprintf("uid %d (%s), pid %d on node %s", p.uid, userName(p.uid), p.pid, p.node)
	}
	return fmt.Sprintf("uid %d (%s), pid %d", p.uid, userName(p.uid), p.pid)
}
