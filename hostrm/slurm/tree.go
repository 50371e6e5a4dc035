package slurm

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// The fence tree. A step's nodes form a tree of width w under the
// coordinator, in Slurm's node order: with k = node index + 1, node k's
// parent is k' = (k-1)/w (0: the coordinator) and its children are
// k*w+1 .. k*w+w. Each node's gopmi-rm-slurm gathers a fence from its own
// shim and from its children's subtrees, and sends one call up with the
// parts concatenated and the local participants joined; the answer comes
// back down the same calls. A fence costs one message up and one down per
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
// A subtree still missing a part when half the fence's Timeout has passed
// sends what it has up, with the rest of the Timeout, and logs whom it
// misses; later parts go up one by one: the coordinator, which times the
// fence from its first arrival, then names exactly the ranks and nodes
// that never arrived. A fence the coordinator does not answer within its
// Timeout (and expireGrace) fails here, naming the ranks this subtree
// never got, or the parent that never answered.
//
// The tree decides on its clock and runs its goroutines and timers on its
// crew, so that tests drive its time and close leaves nothing behind.

// DefaultTreeWidth is Slurm's own TreeWidth default.
const DefaultTreeWidth = 16

const (
	// expireGrace is how long past a fence's Timeout the tree keeps it:
	// the coordinator's own time-out, which names every missing rank,
	// comes first; the tree's names only its subtree's. It is below the
	// bridge's grace (5 s) so that the tree's message reaches the client
	// before the bridge's context cuts the call.
	expireGrace = 2 * time.Second
	// sendGrace bounds a call up beyond the Timeout it carries, for the
	// answer to come back down.
	sendGrace = 5 * time.Second
	// maxGroups is how many nodes a message names before "and N more".
	maxGroups = 16
	// childDrain bounds how long this node's ranks wait, answered, for
	// the answers of their fence to reach the children (real time: it
	// only ever shortens a wait).
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
	secret string
	ports  portRange
	log    zerolog.Logger
	clock  clock // nil: the wall clock
	// listen makes the children's listener; nil: net.Listen (tests
	// pass a failing one).
	listen func(network, addr string) (net.Listener, error)
	// exchange lets the nodes of a flat tree exchange a collecting
	// fence's parts (exchange.go).
	exchange bool
}

// tree is one node's place in its job's fence tree.
type tree struct {
	width  int
	job    plugin.Job
	self   int
	log    zerolog.Logger
	clock  clock
	crew   *crew
	toRoot plugin.Full // the node's link up (Node.dialAbove)
	ctl    treeControl
	secret string
	ports  portRange
	listen func(network, addr string) (net.Listener, error)
	addr   string // where the children reach this node, once it listens
	mine   store  // this node's own contributions (modex.go)
	peers  *peers // links to the nodes read from (modex.go)

	mu       sync.Mutex
	open     map[string]*gather
	abortErr error // the job was aborted: every fence fails with it
	closed   bool
	// abortSeen is closed once abortErr is set (or the tree closed):
	// it answers the children's abort watches.
	abortSeen wake.Cond

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
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.listen == nil {
		c.listen = net.Listen
	}
	return &tree{
		width: c.width, job: c.job, self: c.self, toRoot: c.toRoot, secret: c.secret, ports: c.ports,
		// No job or node fields: the shim's logger has them.
		log:        c.log,
		clock:      c.clock,
		crew:       newCrew(c.clock),
		ctl:        treeControl{root: c.toRoot, job: c.job, self: c.self},
		listen:     c.listen,
		open:       map[string]*gather{},
		peers:      &peers{job: c.job, secret: c.secret, ports: c.ports, viaRoot: c.toRoot.DirectModex},
		exchanging: c.exchange,
	}
}

// gather is one collecting fence as a subtree sees it. Guarded by the
// tree's mu.
type gather struct {
	key                   string
	req                   *plugin.FenceRequest // the first part: ID, Procs, Collect
	start                 time.Time
	timeout               time.Duration
	ranks                 []int32        // the subtree's participants, sorted
	have                  map[int32]bool // those that arrived
	parts                 []*plugin.FenceRequest
	waiters               []chan fenceResult // parts not sent up yet
	batches               []*batch           // parts sent up, waiting for the answer
	sent                  bool               // the gathered parts went up
	stopFlush, stopExpire func() bool
}

// batch is the waiters of one call up: the call's answer, the fence's
// expiry, an abort or the tree's close answers them, whichever is first.
type batch struct {
	waiters []chan fenceResult
	done    bool
}

type fenceResult struct {
	resp *plugin.FenceResponse
	err  error
}

