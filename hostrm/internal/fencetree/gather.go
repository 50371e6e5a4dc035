package fencetree

import (
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
)

// The gather. A node gathers a collecting fence from its own shim and
// from its children's subtrees, and sends one call up with the parts
// concatenated and the local participants joined; the answer comes back
// down to every part. A subtree still missing a part when half the
// fence's time-out has passed sends what it has up, with the rest of the
// time-out, and logs whom it misses; later parts go up one by one, so
// that the root, which times the fence from its first arrival, names
// exactly the ranks that never arrived. A fence the root does not answer
// within its time-out (and ExpireGrace) fails here, naming the ranks
// this subtree never got, or the parent that never answered.
//
// Gathers decides all of that and does none of it: each event (a part
// arrives, the flush is due, the fence expires, an answer comes back,
// the job stops) comes in with the time, and what to do comes out as
// Effects (timers to arm and disarm, a call to send up, waiters to
// answer, lines to log), which its driver carries out. It starts no
// goroutine, reads no clock and sends on no channel: its tests are
// tables of events and effects.

// ExpireGrace is how long past a fence's time-out a gather is kept: the
// root's own time-out, which names every missing rank, comes first; a
// gather's names only its subtree's.
const ExpireGrace = 2 * time.Second

// Result is a fence's answer to one part.
type Result struct {
	Resp *plugin.FenceResponse
	Err  error
}

// Waiter is where a part waits for its answer; the driver sends it one
// Result.
type Waiter chan<- Result

// Gather is one collecting fence as a subtree sees it.
type Gather struct {
	key     string
	first   *plugin.FenceRequest // the first part: ID, Procs, Collect
	start   time.Time
	timeout time.Duration
	ranks   []int32        // the subtree's participants, sorted
	have    map[int32]bool // those that arrived
	parts   []*plugin.FenceRequest
	waiters []Waiter // parts not sent up yet
	batches []*Batch // parts sent up, waiting for the answer
	sent    bool     // the gathered parts went up
}

// ID is the fence's ID.
func (g *Gather) ID() string { return g.first.ID }

// Batch is the waiters of one call up: the call's answer, the fence's
// expiry or the job's stop answers them, whichever is first.
type Batch struct {
	waiters []Waiter
	done    bool
}

// TimerKind tells a gather's two timers apart.
type TimerKind int

const (
	// Flush is due at half the time-out: what came goes up.
	Flush TimerKind = iota
	// Expiry is due at the time-out and ExpireGrace: the gather ends.
	Expiry
)

// Timer names one timer of one gather.
type Timer struct {
	G    *Gather
	Kind TimerKind
}

// Arm asks for the event of a timer after a while.
type Arm struct {
	Timer
	After time.Duration
}

// Up is a call to send up: the gathered parts as one request. Its answer
// (or its failure) comes back as the event Answered.
type Up struct {
	Req   *plugin.FenceRequest
	G     *Gather
	Batch *Batch
}

// Answer gives Waiters the fence's Result.
type Answer struct {
	Waiters []Waiter
	Result  Result
}

// Log is a line for the node's log: what no caller hears of.
type Log struct {
	Level zerolog.Level
	Fence string
	Msg   string
}

// Effects is what an event asks of the driver, in this order: arm,
// disarm (a timer may be disarmed by the event that armed it), answer,
// send up, log.
type Effects struct {
	Arm     []Arm
	Disarm  []Timer
	Answers []Answer
	Up      []Up
	Logs    []Log
}

// Gathers is every open gather of one node.
type Gathers struct {
	place Place
	open  map[string]*Gather
}

// NewGathers returns the gathers of the node at p.
func NewGathers(p Place) *Gathers {
	return &Gathers{place: p, open: map[string]*Gather{}}
}

// Arrival is what became of one part.
type Arrival struct {
	// Alone is the part when it goes up by itself (another job's fence,
	// a fence of this node's ranks only, or a late part, with what is
	// left of its fence's time-out): the caller sends it and hears the
	// answer itself.
	Alone *plugin.FenceRequest
	// G is the gather the part joined, when it did; its waiter gets the
	// answer.
	G *Gather
}

// Arrive takes one part (this node's own, or a child's subtree's) at now:
// it goes up alone, or joins its subtree's gather (w then gets its
// answer), which goes up when it is complete or at half its time-out.
func (m *Gathers) Arrive(req *plugin.FenceRequest, w Waiter, now time.Time) (Arrival, Effects) {
	var eff Effects
	if !m.place.Involves(req) {
		// Another job's fence (a connect's), or no participant here:
		// the part goes up as it is.
		return Arrival{Alone: req}, eff
	}
	key := Key(req)
	g := m.open[key]
	if g == nil {
		ranks, onlyHere := m.place.SubtreeRanks(req.Procs)
		if onlyHere {
			// Nobody below takes part: this node's part goes up as it is.
			return Arrival{Alone: req}, eff
		}
		g = &Gather{key: key, first: req, start: now, timeout: req.TimeoutOrDefault(), ranks: ranks, have: map[int32]bool{}}
		m.open[key] = g
		eff.Arm = append(eff.Arm, Arm{Timer{g, Flush}, g.timeout / 2}, Arm{Timer{g, Expiry}, g.timeout + ExpireGrace})
	}
	for _, p := range req.LocalProcs {
		if _, ok := slices.BinarySearch(g.ranks, p.Rank); ok {
			g.have[p.Rank] = true
		}
	}
	if g.sent {
		// Late: the subtree's parts went up without this one.
		eff.Logs = append(eff.Logs, Log{zerolog.InfoLevel, req.ID, "fence tree: a late part from node " + req.Node + " goes up alone"})
		r := *req
		r.Timeout = g.left(now)
		return Arrival{Alone: &r}, eff
	}
	g.parts = append(g.parts, req)
	g.waiters = append(g.waiters, w)
	if len(g.have) >= len(g.ranks) {
		m.goUp(g, now, &eff)
	}
	return Arrival{G: g}, eff
}

