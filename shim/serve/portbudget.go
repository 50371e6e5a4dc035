package serve

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/shim/internal/loglines"
)

// The PMI_PORT listener is on TCP, where any local user (and, bound
// beyond loopback, any host) can connect. Live connections are bounded
// by who makes them, so that no one else can take the places of the
// job's own tasks: the job's user on this host has a budget of its own
// (a task retrying a failed handshake is fine, a flood is not), and
// every other peer (another local user, who must pass the challenge with
// the job's secret, or a task on another host) shares a second budget of
// the same size. A connection of theirs must claim a rank within
// claimWait or is closed, and a local user other than the job's may hold
// at most pendingPerUser of them at once.
const (
	claimWait      = 5 * time.Second
	pendingPerUser = 8
	// refusalsPerSecond bounds the log lines of refused connections; the
	// rest are counted in the next line.
	refusalsPerSecond = 5
)

// portBudget counts the live PMI_PORT connections; guarded by Server.mu.
type portBudget struct {
	limit   int            // each budget's size: 2 × the PMI_PORT tasks + 8
	owner   int            // the job's user's live connections
	others  int            // everyone else's
	pending map[string]int // everyone else's that have not claimed a rank yet, by source

	lines   loglines.Budget // refusal lines, refusalsPerSecond a second
	last    bridge.PortPeer // the last refusal not logged
	lastWhy string
}

// portConn is one admitted connection's place in the budget.
type portConn struct {
	owner   bool
	source  string
	pending bool        // counted in pending[source]; guarded by Server.mu
	gone    bool        // its place was given back; guarded by Server.mu
	timer   *time.Timer // awaitClaim's; guarded by Server.mu
}

func newPortBudget(tasks int) *portBudget {
	return &portBudget{limit: 2*tasks + 8, pending: map[string]int{}, lines: loglines.Budget{PerSecond: refusalsPerSecond}}
}

// admit gives a connection of source its place, or says why it has none.
func (b *portBudget) admit(owner bool, source string) (*portConn, string) {
	if owner {
		if b.owner >= b.limit {
			return nil, fmt.Sprintf("the job's user already has %d open connections", b.owner)
		}
		b.owner++
		return &portConn{owner: true, source: source}, ""
	}
	if b.others >= b.limit {
		return nil, fmt.Sprintf("%d connections of other users or hosts are open", b.others)
	}
	if strings.HasPrefix(source, "uid ") && b.pending[source] >= pendingPerUser {
		return nil, fmt.Sprintf("%s already has %d connections that claimed no rank", source, b.pending[source])
	}
	b.others++
	b.pending[source]++
	return &portConn{source: source, pending: true}, ""
}

// claimed ends pc's pending time: it claimed a rank, or is closing.
func (b *portBudget) claimed(pc *portConn) {
	if pc.pending {
		pc.pending = false
		if b.pending[pc.source]--; b.pending[pc.source] <= 0 {
			delete(b.pending, pc.source)
		}
	}
}

// leave gives pc's place back.
func (b *portBudget) leave(pc *portConn) {
	pc.gone = true
	b.claimed(pc)
	if pc.timer != nil {
		pc.timer.Stop()
	}
	if pc.owner {
		b.owner--
	} else {
		b.others--
	}
}

// refusePort logs, within the budget's rate, a connection refused or
// closed, naming its peer (which may be slow: only when logged); those
// beyond the rate are summed up in a line a second later.
func (s *Server) refusePort(peer bridge.PortPeer, why string) {
	s.mu.Lock()
	ok, unlogged, first := s.budget.lines.Take(time.Now())
	if !ok {
		s.budget.last, s.budget.lastWhy = peer, why
	}
	s.mu.Unlock()
	if first {
		time.AfterFunc(time.Second, s.sumRefusals)
	}
	if !ok {
		return
	}
	ev := s.log.Warn().Str("peer", peer.String()).Str("why", why)
	if unlogged > 0 {
		ev = ev.Int("unlogged_before", unlogged)
	}
	ev.Msg("pmi_port: connection refused")
}

// sumRefusals logs the refusals beyond the rate since the last line.
func (s *Server) sumRefusals() {
	s.mu.Lock()
	n, last, why := s.budget.lines.Quiet(), s.budget.last, s.budget.lastWhy
	s.mu.Unlock()
	if n > 0 {
		s.log.Warn().Int("refused", n).Str("last_peer", last.String()).Str("last_why", why).Msg("pmi_port: more connections refused")
	}
}

// awaitClaim closes tc once claimWait passed unless its session claimed
// a rank by then: a connection of another user or host that proves
// nothing holds no place for long. Called with s.mu held.
func (s *Server) awaitClaim(pc *portConn, tc *taskConn, sess *bridge.Session, peer bridge.PortPeer) {
	pc.timer = time.AfterFunc(claimWait, func() {
		bound := sess.Bound()
		s.mu.Lock()
		s.budget.claimed(pc)
		done := s.closing || pc.gone
		s.mu.Unlock()
		if bound || done {
			return
		}
		s.refusePort(peer, fmt.Sprintf("claimed no rank within %v; closed", claimWait))
		tc.abort(net.ErrClosed)
	})
}
