package slurm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// The fence tree. A step's nodes form a tree of width w under the
// coordinator, in Slurm's node order: with k = node index + 1, node k's
// parent is k' = (k-1)/w (0: the coordinator) and its children are
// k*w+1 .. k*w+w. Each node's gopmi-rm-slurm gathers a fence from its own
// shim and from its children's subtrees, and sends one call up with the
// parts concatenated and the local participants joined; the answer comes
// back down the same calls. A fence costs one message up and one down per
// tree edge, and the coordinator hears at most w calls per fence. Nodes
// with children listen on TCP for them (the step's authenticated link,
// as the coordinator's, in the roles tree-parent and tree-child) and publish their address in the job's
// name range at the coordinator, where their children look it up.
//
// Only collecting fences are joined: a barrier's parts (modex mode) go up
// one by one, because the coordinator keeps each node's data for direct
// modex. After a collecting fence, a direct modex of a rank may answer its
// subtree's data, a superset of its node's (the host finds its keys by
// rank in it). A node with children also waits at the coordinator for its
// job's abort, which fails the fences it holds.
//
// A subtree still missing a part when half the fence's Timeout has passed
// sends what it has up, with the rest of the Timeout, and later parts go
// up one by one: the coordinator, which times the fence from its first
// arrival, then names exactly the ranks and nodes that never arrived.

// DefaultTreeWidth is Slurm's own TreeWidth default.
const DefaultTreeWidth = 16

// treeKey is the name under which node index i of job ns publishes its
// address for its children. PMI clients cannot send a NUL, so no task
// can publish or look up such a name.
func treeKey(ns string, i int) string {
	return "\x00gopmi-slurm-tree/" + ns + "/" + strconv.Itoa(i)
}

// treeParent is node index i's parent index, -1 for the coordinator.
func treeParent(i, width int) int {
	return (i+1-1)/width - 1
}

// treeChildren are node index i's children indexes among n nodes.
func treeChildren(i, width, n int) []int {
	var out []int
	for k := (i+1)*width + 1; k <= (i+1)*width+width && k <= n; k++ {
		out = append(out, k-1)
	}
	return out
}

// subtree lists node index i and every index below it.
func subtree(i, width, n int) []int {
	out := []int{i}
	for _, c := range treeChildren(i, width, n) {
		out = append(out, subtree(c, width, n)...)
	}
	return out
}

// tree is one node's place in its job's fence tree.
type tree struct {
	width  int
	job    plugin.Job
	self   int // this node's index in job.Nodes
	log    zerolog.Logger
	toRoot plugin.Full // the coordinator
	secret string

	mu        sync.Mutex
	up        plugin.Full // the parent: a node's subtree server, or the coordinator
	upClose   func() error
	resolving chan struct{} // closed when the parent's lookup in flight ends
	open      map[string]*gather
	stop      func()
	abortErr  error // the job was aborted: every fence fails with it
}

// gather is one fence as a subtree sees it.
type gather struct {
	req     *plugin.FenceRequest // the first part: ID, Procs, Collect
	start   time.Time
	expect  int            // participant ranks in this subtree
	have    map[int32]bool // those that arrived
	parts   []*plugin.FenceRequest
	waiters []chan fenceResult // answered with the merged call's result
	sent    bool               // the gathered parts went up
	flush   *time.Timer
}

type fenceResult struct {
	resp *plugin.FenceResponse
	err  error
}

// subtreeRanks counts the participants of procs that this node's subtree
// hosts, and says whether they are all on this node.
func (t *tree) subtreeRanks(procs []plugin.Proc) (n int, onlyHere bool) {
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
		n++
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
	return n, onlyHere
}

