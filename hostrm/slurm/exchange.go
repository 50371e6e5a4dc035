package slurm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/wake"
	treev1 "github.com/gopmi/gopmi/proto/gopmi/tree/v1"
)

// The exchange. A collecting fence of a whole job on at most width nodes
// (a flat tree: every node is a child of the coordinator) would carry each
// node's part up to the coordinator and the concatenation back down: two
// hops through a third process, which, for a 128-rank PMIx job on two
// nodes (a 200 KiB answer), took 5-10 ms against the 1 ms Slurm's own
// pmix plugin spends between its stepds. Instead each node gives its part
// straight to every other node of the job, over the links it keeps to
// read them (modex.go), while the fence itself goes up as a barrier,
// without data, as a barrier always does. A node's fence is answered once
// the barrier completed, every other node's part came, and every other
// node took this node's part (so that a node whose ranks finalize at once
// cannot end before its part reached the others). The bytes are those of
// the coordinator's fan-out (each node gets every other part once), spread
// over the nodes; past width nodes the tree carries the data, whose
// fan-out stays w per node.
//
// A part is a Give of the fence tree's private service (gopmi.tree.v1,
// served beside the contract on every node's listener), which the node
// takes into its mailbox, answering at once.
//
// What cannot go wrong silently: a part that cannot be given fails this
// node's fence, naming the node it could not reach (and that node, which
// never gets it, fails when the fence's time is up, naming this one); a
// barrier that times out names the ranks that never arrived, as any
// fence's; an abort or the tree's close ends every wait at once.

// exchanger is a node's side of the exchange: the parts other nodes gave
// it, by fence, under its own lock.
type exchanger struct {
	t  *tree // the node's fence tree: its barrier, its links, its abort
	on bool  // the nodes of a flat tree exchange (treeConfig.exchange)
	// warmed is done once the links to the other nodes are being made.
	warmed sync.Once

	mu    sync.Mutex
	boxes map[string]*mailbox // by fence key
}

// mailbox is the parts of one exchanged fence that other nodes gave this
// node, by node index. Guarded by the exchanger's mu.
type mailbox struct {
	parts   map[int][]byte
	changed wake.Cond
	expire  func() bool
}

// applies reports whether req is a fence the nodes exchange directly:
// a collecting fence of the whole job, on at most width nodes.
func (x *exchanger) applies(req *plugin.FenceRequest) bool {
	t := x.t
	n := len(t.Job.Nodes)
	return x.on && req.Collect && n >= 2 && n <= t.Width && t.WholeJob(req)
}

// warm starts making this node's links to the other nodes of a job whose
// collecting fences the nodes exchange, once, after the node's first
// whole-job fence (req) completed: every node is up then, so each link
// is made at once, and the job's first exchange (Open MPI's and a PMIx
// job's collecting fence follow a barrier or a hand-over of first
// commits) does not wait for a TLS handshake and a proof of the step
// secret each way. A link that fails here is made when a part is given.
func (x *exchanger) warm(req *plugin.FenceRequest) {
	t := x.t
	n := len(t.Job.Nodes)
	if !x.on || n < 2 || n > t.Width || !t.WholeJob(req) {
		return
	}
	x.warmed.Do(func() {
		for i := range t.Job.Nodes {
			if i == t.Self {
				continue
			}
			t.crew.Spawn(func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, warmWait)
				defer cancel()
				// Every node listened for the fence just done: one that
				// no longer does has ended, and a reader waiting on this
				// link learns it at once.
				_, _ = t.data.peers.links.LinkOrGone(ctx, i, warmWait)
			})
		}
	})
}

// warmWait bounds warm's making of one link.
const warmWait = 2 * time.Second

