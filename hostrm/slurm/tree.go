package slurm

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/hostrm/internal/overlay"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/wake"
)

// The fence tree. A step's nodes form a tree of width w under the
// coordinator, in Slurm's node order (package fencetree has its shape).
// Each node's backend (in gopmi-slurm shim's process, or gopmi-rm-slurm)
// gathers a fence from its own shim and from its children's subtrees, and
// sends one call up with the parts concatenated and the local
// participants joined; the answer comes back down the same calls. (A
// whole job's collecting fence on at most w nodes is exchanged instead:
// the parts go from node to node and only a barrier goes up,
// exchange.go.) A fence costs one message up and one down per
// tree edge, and the coordinator hears at most w calls per fence. Every
// node of a job on several nodes listens on TCP, for its children and for
// the nodes that read its data (the step's authenticated, private link,
// as the coordinator's, in the roles tree-parent and tree-child), at an
// address and port the others compute (package overlay).
//
// Every other call of a node goes up the same link: a node with children
// passes its children's calls (names, spawn, abort, Configure) on to its
// own parent, so that the coordinator holds at most w links.
//
// Barriers (modex mode) are joined as collecting fences are, without
// their data: each node keeps its own and serves it (modex.go). Every
// node watches for its job's abort at its parent, which fails the fences
// it holds and the reads of its data.
//
// What becomes of each part (it goes up at once, waits for its subtree,
// goes up at half the time-out, fails naming whom the subtree misses) is
// decided by fencetree.Gathers, a pure type; the tree only carries its
// decisions out: it arms the timers on its clock, runs the calls up on
// its crew and answers the waiters, so that tests drive its time and
// close leaves nothing behind.

// DefaultTreeWidth is Slurm's own TreeWidth default.
const DefaultTreeWidth = 16

const (
	// expireGrace is how long past a fence's Timeout the tree keeps it:
	// the coordinator's own time-out, which names every missing rank,
	// comes first; the tree's names only its subtree's. It is below the
	// bridge's grace (5 s) so that the tree's message reaches the client
	// before the bridge's context cuts the call.
	expireGrace = fencetree.ExpireGrace
	// sendGrace bounds a call up beyond the Timeout it carries, for the
	// answer to come back down.
	sendGrace = 5 * time.Second
	// childDrain bounds how long this node's ranks wait, answered, for
	// the answers of their fence to reach the children.
	childDrain = 2 * time.Second
	// childFlush is how long a child's answer is given to leave this
	// process once its call returned (gRPC writes it after).
	childFlush = 5 * time.Millisecond
)

// treeConfig is what a node's place in the tree is made from.
type treeConfig struct {
	width  int
	job    plugin.Job
	self   int         // this node's index in job.Nodes
	toRoot plugin.Full // the node's link up: its parent, or the coordinator
	// ov is the node's overlay (its listener, its links); nil: one of
	// the tree's own, with secret, ports and listen (tests).
	ov     *overlay.Overlay
	secret string
	ports  overlay.PortRange
	listen func(network, addr string) (net.Listener, error)
	log    zerolog.Logger
	clock  crew.Clock // nil: the wall clock
	// exchange lets the nodes of a flat tree exchange a collecting
	// fence's parts (exchange.go).
	exchange bool
}

// tree is one node's place in its job's fence tree: the driver of its
// gathers (package fencetree decides, the tree carries out), the server
// of its children, its own data and its reads of others'. Its links are
// the overlay's.
type tree struct {
	fencetree.Place
	log    zerolog.Logger
	crew   *crew.Crew
	toRoot plugin.Full      // the node's link up (the overlay's)
	ov     *overlay.Overlay // the node's listener and links
	data   nodeData         // its own data and its reads of others' (modex.go)
	drain  drain            // the children's parts passing through (drain.go)
	ex     *exchanger       // the parts other nodes give this one (exchange.go)

	mu     sync.Mutex
	fences gathering // the subtree's collecting fences
	end    ending    // the job's abort, or the tree's close
	news   news      // the job's events, as the node heard them (news.go)
}

// gathering is the gathers of the node's subtree, which decide, and the
// timers the tree armed for them. Guarded by the tree's mu.
type gathering struct {
	*fencetree.Gathers
	timers map[fencetree.Timer]func() bool // armed, with their stop
}

// ending is why the tree takes nothing more. Guarded by the tree's mu.
type ending struct {
	err    error // the job was aborted: every fence fails with it
	closed bool  // the node left
	// seen is closed once err is set (or the tree closed): it ends
	// every wait for the job's news and every exchange.
	seen wake.Cond
}

