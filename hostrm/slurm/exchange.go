package slurm

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
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
// A part is a Fence, on the link to the node, whose ID is partPrefix
// followed by the fence's (a NUL no PMI client can send), and which the
// node's subtreeServer takes into its mailbox, answering at once.
//
// What cannot go wrong silently: a part that cannot be given fails this
// node's fence, naming the node it could not reach (and that node, which
// never gets it, fails when the fence's time is up, naming this one); a
// barrier that times out names the ranks that never arrived, as any
// fence's; an abort or the tree's close ends every wait at once.

// partPrefix begins the ID of a part given to another node.
const partPrefix = "\x00gopmi-slurm-part/"

// mailbox is the parts of one exchanged fence that other nodes gave this
// node, by node index. Guarded by the tree's mu.
type mailbox struct {
	parts   map[int][]byte
	changed wake.Cond
	expire  func() bool
}

// exchanges reports whether req is a fence the nodes exchange directly:
// a collecting fence of the whole job, on at most width nodes.
func (t *tree) exchanges(req *plugin.FenceRequest) bool {
	n := len(t.Job.Nodes)
	return t.exchanging && req.Collect && n >= 2 && n <= t.Width && t.WholeJob(req)
}

// warm starts making this node's links to the other nodes of a job whose
// collecting fences the nodes exchange, once, after the node's first
// whole-job fence (req) completed: every node is up then, so each link
// is made at once, and the job's first exchange (Open MPI's and a PMIx
// job's collecting fence follow a barrier or a hand-over of first
// commits) does not wait for a TLS handshake and a proof of the step
// secret each way. A link that fails here is made when a part is given.
func (t *tree) warm(req *plugin.FenceRequest) {
	n := len(t.Job.Nodes)
	if !t.exchanging || n < 2 || n > t.Width || !t.WholeJob(req) {
		return
	}
	t.warmed.Do(func() {
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
				_, _ = t.peers.links.LinkOrGone(ctx, i, warmWait)
			})
		}
	})
}

// warmWait bounds warm's making of one link.
const warmWait = 2 * time.Second

// exchange runs req, this node's part of a fence that exchanges, and
// answers with every node's part, in node order.
func (t *tree) exchange(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if err := t.refusal(req.ID); err != nil {
		return nil, err
	}
	timeout := req.TimeoutOrDefault()
	start := t.crew.Now()
	key := fencetree.Key(req)
	t.mu.Lock()
	t.boxLocked(key, timeout)
	t.mu.Unlock()

	// Give this node's part to every other node, at once.
	give := *req
	give.ID = partPrefix + req.ID
	give.Node = t.Job.Nodes[t.Self].Name
	give.LocalProcs = nil
	given := make(chan error, len(t.Job.Nodes))
	for i := range t.Job.Nodes {
		if i == t.Self {
			continue
		}
		if !t.crew.Spawn(func(cctx context.Context) { given <- t.givePart(cctx, i, &give, timeout) }) {
			given <- plugin.Errorf(plugin.ErrAborted, "fence %s: the node's fence tree has closed", req.ID)
		}
	}

	// The fence itself: a barrier, up the tree.
	bare := *req
	bare.Collect, bare.Data = false, nil
	if _, err := t.fence(ctx, &bare); err != nil {
		t.dropBox(key)
		return nil, err
	}

	// Every node arrived, so every part is on its way: what is left of
	// the fence's time (at least expireGrace) bounds the wait for them.
	wait := max(timeout-t.crew.Now().Sub(start), expireGrace)
	parts, err := t.awaitParts(ctx, req.ID, key, wait)
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
		case <-t.abortSeen.C():
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

// givePart gives this node's part to node index i, over the link kept to
// it, within the fence's time-out.
func (t *tree) givePart(ctx context.Context, i int, give *plugin.FenceRequest, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+sendGrace)
	defer cancel()
	id := strings.TrimPrefix(give.ID, partPrefix)
	to, err := t.peers.links.Link(ctx, i, timeout)
	if err != nil && ctx.Err() == nil {
		// The dial was warm's, bounded by warmWait: make one of this
		// fence's own.
		to, err = t.peers.links.Link(ctx, i, timeout)
	}
	if err == nil {
		_, err = to.Fence(ctx, give)
	}
	if err != nil {
		err = plugin.Wrapf(err, plugin.ErrUnavailable, "fence %s: node %s could not give its ranks' data to node %s",
			id, t.Job.Nodes[t.Self].Name, t.Job.Nodes[i].Name)
		t.log.Warn().Str("fence", id).Err(err).Msg("fence exchange: a part could not be given")
	}
	return err
}