// subtreeRanks lists the participants of procs that this node's subtree
// hosts, sorted, and says whether they are all on this node.
func (t *tree) subtreeRanks(procs []plugin.Proc) (ranks []int32, onlyHere bool) {
	rankNode := t.job.RankNodes()
	in := make([]bool, len(t.job.Nodes))
	for _, i := range subtree(t.self, t.width, len(t.job.Nodes)) {
		in[i] = true
	}
	seen := map[int32]bool{}
	onlyHere = true
	add := func(r int32) {
		if r < 0 || int(r) >= len(rankNode) || rankNode[r] < 0 || seen[r] || !in[rankNode[r]] {
			return
		}
		seen[r] = true
		ranks = append(ranks, r)
		if int(rankNode[r]) != t.self {
			onlyHere = false
		}
	}
	for _, p := range procs {
		if p.Nspace != t.job.Nspace {
			continue
		}
		if p.Rank == plugin.RankWildcard {
			for r := range rankNode {
				add(int32(r))
			}
			continue
		}
		add(p.Rank)
	}
	slices.Sort(ranks)
	return ranks, onlyHere
}

// arrival is what the tree decided for one part.
type arrival struct {
	up   *plugin.FenceRequest // goes up by itself, as it is or with what is left of its time-out
	g    *gather              // else it joined g and waits on wait
	wait chan fenceResult
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
		return r.resp, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.mu.Lock()
			err := t.timeoutErr(a.g)
			t.mu.Unlock()
			return nil, err
		}
		return nil, plugin.Errorf(plugin.ErrAborted, "fence %s: caller went away: %v", req.ID, ctx.Err())
	}
}

// arrive decides what becomes of one part, without waiting: it goes up
// alone, or joins its subtree's gather, which goes up when complete or at
// half its time-out.
func (t *tree) arrive(req *plugin.FenceRequest) arrival {
	if !t.involves(req) {
		// Another job's fence (a connect's), or no participant here:
		// the part goes up as it is.
		return arrival{up: req}
	}
	key := fenceKey(req)
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refusalLocked(req.ID); err != nil {
		return arrival{err: err}
	}
	g := t.open[key]
	if g == nil {
		ranks, onlyHere := t.subtreeRanks(req.Procs)
		if onlyHere {
			// Nobody below takes part: this node's part goes up as it is.
			return arrival{up: req}
		}
		g = &gather{key: key, req: req, start: now, timeout: req.TimeoutOrDefault(), ranks: ranks, have: map[int32]bool{}}
		t.open[key] = g
		g.stopFlush = t.crew.after(g.timeout/2, func() { t.flush(g) })
		g.stopExpire = t.crew.after(g.timeout+expireGrace, func() { t.expire(g) })
	}
	for _, p := range req.LocalProcs {
		if _, ok := slices.BinarySearch(g.ranks, p.Rank); ok {
			g.have[p.Rank] = true
		}
	}
	if g.sent {
		// Late: the subtree's parts went up without this one.
		t.log.Info().Str("fence", req.ID).Str("from", req.Node).Msg("fence tree: a late part goes up alone")
		return arrival{up: t.rest(g, req, now)}
	}
	ch := make(chan fenceResult, 1)
	g.parts = append(g.parts, req)
	g.waiters = append(g.waiters, ch)
	if len(g.have) >= len(g.ranks) {
		t.goUp(g, now)
	}
	return arrival{g: g, wait: ch}
}

// involves reports whether req is a fence of this tree's job alone.
func (t *tree) involves(req *plugin.FenceRequest) bool {
	for _, p := range req.Procs {
		if p.Nspace != t.job.Nspace {
			return false
		}
	}
	return len(req.Procs) > 0
}

func fenceKey(req *plugin.FenceRequest) string {
	return req.ID + "\x00" + procsKey(req.Procs)
}

func procsKey(ps []plugin.Proc) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// rest is a part that goes up alone, with what is left of its fence's
// time-out.
func (t *tree) rest(g *gather, req *plugin.FenceRequest, now time.Time) *plugin.FenceRequest {
	r := *req
	r.Timeout = left(g, now)
	return &r
}

// left is what remains of g's time-out at now, at least a millisecond: a
// zero Timeout would mean the default.
func left(g *gather, now time.Time) time.Duration {
	return max(g.timeout-now.Sub(g.start), time.Millisecond)
}

// missing names the subtree's participants that have not arrived,
// grouped by node. Called with mu held.
func (t *tree) missing(g *gather) string {
	var out []int32
	for _, r := range g.ranks {
		if !g.have[r] {
			out = append(out, r)
		}
	}
	return rankGroups(t.job, out, maxGroups)
}

// flush sends up what the subtree gathered when half the time-out passed.
func (t *tree) flush(g *gather) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g.sent || len(g.parts) == 0 {
		return
	}
	// A child that has not sent its part by now is stuck or gone: the
	// operator reads here which of this node's subtree it was.
	t.log.Warn().Str("fence", g.req.ID).Int("arrived", len(g.have)).Int("expected", len(g.ranks)).
		Msgf("fence tree: fence %s: %s did not arrive in %s; sending the subtree's part up without them",
			g.req.ID, t.missing(g), plugin.RoundDuration(t.clock.Now().Sub(g.start)))
	t.goUp(g, t.clock.Now())
}