func newTree(c treeConfig) *tree {
	if c.ov == nil {
		c.ov = overlay.New(overlay.Config{Secret: c.secret, Ports: c.ports, Listen: c.listen})
	}
	place := fencetree.Place{Job: c.job, Self: c.self, Width: c.width, Root: "the coordinator"}
	cr := crew.New(c.clock)
	t := &tree{
		Place: place, toRoot: c.toRoot, ov: c.ov,
		// No job or node fields: the shim's logger has them.
		log:    c.log,
		crew:   cr,
		drain:  drain{crew: cr},
		fences: gathering{Gathers: fencetree.NewGathers(place), timers: map[fencetree.Timer]func() bool{}},
		data: nodeData{peers: &peers{links: overlay.NewLinks(c.job, c.secret, c.ov.Ports()),
			viaRoot: c.toRoot.DirectModex}},
	}
	t.ex = &exchanger{t: t, on: c.exchange}
	return t
}

// arrival is what the tree decided for one part.
type arrival struct {
	up   *plugin.FenceRequest // goes up by itself, as it is or with what is left of its time-out
	g    *fencetree.Gather    // else it joined g and waits on wait
	wait chan fencetree.Result
	err  error
}

// fence takes one part (this node's shim's, or a child's subtree's) and
// returns the fence's answer.
func (t *tree) fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	a := t.arrive(req)
	switch {
	case a.err != nil:
		return nil, a.err
	case a.up != nil:
		return t.send(ctx, a.up)
	}
	select {
	case r := <-a.wait:
		return r.Resp, r.Err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.mu.Lock()
			err := t.fences.TimeoutErr(a.g)
			t.mu.Unlock()
			return nil, err
		}
		return nil, plugin.Errorf(plugin.ErrAborted, "fence %s: caller went away: %v", req.ID, ctx.Err())
	}
}

// arrive hands one part to the gathers, without waiting, and carries out
// what they decide: it goes up alone, or joins its subtree's gather,
// which goes up when complete or at half its time-out.
func (t *tree) arrive(req *plugin.FenceRequest) arrival {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Involves(req) {
		if err := t.refusalLocked(req.ID); err != nil {
			return arrival{err: err}
		}
	}
	ch := make(chan fencetree.Result, 1)
	a, eff := t.fences.Arrive(req, ch, t.crew.Now())
	t.applyLocked(eff)
	if a.Alone != nil {
		return arrival{up: a.Alone}
	}
	return arrival{g: a.G, wait: ch}
}

// applyLocked carries out what the gathers decided. Called with mu held:
// the timers' and the calls' events come back under it.
func (t *tree) applyLocked(eff fencetree.Effects) {
	for _, a := range eff.Arm {
		t.fences.timers[a.Timer] = t.crew.After(a.After, func() { t.timerDue(a.Timer) })
	}
	for _, tm := range eff.Disarm {
		if stop, ok := t.fences.timers[tm]; ok {
			delete(t.fences.timers, tm)
			stop()
		}
	}
	for _, a := range eff.Answers {
		for _, w := range a.Waiters {
			w <- a.Result
		}
	}
	for _, up := range eff.Up {
		started := t.crew.Spawn(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, up.Req.Timeout+sendGrace)
			defer cancel()
			resp, err := t.send(ctx, up.Req)
			t.mu.Lock()
			defer t.mu.Unlock()
			t.applyLocked(t.fences.Answered(up.G, up.Batch, fencetree.Result{Resp: resp, Err: err}))
		})
		if !started {
			t.applyLocked(t.fences.Answered(up.G, up.Batch, fencetree.Result{Err: closedErr(up.Req.ID)}))
		}
	}
	for _, l := range eff.Logs {
		t.log.WithLevel(l.Level).Str("fence", l.Fence).Msg(l.Msg)
	}
}

// timerDue is a gather's timer firing.
func (t *tree) timerDue(tm fencetree.Timer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.fences.timers[tm]; !ok {
		return // disarmed meanwhile
	}
	delete(t.fences.timers, tm)
	switch tm.Kind {
	case fencetree.Flush:
		t.applyLocked(t.fences.FlushDue(tm.G, t.crew.Now()))
	case fencetree.Expiry:
		t.applyLocked(t.fences.ExpiryDue(tm.G))
	}
}

// closedErr is a fence's error once the tree has closed.
func closedErr(id string) error {
	return plugin.Errorf(plugin.ErrAborted, "fence %s: the node's fence tree has closed", id)
}

// close leaves the tree: the fences it holds fail, and its goroutines
// and timers end. The link up is the node's, which closes it.
func (t *tree) close() {
	t.mu.Lock()
	t.end.closed = true
	t.applyLocked(t.fences.Stop(closedErr))
	t.mu.Unlock()
	t.data.mine.fail(plugin.Errorf(plugin.ErrAborted, "the node has left the job"))
	t.end.seen.Close()
	t.crew.Close()
	t.data.peers.links.Close()
}

// refusal is why the tree takes fence id no more (the job's abort, or
// the tree's close), or nil.
func (t *tree) refusal(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusalLocked(id)
}

// refusalLocked is refusal with mu held.
func (t *tree) refusalLocked(id string) error {
	if t.end.err != nil {
		return t.end.err
	}
	if t.end.closed {
		return closedErr(id)
	}
	return nil
}