// takePart keeps a part another node gave (subtreeServer.Fence).
func (t *tree) takePart(req *plugin.FenceRequest) error {
	from := slices.IndexFunc(t.Job.Nodes, func(n plugin.Node) bool { return n.Name == req.Node })
	if from < 0 || from == t.Self {
		return plugin.Errorf(plugin.ErrInvalidArgument, "fence %s: a part from %q, which is no other node of job %s",
			strings.TrimPrefix(req.ID, partPrefix), req.Node, t.Job.Nspace)
	}
	plain := *req
	plain.ID = strings.TrimPrefix(req.ID, partPrefix)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refusalLocked(plain.ID); err != nil {
		return err
	}
	b := t.boxLocked(fencetree.Key(&plain), req.TimeoutOrDefault())
	b.parts[from] = req.Data
	b.changed.Broadcast()
	return nil
}

// boxLocked is the mailbox of the fence of key, made on first use (by
// this node's own part or another's, whichever comes first) and dropped
// when the fence's time is up, if nobody took it. Called with mu held.
func (t *tree) boxLocked(key string, timeout time.Duration) *mailbox {
	if t.boxes == nil {
		t.boxes = map[string]*mailbox{}
	}
	b := t.boxes[key]
	if b == nil {
		b = &mailbox{parts: map[int][]byte{}}
		t.boxes[key] = b
		b.expire = t.crew.After(timeout+expireGrace+sendGrace, func() { t.dropBox(key) })
	}
	return b
}

// dropBox forgets the mailbox of key.
func (t *tree) dropBox(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.boxes[key]; b != nil {
		delete(t.boxes, key)
		b.expire()
		b.changed.Broadcast()
	}
}

// awaitParts waits up to wait for every other node's part of fence id
// (key) and takes them, by node index.
func (t *tree) awaitParts(ctx context.Context, id, key string, wait time.Duration) (map[int][]byte, error) {
	timedOut := make(chan struct{})
	stop := t.crew.After(wait, func() { close(timedOut) })
	defer stop()
	for {
		t.mu.Lock()
		if err := t.refusalLocked(id); err != nil {
			t.mu.Unlock()
			return nil, err
		}
		b := t.boxes[key]
		if b == nil {
			t.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrTimeout, "fence %s: node %s's wait for the other nodes' data has expired", id, t.Job.Nodes[t.Self].Name)
		}
		if len(b.parts) == len(t.Job.Nodes)-1 {
			delete(t.boxes, key)
			b.expire()
			t.mu.Unlock()
			return b.parts, nil
		}
		ch, aborted := b.changed.C(), t.abortSeen.C()
		t.mu.Unlock()
		select {
		case <-ch:
		case <-aborted:
		case <-timedOut:
			t.mu.Lock()
			var missing []string
			for i, n := range t.Job.Nodes {
				if _, ok := b.parts[i]; !ok && i != t.Self {
					missing = append(missing, n.Name)
				}
			}
			t.mu.Unlock()
			t.dropBox(key)
			return nil, plugin.Errorf(plugin.ErrTimeout, "fence %s: every node arrived, but node %s did not get the data of %s in %s",
				id, t.Job.Nodes[t.Self].Name, fencetree.NodeList(missing), plugin.RoundDuration(wait))
		case <-ctx.Done():
			t.dropBox(key)
			return nil, plugin.Errorf(plugin.ErrAborted, "fence %s: caller went away: %v", id, ctx.Err())
		}
	}
}