// fence takes one part (this node's shim's, or a child's subtree's) and
// returns the fence's answer.
func (t *tree) fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if !t.involves(req) {
		// Another job's fence (a connect's), or no participant here: the
		// tree is this job's.
		return t.send(ctx, req)
	}
	if !req.Collect {
		// A barrier whose parts the coordinator keeps per node for direct
		// modex: the parts go up as they are, not joined, so that a
		// node's data stays its own.
		return t.send(ctx, req)
	}
	key := fenceKey(req)
	t.mu.Lock()
	if err := t.abortErr; err != nil {
		t.mu.Unlock()
		return nil, err
	}
	g := t.open[key]
	if g == nil {
		n, onlyHere := t.subtreeRanks(req.Procs)
		if onlyHere {
			// Nobody below takes part: this node's part goes up as it is.
			t.mu.Unlock()
			return t.send(ctx, req)
		}
		g = &gather{req: req, start: time.Now(), expect: n, have: map[int32]bool{}}
		t.open[key] = g
		timeout := req.TimeoutOrDefault()
		g.flush = time.AfterFunc(timeout/2, func() { t.flush(key, g) })
	}
	if g.sent {
		// Late: the subtree's parts went up without this one.
		t.mu.Unlock()
		return t.send(ctx, t.rest(g, req))
	}
	ch := make(chan fenceResult, 1)
	g.parts = append(g.parts, req)
	g.waiters = append(g.waiters, ch)
	for _, p := range req.LocalProcs {
		g.have[p.Rank] = true
	}
	if len(g.have) >= g.expect {
		t.goUp(key, g)
	}
	t.mu.Unlock()
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, plugin.Errorf(plugin.ErrAborted, "fence %s: caller went away: %v", req.ID, ctx.Err())
	}
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
func (t *tree) rest(g *gather, req *plugin.FenceRequest) *plugin.FenceRequest {
	r := *req
	r.Timeout = remaining(g)
	return &r
}

func remaining(g *gather) time.Duration {
	left := g.req.TimeoutOrDefault() - time.Since(g.start)
	if left < time.Millisecond {
		left = time.Millisecond
	}
	return left
}

// flush sends up what the subtree gathered when half the time-out passed.
func (t *tree) flush(key string, g *gather) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !g.sent && len(g.parts) > 0 {
		t.log.Debug().Str("fence", g.req.ID).Int("ranks", len(g.have)).Int("expected", g.expect).Msg("fence tree: sending a partial subtree up")
		t.goUp(key, g)
	}
}

// goUp sends the gathered parts as one call and answers their waiters.
// Called with mu held.
func (t *tree) goUp(key string, g *gather) {
	g.sent = true
	g.flush.Stop()
	merged := *g.req
	merged.Node = t.job.Nodes[t.self].Name
	merged.LocalProcs = nil
	merged.Data = nil
	for _, p := range g.parts {
		merged.LocalProcs = append(merged.LocalProcs, p.LocalProcs...)
		merged.Data = append(merged.Data, p.Data...)
	}
	merged.Timeout = remaining(g)
	waiters := g.waiters
	g.waiters = nil
	if len(g.have) >= g.expect {
		delete(t.open, key)
	} else {
		// Sent early: the late parts go up one by one, until the
		// fence's time-out passed for good.
		time.AfterFunc(merged.Timeout+5*time.Second, func() {
			t.mu.Lock()
			if t.open[key] == g {
				delete(t.open, key)
			}
			t.mu.Unlock()
		})
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), merged.Timeout+5*time.Second)
		defer cancel()
		resp, err := t.send(ctx, &merged)
		for _, w := range waiters {
			w <- fenceResult{resp, err}
		}
	}()
}

// send passes a call to the parent, finding it first.
func (t *tree) send(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	up, err := t.parent(ctx, req.TimeoutOrDefault())
	if err != nil {
		return nil, err
	}
	return up.Fence(ctx, req)
}

// parent is the backend fences go up to: the coordinator for the nodes
// under it, else the parent node's subtree server, whose address the
// coordinator's name service holds. One lookup runs at a time, without
// the tree's lock; callers waiting for it leave when their ctx ends.
func (t *tree) parent(ctx context.Context, wait time.Duration) (plugin.Full, error) {
	for {
		t.mu.Lock()
		if t.up != nil {
			up := t.up
			t.mu.Unlock()
			return up, nil
		}
		p := treeParent(t.self, t.width)
		if p < 0 {
			t.up = t.toRoot
			t.mu.Unlock()
			return t.toRoot, nil
		}
		if ch := t.resolving; ch != nil {
			t.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, plugin.Errorf(plugin.ErrTimeout, "fence tree: the parent node %s: %v", t.job.Nodes[p].Name, ctx.Err())
			}
		}
		ch := make(chan struct{})
		t.resolving = ch
		t.mu.Unlock()
		up, closer, err := t.resolve(ctx, p, wait)
		t.mu.Lock()
		if err == nil {
			t.up, t.upClose = up, closer
		}
		t.resolving = nil
		close(ch)
		t.mu.Unlock()
		return up, err
	}
}