// goUp sends the gathered parts as one call and answers their waiters.
// Called with mu held.
func (t *tree) goUp(g *gather, now time.Time) {
	g.sent = true
	g.stopFlush()
	merged := *g.req
	merged.Node = t.job.Nodes[t.self].Name
	merged.LocalProcs = nil
	merged.Data = nil
	for _, p := range g.parts {
		merged.LocalProcs = append(merged.LocalProcs, p.LocalProcs...)
		merged.Data = append(merged.Data, p.Data...)
	}
	merged.Timeout = left(g, now)
	b := &batch{waiters: g.waiters}
	g.waiters, g.parts = nil, nil
	g.batches = append(g.batches, b)
	if len(g.have) >= len(g.ranks) {
		// Complete: no late part can come. The expiry stays armed, for
		// a parent that never answers.
		delete(t.open, g.key)
	}
	started := t.crew.spawn(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, merged.Timeout+sendGrace)
		defer cancel()
		resp, err := t.send(ctx, &merged)
		t.mu.Lock()
		defer t.mu.Unlock()
		t.answer(b, fenceResult{resp, err})
		if t.open[g.key] != g && !slices.ContainsFunc(g.batches, func(b *batch) bool { return !b.done }) {
			// Over: no late part can come and nobody waits. A busy
			// job's fences would otherwise keep a timer each for
			// their whole time-out.
			g.stopExpire()
		}
	})
	if !started {
		t.answer(b, fenceResult{nil, plugin.Errorf(plugin.ErrAborted, "fence %s: the node's fence tree has closed", g.req.ID)})
	}
}

// answer gives b's waiters r unless they have their answer. Called with
// mu held.
func (t *tree) answer(b *batch, r fenceResult) {
	if b.done {
		return
	}
	b.done = true
	for _, w := range b.waiters {
		w <- r
	}
	b.waiters = nil
}

// answerAll answers every waiter of g with err. Called with mu held.
func (t *tree) answerAll(g *gather, err error) {
	g.stopFlush()
	g.stopExpire()
	if len(g.waiters) > 0 {
		g.batches = append(g.batches, &batch{waiters: g.waiters})
		g.waiters = nil
	}
	for _, b := range g.batches {
		t.answer(b, fenceResult{nil, err})
	}
	if t.open[g.key] == g {
		delete(t.open, g.key)
	}
}

// expire ends g once its time-out (and expireGrace) passed: late parts no
// longer find it, and parts still waiting for the parent fail, naming
// whom this subtree misses.
func (t *tree) expire(g *gather) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := len(g.waiters) > 0
	for _, b := range g.batches {
		pending = pending || !b.done
	}
	if pending {
		err := t.timeoutErr(g)
		t.log.Warn().Str("fence", g.req.ID).Err(err).Msg("fence tree: failing the subtree's waiting parts")
		t.answerAll(g, err)
		return
	}
	if t.open[g.key] == g {
		delete(t.open, g.key)
	}
}

// timeoutErr says why g failed when its time passed: the ranks the
// subtree never got, or, when all came, the parent that did not answer.
// Called with mu held.
func (t *tree) timeoutErr(g *gather) error {
	d := plugin.RoundDuration(g.timeout)
	if m := t.missing(g); m != "" {
		return plugin.Errorf(plugin.ErrTimeout, "fence %s: %s did not arrive in %s", g.req.ID, m, d)
	}
	return plugin.Errorf(plugin.ErrTimeout, "fence %s: %s did not answer in %s", g.req.ID, t.parentName(), d)
}

// close leaves the tree: the fences it holds fail, and its goroutines
// and timers end. The link up is the node's, which closes it.
func (t *tree) close() {
	t.mu.Lock()
	t.closed = true
	for _, g := range t.open {
		t.answerAll(g, plugin.Errorf(plugin.ErrAborted, "fence %s: the node's fence tree has closed", g.req.ID))
	}
	t.mu.Unlock()
	t.mine.fail(plugin.Errorf(plugin.ErrAborted, "the node has left the job"))
	t.abortSeen.Close()
	t.crew.close()
	t.peers.close()
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
		t.lastEnd = time.Now()
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
	bound := time.NewTimer(childDrain)
	defer bound.Stop()
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
			if left := childFlush - time.Since(last); !last.IsZero() && left > 0 {
				select {
				case <-time.After(left):
				case <-ctx.Done():
				}
			}
			return
		}
		select {
		case <-ch:
		case <-bound.C:
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
		return plugin.Errorf(plugin.ErrAborted, "fence %s: the node's fence tree has closed", id)
	}
	return nil
}