// left is what remains of g's time-out at now, at least a millisecond: a
// zero Timeout would mean the default.
func (g *Gather) left(now time.Time) time.Duration {
	return max(g.timeout-now.Sub(g.start), time.Millisecond)
}

// complete reports whether every participant of the subtree arrived.
func (g *Gather) complete() bool { return len(g.have) >= len(g.ranks) }

// pending reports whether a part of g still waits for an answer.
func (g *Gather) pending() bool {
	return len(g.waiters) > 0 || slices.ContainsFunc(g.batches, func(b *Batch) bool { return !b.done })
}

// FlushDue is g's flush timer: at half the time-out what the subtree
// gathered goes up, and the log names whom it misses.
func (m *Gathers) FlushDue(g *Gather, now time.Time) Effects {
	var eff Effects
	if g.sent || len(g.parts) == 0 {
		return eff
	}
	// A child that has not sent its part by now is stuck or gone: the
	// operator reads here which of this node's subtree it was.
	eff.Logs = append(eff.Logs, Log{zerolog.WarnLevel, g.ID(),
		"fence tree: fence " + g.ID() + ": " + m.missing(g) + " did not arrive in " +
			plugin.RoundDuration(now.Sub(g.start)).String() + "; sending the subtree's part up without them"})
	m.goUp(g, now, &eff)
	return eff
}

// goUp sends the gathered parts as one call.
func (m *Gathers) goUp(g *Gather, now time.Time, eff *Effects) {
	g.sent = true
	eff.Disarm = append(eff.Disarm, Timer{g, Flush})
	merged := *g.first
	merged.Node = m.place.Name()
	merged.LocalProcs = nil
	merged.Data = nil
	for _, p := range g.parts {
		merged.LocalProcs = append(merged.LocalProcs, p.LocalProcs...)
		merged.Data = append(merged.Data, p.Data...)
	}
	merged.Timeout = g.left(now)
	b := &Batch{waiters: g.waiters}
	g.waiters, g.parts = nil, nil
	g.batches = append(g.batches, b)
	if g.complete() {
		// No late part can come. The expiry stays armed, for a parent
		// that never answers.
		m.forget(g)
	}
	eff.Up = append(eff.Up, Up{Req: &merged, G: g, Batch: b})
}

// Answered is the answer (or failure) of the call up of b.
func (m *Gathers) Answered(g *Gather, b *Batch, r Result) Effects {
	var eff Effects
	answer(b, r, &eff)
	if m.open[g.key] != g && !g.pending() {
		// Over: no late part can come and nobody waits. A busy job's
		// fences would otherwise keep a timer each for their whole
		// time-out.
		eff.Disarm = append(eff.Disarm, Timer{g, Expiry})
	}
	return eff
}

// ExpiryDue is g's expiry timer: late parts no longer find it, and parts
// still waiting for the parent fail, naming whom this subtree misses.
func (m *Gathers) ExpiryDue(g *Gather) Effects {
	var eff Effects
	if !g.pending() {
		m.forget(g)
		return eff
	}
	err := m.TimeoutErr(g)
	eff.Logs = append(eff.Logs, Log{zerolog.WarnLevel, g.ID(), "fence tree: failing the subtree's waiting parts: " + err.Error()})
	m.fail(g, err, &eff)
	return eff
}

// Stop fails every open gather with the error errFor gives for its
// fence's ID: the job's abort, or the node's leaving.
func (m *Gathers) Stop(errFor func(id string) error) Effects {
	var eff Effects
	for _, g := range m.open {
		m.fail(g, errFor(g.ID()), &eff)
	}
	return eff
}

// fail answers every waiter of g with err and ends it.
func (m *Gathers) fail(g *Gather, err error, eff *Effects) {
	eff.Disarm = append(eff.Disarm, Timer{g, Flush}, Timer{g, Expiry})
	if len(g.waiters) > 0 {
		g.batches = append(g.batches, &Batch{waiters: g.waiters})
		g.waiters = nil
	}
	for _, b := range g.batches {
		answer(b, Result{Err: err}, eff)
	}
	m.forget(g)
}

// forget takes g out of the open gathers, if it is still there.
func (m *Gathers) forget(g *Gather) {
	if m.open[g.key] == g {
		delete(m.open, g.key)
	}
}

// answer gives b's waiters r unless they have their answer.
func answer(b *Batch, r Result, eff *Effects) {
	if b.done {
		return
	}
	b.done = true
	if len(b.waiters) > 0 {
		eff.Answers = append(eff.Answers, Answer{Waiters: b.waiters, Result: r})
	}
	b.waiters = nil
}

// missing names the subtree's participants that have not arrived,
// grouped by node.
func (m *Gathers) missing(g *Gather) string {
	var out []int32
	for _, r := range g.ranks {
		if !g.have[r] {
			out = append(out, r)
		}
	}
	return RankGroups(m.place.Job, out, MaxGroups)
}

// TimeoutErr says why g failed when its time passed: the ranks the
// subtree never got, or, when all came, the parent that did not answer.
func (m *Gathers) TimeoutErr(g *Gather) error {
	d := plugin.RoundDuration(g.timeout)
	if miss := m.missing(g); miss != "" {
		return plugin.Errorf(plugin.ErrTimeout, "fence %s: %s did not arrive in %s", g.ID(), miss, d)
	}
	return plugin.Errorf(plugin.ErrTimeout, "fence %s: %s did not answer in %s", g.ID(), m.place.ParentName(), d)
}