// run runs req, this node's part of a fence that exchanges, and
// answers with every node's part, in node order.
func (x *exchanger) run(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	t := x.t
	if err := t.refusal(req.ID); err != nil {
		return nil, err
	}
	timeout := req.TimeoutOrDefault()
	start := t.crew.Now()
	key := fencetree.Key(req)
	x.mu.Lock()
	x.boxLocked(key, timeout)
	x.mu.Unlock()

	// Give this node's part to every other node, at once.
	give := &treev1.GiveRequest{Fence: req.ID, Key: key, Node: t.Name(), Data: req.Data, TimeoutMs: timeout.Milliseconds()}
	given := make(chan error, len(t.Job.Nodes))
	for i := range t.Job.Nodes {
		if i == t.Self {
			continue
		}
		if !t.crew.Spawn(func(cctx context.Context) { given <- x.give(cctx, i, give, req.Procs, timeout) }) {
			given <- plugin.Errorf(plugin.ErrAborted, "fence %s: the node's fence tree has closed", req.ID)
		}
	}

	// The fence itself: a barrier, up the tree.
	bare := *req
	bare.Collect, bare.Data = false, nil
	if _, err := t.fence(ctx, &bare); err != nil {
		x.dropBox(key)
		return nil, err
	}

	// Every node arrived, so every part is on its way: what is left of
	// the fence's time (at least expireGrace) bounds the wait for them.
	wait := max(timeout-t.crew.Now().Sub(start), expireGrace)
	parts, err := x.awaitParts(ctx, req.ID, key, wait)
	if err != nil {
		return nil, err
	}
	// Every other node took this node's part (givePart bounds each).
	for took := 0; took < len(t.Job.Nodes)-1; {
		select {
		case err := <-given:
			if err != nil {
				return nil, err
			}
			took++
		case <-t.end.seen.C():
			if err := t.refusal(req.ID); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrAborted, "fence %s: caller went away: %v", req.ID, ctx.Err())
		}
	}
	parts[t.Self] = req.Data
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	data := make([]byte, 0, size)
	for i := range t.Job.Nodes {
		data = append(data, parts[i]...)
	}
	return &plugin.FenceResponse{Data: data}, nil
}

// give gives this node's part to node index i, over the link kept to
// it, within the fence's time-out.
func (x *exchanger) give(ctx context.Context, i int, give *treev1.GiveRequest, procs []plugin.Proc, timeout time.Duration) error {
	t := x.t
	ctx, cancel := context.WithTimeout(ctx, timeout+sendGrace)
	defer cancel()
	to, err := t.data.peers.links.Conn(ctx, i, timeout)
	if err != nil && ctx.Err() == nil {
		// The dial was warm's, bounded by warmWait: make one of this
		// fence's own.
		to, err = t.data.peers.links.Conn(ctx, i, timeout)
	}
	if err == nil {
		_, err = treev1.NewTreeClient(to.ClientConn()).Give(ctx, give)
		err = direct.CallError(ctx, "give", err)
		if errors.Is(err, plugin.ErrNotSupported) {
			// A node older than the tree's service (a step's nodes
			// mid-way through an upgrade) takes a part as a Fence of
			// its own kind.
			_, err = to.Backend().Fence(ctx, &plugin.FenceRequest{ID: legacyPartPrefix + give.Fence, Procs: procs,
				Node: give.Node, Data: give.Data, Collect: true, Timeout: timeout})
		}
	}
	if err != nil {
		err = plugin.Wrapf(err, plugin.ErrUnavailable, "fence %s: node %s could not give its ranks' data to node %s",
			give.Fence, t.Name(), t.Job.Nodes[i].Name)
		t.log.Warn().Str("fence", give.Fence).Err(err).Msg("fence exchange: a part could not be given")
	}
	return err
}

// legacyPartPrefix began the ID of a part another node gave as a Fence,
// before the tree's service: a node still takes one (takeLegacy), and
// gives one to a node that does not serve Give.
const legacyPartPrefix = "\x00gopmi-slurm-part/"

// takeLegacy keeps a part an older node gave as a Fence whose ID begins
// with legacyPartPrefix.
func (x *exchanger) takeLegacy(req *plugin.FenceRequest) error {
	plain := *req
	plain.ID = strings.TrimPrefix(req.ID, legacyPartPrefix)
	return x.take(&treev1.GiveRequest{Fence: plain.ID, Key: fencetree.Key(&plain), Node: req.Node, Data: req.Data,
		TimeoutMs: req.TimeoutOrDefault().Milliseconds()})
}

