package fencetree

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/plugin"
)

const timeout = 10 * time.Second

// part is a fence part carrying ranks, as node from sends it.
func part(from string, ranks ...int32) *plugin.FenceRequest {
	req := &plugin.FenceRequest{
		ID: "world/1", Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}},
		Node: from, Data: []byte(from + ";"), Collect: true, Timeout: timeout,
	}
	for _, r := range ranks {
		req.LocalProcs = append(req.LocalProcs, plugin.Proc{Nspace: job.Nspace, Rank: r})
	}
	return req
}

// rig drives Gathers as a driver would, on a clock of its own, and
// writes down every effect as a line, so that a test is a table of
// events and the lines they must give.
type rig struct {
	m       *Gathers
	now     time.Time
	start   time.Time
	armed   map[Timer]time.Time // the timers armed, with when they are due
	ups     []Up                // the calls up, in order, by index
	waiters map[Waiter]string   // each part's waiter, by its node
	trace   []string
}

func newRig(self int) *rig {
	start := time.Unix(1_000_000, 0)
	return &rig{
		m:   NewGathers(Place{Job: job, Self: self, Width: 1, Root: "the root"}),
		now: start, start: start, armed: map[Timer]time.Time{}, waiters: map[Waiter]string{},
	}
}

func kindName(k TimerKind) string {
	if k == Flush {
		return "flush"
	}
	return "expiry"
}

func ranksOf(req *plugin.FenceRequest) string {
	var rs []int32
	for _, p := range req.LocalProcs {
		rs = append(rs, p.Rank)
	}
	return plugin.RankList(rs)
}

func (r *rig) apply(eff Effects) {
	for _, a := range eff.Arm {
		r.armed[a.Timer] = r.now.Add(a.After)
		r.trace = append(r.trace, fmt.Sprintf("arm %s in %s", kindName(a.Kind), a.After))
	}
	for _, tm := range eff.Disarm {
		if _, ok := r.armed[tm]; ok {
			delete(r.armed, tm)
			r.trace = append(r.trace, "disarm "+kindName(tm.Kind))
		}
	}
	for _, a := range eff.Answers {
		var to []string
		for _, w := range a.Waiters {
			to = append(to, r.waiters[w])
		}
		res := "ok"
		if a.Result.Err != nil {
			res = a.Result.Err.Error()
		}
		r.trace = append(r.trace, fmt.Sprintf("answer %s: %s", strings.Join(to, ","), res))
	}
	for _, up := range eff.Up {
		r.ups = append(r.ups, up)
		r.trace = append(r.trace, fmt.Sprintf("up %d: %s from %s in %s", len(r.ups)-1, ranksOf(up.Req), up.Req.Node, up.Req.Timeout))
	}
	for _, l := range eff.Logs {
		r.trace = append(r.trace, fmt.Sprintf("log %s: %s", l.Level, l.Msg))
	}
}

// step is one event: at a time since the first, a part arriving, a call
// up answered (up: its index; err: its failure), the timers due by then,
// or the job stopped.
type step struct {
	at   time.Duration
	part *plugin.FenceRequest
	up   int // with answer: which call up is answered
	ans  bool
	err  error
	stop error
}

func (r *rig) run(steps []step) {
	for _, s := range steps {
		r.advance(r.start.Add(s.at))
		switch {
		case s.part != nil:
			w := make(chan Result, 1)
			r.waiters[w] = s.part.Node
			a, eff := r.m.Arrive(s.part, w, r.now)
			r.apply(eff)
			if a.Alone != nil {
				r.trace = append(r.trace, fmt.Sprintf("alone: %s from %s in %s", ranksOf(a.Alone), a.Alone.Node, a.Alone.Timeout))
			}
		case s.ans:
			up := r.ups[s.up]
			r.apply(r.m.Answered(up.G, up.Batch, Result{Resp: &plugin.FenceResponse{}, Err: s.err}))
		case s.stop != nil:
			r.apply(r.m.Stop(func(id string) error { return fmt.Errorf("fence %s: %w", id, s.stop) }))
		}
	}
}

// advance fires the armed timers due by t, in order.
func (r *rig) advance(t time.Time) {
	for {
		var next *Timer
		for tm, at := range r.armed {
			if !at.After(t) && (next == nil || at.Before(r.armed[*next])) {
				next = &tm
			}
		}
		if next == nil {
			r.now = t
			return
		}
		tm := *next
		r.now = r.armed[tm]
		delete(r.armed, tm)
		r.trace = append(r.trace, fmt.Sprintf("at %s: %s due", r.now.Sub(r.start), kindName(tm.Kind)))
		if tm.Kind == Flush {
			r.apply(r.m.FlushDue(tm.G, r.now))
		} else {
			r.apply(r.m.ExpiryDue(tm.G))
		}
	}
}

