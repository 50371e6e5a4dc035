//go:build pmix

package pmix

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/plugin"
)

// notices batches the reports of the clients' connects and finalizes to
// the backend: while one call is on its way, the next clients' reports
// queue and go together in the next, connects first (a client's connect
// is always reported before its finalize). A client waits in
// PMIx_Finalize until the backend heard of it (goClientFinalized), and
// under Slurm each report was a round trip to the coordinator: a node's
// 64 clients finalizing together made 64 calls and waited 14-17 ms each
// (median, a 128-rank job on two nodes) while the CPUs idled at the end
// of the job. Batched, a node makes a few calls.
type notices struct {
	connected, finalized []notice
	busy                 bool // a sender is at work
}

// notice is one client's report and what to do once the backend heard
// it (or the call failed: a report is not retried).
type notice struct {
	p    plugin.Proc
	done func()
}

// notify queues p's connect (finalize false) or finalize report, and
// calls done once it was made. It never waits for the backend itself,
// unless the server has closed: then a finalize is reported at once (a
// sender at work is waited for by Close, and makes what it finds queued)
// and a connect not at all.
func (s *Server) notify(finalize bool, p plugin.Proc, done func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if finalize {
			s.sendNotice("client finalized", []notice{{p, done}}, plugin.Full.ClientFinalized)
		} else {
			done()
		}
		return
	}
	if finalize {
		s.notices.finalized = append(s.notices.finalized, notice{p, done})
	} else {
		s.notices.connected = append(s.notices.connected, notice{p, done})
	}
	start := !s.notices.busy
	s.notices.busy = true
	s.mu.Unlock()
	if start && !s.spawn(s.sendNotices) {
		s.sendNotices() // closed since: still heard, bounded (newsBound)
	}
}

// sendNotices makes the queued reports, a call of each kind per round,
// until none is queued.
func (s *Server) sendNotices() {
	for {
		s.mu.Lock()
		conn, fin := s.notices.connected, s.notices.finalized
		s.notices.connected, s.notices.finalized = nil, nil
		if len(conn) == 0 && len(fin) == 0 {
			s.notices.busy = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.sendNotice("client connected", conn, plugin.Full.ClientConnected)
		s.sendNotice("client finalized", fin, plugin.Full.ClientFinalized)
	}
}

// sendNotice makes one report of ns, within a bound of its own (also
// while the server closes: it is news the backend must hear), and then
// calls their done.
func (s *Server) sendNotice(what string, ns []notice, call func(plugin.Full, context.Context, *plugin.ClientRequest) error) {
	if len(ns) == 0 {
		return
	}
	procs := make([]plugin.Proc, len(ns))
	for i, n := range ns {
		procs[i] = n.p
	}
	ctx, cancel := s.newsContext()
	err := call(s.be, ctx, &plugin.ClientRequest{Procs: procs})
	cancel()
	if err != nil {
		who := procs[0].String()
		if len(procs) > 1 {
			who = fmt.Sprintf("%s and %d more", who, len(procs)-1)
		}
		s.log.Warn().Err(err).Str("procs", who).Msg("pmix: " + what)
	}
	for _, n := range ns {
		n.done()
	}
}
