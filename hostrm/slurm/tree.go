package slurm

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/crew"
	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/hostrm/internal/overlay"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// The fence tree. A step's nodes form a tree of width w under the
// coordinator, in Slurm's node order (package fencetree has its shape).
// Each node's gopmi-rm-slurm gathers a fence from its own shim and from
// its children's subtrees, and sends one call up with the parts
// concatenated and the local participants joined; the answer comes back
// down the same calls. A fence costs one message up and one down per
// tree edge, and the coordinator hears at most w calls per fence. Every
// node of a job on several nodes listens on TCP, for its children and for
// the nodes that read its data (the step's authenticated, private link,
// as the coordinator's, in the roles tree-parent and tree-child), at an
// address and port the others compute (peers.go).
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
	toRoot plugin.Full // the node's link up (the overlay's)
	ov     *overlay.Overlay
	addr   string // where the children reach this node, once it listens
	mine   store  // this node's own contributions (modex.go)
	peers  *peers // reads of the other nodes (modex.go)

	mu       sync.Mutex
	gathers  *fencetree.Gathers
	timers   map[fencetree.Timer]func() bool // the gathers' armed timers, with their stop
	abortErr error                           // the job was aborted: every fence fails with it
	closed   bool
	// abortSeen is closed once abortErr is set (or the tree closed):
	// it ends every wait for the job's news.
	abortSeen wake.Cond
	news      news // the job's events, as the node heard them (news.go)

	// children counts, per fence ID, the children's parts this node is
	// passing up and down; childDone is broadcast as each ends. Guarded
	// by mu.
	children  map[string]int
	lastEnd   time.Time // when a child's part last returned
	childDone wake.Cond

	// boxes are the parts of exchanged fences that other nodes gave
	// this node, by fence key (exchange.go). Guarded by mu.
	boxes map[string]*mailbox
	// exchanging is treeConfig's exchange; warmed is done once the links to the
	// other nodes are being made, for a job whose fences the nodes
	// exchange (exchange.go).
	exchanging bool
	warmed     sync.Once
}

func newTree(c treeConfig) *tree {
	if c.ov == nil {
		c.ov = overlay.New(overlay.Config{Secret: c.secret, Ports: c.ports, Listen: c.listen})
	}
	place := fencetree.Place{Job: c.job, Self: c.self, Width: c.width, Root: "the coordinator"}
	return &tree{
		Place: place, toRoot: c.toRoot, ov: c.ov,
		// No job or node fields: the shim's logger has them.
		log:     c.log,
		crew:    crew.New(c.clock),
		gathers: fencetree.NewGathers(place),
		timers:  map[fencetree.Timer]func() bool{},
		peers: &peers{links: overlay.NewLinks(c.job, c.secret, c.ov.Ports()),
			viaRoot: c.toRoot.DirectModex},
		exchanging: c.exchange,
	}
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
			err := t.gathers.TimeoutErr(a.g)
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
	a, eff := t.gathers.Arrive(req, ch, t.crew.Now())
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
		t.timers[a.Timer] = t.crew.After(a.After, func() { t.timerDue(a.Timer) })
	}
	for _, tm := range eff.Disarm {
		if stop, ok := t.timers[tm]; ok {
			delete(t.timers, tm)
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
			t.applyLocked(t.gathers.Answered(up.G, up.Batch, fencetree.Result{Resp: resp, Err: err}))
		})
		if !started {
			t.applyLocked(t.gathers.Answered(up.G, up.Batch, fencetree.Result{Err: closedErr(up.Req.ID)}))
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
	if _, ok := t.timers[tm]; !ok {
		return // disarmed meanwhile
	}
	delete(t.timers, tm)
	switch tm.Kind {
	case fencetree.Flush:
		t.applyLocked(t.gathers.FlushDue(tm.G, t.crew.Now()))
	case fencetree.Expiry:
		t.applyLocked(t.gathers.ExpiryDue(tm.G))
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
	t.closed = true
	t.applyLocked(t.gathers.Stop(closedErr))
	t.mu.Unlock()
	t.mine.fail(plugin.Errorf(plugin.ErrAborted, "the node has left the job"))
	t.abortSeen.Close()
	t.crew.Close()
	t.peers.links.Close()
}

// childCall counts a child's part of fence id in (+1) or out (-1).
func (t *tree) childCall(id string, d int) {
	t.mu.Lock()
	if t.children == nil {
		t.children = map[string]int{}
	}
	t.children[id] += d
	if t.children[id] <= 0 {
		delete(t.children, id)
		t.lastEnd = t.crew.Now()
	}
	t.mu.Unlock()
	if d < 0 {
		t.childDone.Broadcast()
	}
}

// awaitChildren waits, at most childDrain or until ctx ends, until no
// child's part of fence id ("": of any fence) is still on its way through
// this node, and childFlush after the last one returned, for its answer
// to be written. A fence's parts are answered together, but this node's
// ranks, answered first, may finalize and end the node's gopmi (its stepd
// kills it with them) while a child's answer still has to pass through
// it: a node waits so per fence, or with WithFinalizeDrain once, for any
// fence, before its ranks finalize. A fence of other ranks passing
// through (a subset's, another job's) holds that wait up to childDrain:
// its parts would be cut off when the node ends anyway.
func (t *tree) awaitChildren(ctx context.Context, id string) {
	bound, stop := t.crew.Alarm(childDrain)
	defer stop()
	for {
		t.mu.Lock()
		n := t.children[id]
		if id == "" {
			for _, c := range t.children {
				n += c
			}
		}
		last := t.lastEnd
		ch := t.childDone.C()
		t.mu.Unlock()
		if n == 0 {
			if left := childFlush - t.crew.Now().Sub(last); !last.IsZero() && left > 0 {
				flushed, stop := t.crew.Alarm(left)
				defer stop()
				select {
				case <-flushed:
				case <-ctx.Done():
				}
			}
			return
		}
		select {
		case <-ch:
		case <-bound:
			return
		case <-ctx.Done():
			return
		}
	}
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
	if t.abortErr != nil {
		return t.abortErr
	}
	if t.closed {
		return closedErr(id)
	}
	return nil
}