// Each of the gather's decisions, as a table of events and the effects
// they give: no goroutine, no timer, no channel.
func TestGathers(t *testing.T) {
	errLost := errors.New("link lost")
	for _, tc := range []struct {
		name  string
		self  int
		steps []step
		want  []string
	}{{
		name: "every part before half the time-out goes up once, and the answer comes down",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: time.Second, part: part("n2", 2, 3, 4)},
			{at: 2 * time.Second, ans: true, up: 0},
			{at: 20 * time.Second},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"disarm flush", "up 0: ranks 0-4 from n1 in 9s",
			"disarm expiry", "answer n1,n2: ok",
		},
	}, {
		name: "at half the time-out what came goes up, naming whom it misses; a late part goes up alone",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: 7 * time.Second, part: part("n2", 2, 3, 4)},
			{at: 8 * time.Second, ans: true, up: 0},
			{at: 20 * time.Second},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"at 5s: flush due", "up 0: ranks 0-1 from n1 in 5s",
			"log warn: fence tree: fence world/1: ranks 2-3 (node n2), rank 4 (node n3) did not arrive in 5s; sending the subtree's part up without them",
			"log info: fence tree: a late part from node n2 goes up alone", "alone: ranks 2-4 from n2 in 3s",
			"answer n1: ok",
			"at 12s: expiry due",
		},
	}, {
		name: "a subtree half there at half the time-out: the rest goes up alone",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: time.Second, part: part("n2", 2, 3)},
			{at: 6 * time.Second, part: part("n3", 4)},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"at 5s: flush due", "up 0: ranks 0-3 from n1 in 5s",
			"log warn: fence tree: fence world/1: rank 4 (node n3) did not arrive in 5s; sending the subtree's part up without them",
			"log info: fence tree: a late part from node n3 goes up alone", "alone: rank 4 from n3 in 4s",
		},
	}, {
		name: "no answer by the time-out: the waiting parts fail, naming the parent",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: time.Second, part: part("n2", 2, 3, 4)},
			{at: 13 * time.Second},
			{at: 14 * time.Second, ans: true, up: 0},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"disarm flush", "up 0: ranks 0-4 from n1 in 9s",
			"at 12s: expiry due",
			"answer n1,n2: fence world/1: the root did not answer in 10s",
			"log warn: fence tree: failing the subtree's waiting parts: fence world/1: the root did not answer in 10s",
		},
	}, {
		name: "under a parent node, the expiry names it, and whom the subtree misses",
		self: 1,
		steps: []step{
			{at: 0, part: part("n2", 2, 3)},
			{at: 13 * time.Second},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"at 5s: flush due", "up 0: ranks 2-3 from n2 in 5s",
			"log warn: fence tree: fence world/1: rank 4 (node n3) did not arrive in 5s; sending the subtree's part up without them",
			"at 12s: expiry due",
			"answer n2: fence world/1: rank 4 (node n3) did not arrive in 10s",
			"log warn: fence tree: failing the subtree's waiting parts: fence world/1: rank 4 (node n3) did not arrive in 10s",
		},
	}, {
		name: "a failed call up fails its parts alone",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: time.Second, part: part("n2", 2, 3, 4)},
			{at: 2 * time.Second, ans: true, up: 0, err: errLost},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"disarm flush", "up 0: ranks 0-4 from n1 in 9s",
			"disarm expiry", "answer n1,n2: link lost",
		},
	}, {
		name: "the job stops: every waiting part fails with its reason, and the timers go",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: time.Second, stop: errors.New("aborted by rank 3")},
			{at: 20 * time.Second},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"disarm flush", "disarm expiry", "answer n1: fence world/1: aborted by rank 3",
		},
	}, {
		name: "a fence of this node's ranks alone, and another job's, go up as they are",
		steps: []step{
			{at: 0, part: &plugin.FenceRequest{ID: "sub", Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: 0}, {Nspace: job.Nspace, Rank: 1}},
				LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: 0}, {Nspace: job.Nspace, Rank: 1}}, Node: "n1", Timeout: timeout}},
			{at: 0, part: &plugin.FenceRequest{ID: "c", Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: 0}, {Nspace: "other", Rank: 0}},
				LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: 0}}, Node: "n1", Timeout: timeout}},
		},
		want: []string{"alone: ranks 0-1 from n1 in 10s", "alone: rank 0 from n1 in 10s"},
	}, {
		name: "the same fence again after the first completed is a new gather",
		steps: []step{
			{at: 0, part: part("n1", 0, 1)},
			{at: 0, part: part("n2", 2, 3, 4)},
			{at: time.Second, part: part("n1", 0, 1)},
			{at: 2 * time.Second, ans: true, up: 0},
		},
		want: []string{
			"arm flush in 5s", "arm expiry in 12s",
			"disarm flush", "up 0: ranks 0-4 from n1 in 10s",
			"arm flush in 5s", "arm expiry in 12s",
			"disarm expiry", "answer n1,n2: ok",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(tc.self)
			r.run(tc.steps)
			if diff := cmp.Diff(tc.want, r.trace); diff != "" {
				t.Errorf("effects (-want +got):\n%s", diff)
			}
		})
	}
}

// A caller whose own deadline passes hears what its subtree misses.
func TestGatherTimeoutErr(t *testing.T) {
	r := newRig(0)
	w := make(chan Result, 1)
	a, _ := r.m.Arrive(part("n2", 2, 3), w, r.now)
	err := r.m.TimeoutErr(a.G)
	if !errors.Is(err, plugin.ErrTimeout) || err.Error() != "fence world/1: ranks 0-1 (node n1), rank 4 (node n3) did not arrive in 10s" {
		t.Errorf("TimeoutErr = %v", err)
	}
}