// resolve looks the parent's address up and dials it.
func (t *tree) resolve(ctx context.Context, p int, wait time.Duration) (plugin.Full, func() error, error) {
	resp, err := t.toRoot.Lookup(ctx, &plugin.LookupRequest{
		Proc: plugin.Proc{Nspace: t.job.Nspace, Rank: t.job.Nodes[t.self].Ranks[0]}, Keys: []string{treeKey(t.job.Nspace, p)},
		Range: plugin.RangeNamespace, Wait: true, Timeout: wait,
	})
	if err != nil {
		return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: the parent node %s", t.job.Nodes[p].Name)
	}
	addr := resp.Data[0].Value
	c, err := direct.Dial(ctx, addr, direct.WithDialer(treeDialer(t.secret)))
	if err != nil {
		return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: the parent node %s at %s", t.job.Nodes[p].Name, addr)
	}
	return c.Backend(), c.Close, nil
}

// watchAbort waits, at the coordinator, for the job's abort, which fails
// a pending lookup of the job at once: then every fence gathered here
// fails, and every later one. A node with children holds the only calls
// of its subtree that the coordinator does not see.
func (t *tree) watchAbort(ctx context.Context) {
	key := "\x00gopmi-slurm-watch/" + t.job.Nspace
	for ctx.Err() == nil {
		_, err := t.toRoot.Lookup(ctx, &plugin.LookupRequest{
			Proc: plugin.Proc{Nspace: t.job.Nspace, Rank: t.job.Nodes[t.self].Ranks[0]}, Keys: []string{key},
			Range: plugin.RangeNamespace, Wait: true, Timeout: time.Hour,
		})
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, plugin.ErrAborted):
			t.aborted(plugin.Wrapf(err, plugin.ErrAborted, "fence"))
			return
		case err == nil, errors.Is(err, plugin.ErrTimeout):
		default:
			// The coordinator is unreachable: the fences will say so.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// aborted fails every gathered fence and every later one with err.
func (t *tree) aborted(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abortErr = err
	for key, g := range t.open {
		g.flush.Stop()
		for _, w := range g.waiters {
			w <- fenceResult{nil, err}
		}
		g.waiters = nil
		delete(t.open, key)
	}
}

// serveChildren listens for this node's children, when it has any, and
// publishes where. host is this node's address as the coordinator sees
// it.
func (t *tree) serveChildren(ctx context.Context, host string) error {
	if len(treeChildren(t.self, t.width, len(t.job.Nodes))) == 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return fmt.Errorf("fence tree: listen for the children: %w", err)
	}
	sl, err := treeListener(l, t.secret, t.log)
	if err != nil {
		return fmt.Errorf("fence tree: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() { t.watchAbort(sctx) })
		if err := direct.Serve(sctx, sl, subtreeServer{t: t}, direct.WithGracePeriod(time.Second)); err != nil && sctx.Err() == nil {
			// The children's fences will fail, naming this node.
			t.log.Error().Err(err).Msg("fence tree: serving the children failed")
		}
		wg.Wait()
	}()
	t.mu.Lock()
	t.stop = func() { cancel(); <-done }
	t.mu.Unlock()
	err = t.toRoot.Publish(ctx, &plugin.PublishRequest{
		Proc:  plugin.Proc{Nspace: t.job.Nspace, Rank: t.job.Nodes[t.self].Ranks[0]},
		Data:  []plugin.Info{{Key: treeKey(t.job.Nspace, t.self), Value: l.Addr().String()}},
		Range: plugin.RangeNamespace,
	})
	if err != nil {
		return plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: publish this node's address")
	}
	return nil
}

func (t *tree) close() {
	t.mu.Lock()
	stop, upClose := t.stop, t.upClose
	t.stop, t.upClose = nil, nil
	t.mu.Unlock()
	if stop != nil {
		stop()
	}
	if upClose != nil {
		_ = upClose()
	}
}

// subtreeServer is what a node serves its children: their fences.
type subtreeServer struct {
	plugin.Unimplemented
	t *tree
}

func (subtreeServer) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "slurm-subtree", APIVersions: []string{plugin.APIVersion1}}, nil
}

func (s subtreeServer) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	return s.t.fence(ctx, req)
}