// treeService is what a node serves the others besides the contract
// (gopmi.tree.v1).
type treeService struct {
	treev1.UnimplementedTreeServer
	x *exchanger
}

// Give takes another node's part of a fence the nodes exchange. Counted
// as a child's part is: the ranks this part completes may finalize at
// once, and the node must not end before this answer (the other node's
// wait) left it.
func (s treeService) Give(_ context.Context, req *treev1.GiveRequest) (*treev1.GiveResponse, error) {
	s.x.t.drain.call(req.GetFence(), 1)
	defer s.x.t.drain.call(req.GetFence(), -1)
	if err := s.x.take(req); err != nil {
		return nil, direct.Status(err)
	}
	return &treev1.GiveResponse{}, nil
}

// take keeps a part another node gave.
func (x *exchanger) take(req *treev1.GiveRequest) error {
	t := x.t
	from := slices.IndexFunc(t.Job.Nodes, func(n plugin.Node) bool { return n.Name == req.GetNode() })
	if from < 0 || from == t.Self {
		return plugin.Errorf(plugin.ErrInvalidArgument, "fence %s: a part from %q, which is no other node of job %s",
			req.GetFence(), req.GetNode(), t.Job.Nspace)
	}
	if err := t.refusal(req.GetFence()); err != nil {
		return err
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = plugin.DefaultFenceTimeout
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.boxLocked(req.GetKey(), timeout)
	b.parts[from] = req.GetData()
	b.changed.Broadcast()
	return nil
}

// boxLocked is the mailbox of the fence of key, made on first use (by
// this node's own part or another's, whichever comes first) and dropped
// when the fence's time is up, if nobody took it. Called with mu held.
func (x *exchanger) boxLocked(key string, timeout time.Duration) *mailbox {
	if x.boxes == nil {
		x.boxes = map[string]*mailbox{}
	}
	b := x.boxes[key]
	if b == nil {
		b = &mailbox{parts: map[int][]byte{}}
		x.boxes[key] = b
		b.expire = x.t.crew.After(timeout+expireGrace+sendGrace, func() { x.dropBox(key) })
	}
	return b
}

// dropBox forgets the mailbox of key.
func (x *exchanger) dropBox(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.boxes[key]; b != nil {
		delete(x.boxes, key)
		b.expire()
		b.changed.Broadcast()
	}
}

// awaitParts waits up to wait for every other node's part of fence id
// (key) and takes them, by node index.
func (x *exchanger) awaitParts(ctx context.Context, id, key string, wait time.Duration) (map[int][]byte, error) {
	t := x.t
	timedOut, stop := t.crew.Alarm(wait)
	defer stop()
	for {
		if err := t.refusal(id); err != nil {
			return nil, err
		}
		x.mu.Lock()
		b := x.boxes[key]
		if b == nil {
			x.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrTimeout, "fence %s: node %s's wait for the other nodes' data has expired", id, t.Name())
		}
		if len(b.parts) == len(t.Job.Nodes)-1 {
			delete(x.boxes, key)
			b.expire()
			x.mu.Unlock()
			return b.parts, nil
		}
		ch, aborted := b.changed.C(), t.end.seen.C()
		x.mu.Unlock()
		select {
		case <-ch:
		case <-aborted:
		case <-timedOut:
			x.mu.Lock()
			var missing []string
			for i, n := range t.Job.Nodes {
				if _, ok := b.parts[i]; !ok && i != t.Self {
					missing = append(missing, n.Name)
				}
			}
			x.mu.Unlock()
			x.dropBox(key)
			return nil, plugin.Errorf(plugin.ErrTimeout, "fence %s: every node arrived, but node %s did not get the data of %s in %s",
				id, t.Name(), fencetree.NodeList(missing), plugin.RoundDuration(wait))
		case <-ctx.Done():
			x.dropBox(key)
			return nil, plugin.Errorf(plugin.ErrAborted, "fence %s: caller went away: %v", id, ctx.Err())
		}
	}
}
