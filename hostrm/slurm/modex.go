package slurm

// Direct modex without a hub. In a job on several nodes each node keeps
// its own contributions to the job's fences (what its ranks put) and
// serves them itself: a barrier's parts go up without their data, joined
// at each level as a collecting fence's are, and no process holds the
// whole job's data. A read of a rank of the node's own job goes straight
// to the node that hosts it, over a link kept for the step (one per peer
// node read from); a read of another job's rank (after a connect, or of
// a spawned job) goes up to the coordinator, which reads it from that
// job's node the same way (JobReader).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gopmi/gopmi/hostrm/internal/overlay"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// nodeData is a node's own data, which it serves, and its reads of the
// other nodes'.
type nodeData struct {
	mine  store  // this node's own contributions
	peers *peers // reads of the other nodes
}

// store is one node's own contributions to its job's fences, in order.
type store struct {
	mu      sync.Mutex
	data    []byte
	some    bool  // a fence was contributed to, with data or without
	err     error // the job was aborted, or the node left: reads fail
	changed wake.Cond
}

// fail makes every read, waiting or later, fail with err.
func (s *store) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.changed.Broadcast()
}

func (s *store) add(data []byte) {
	s.mu.Lock()
	s.data = append(s.data, data...)
	s.some = true
	s.mu.Unlock()
	s.changed.Broadcast()
}

// read returns the contributions, waiting (up to timeout, or ctx) for
// the first one unless now is set. The answer is a copy.
func (s *store) read(ctx context.Context, timeout time.Duration, now bool, what string) ([]byte, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		some, data, err, ch := s.some, s.data, s.err, s.changed.C()
		s.mu.Unlock()
		if err != nil {
			return nil, plugin.Wrapf(err, plugin.ErrAborted, "%s", what)
		}
		if some || now {
			return append([]byte(nil), data...), nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil, plugin.Errorf(plugin.ErrTimeout, "%s contributed no data in %s", what, plugin.RoundDuration(timeout))
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", what, ctx.Err())
		}
	}
}

// snapshot is a copy of the node's contributions so far.
func (s *store) snapshot() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.data...)
}

// peers are a node's (or the coordinator's) reads of the nodes of one
// job: over the overlay's links, else from what a node handed over when
// it departed, else at the coordinator.
type peers struct {
	links *overlay.Links
	// viaRoot, set for a node's own reads, reads a rank at the
	// coordinator: there the data of a node that departed stays
	// (Node.Depart), and the coordinator reads a node not reached here
	// itself.
	viaRoot func(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error)

	mu sync.Mutex
	// departed holds the data of the nodes that departed (the
	// coordinator's reader: JobReader.Depart), by node index.
	departed map[int][]byte
}

// departedData is the data node index i handed over when it departed.
func (p *peers) departedData(i int) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.departed[i]
	return d, ok
}

// modexNodes are the node indexes whose data answers req: the node of
// its rank, or every node for RankWildcard.
func modexNodes(job plugin.Job, req *plugin.ModexRequest) ([]int, error) {
	if req.Proc.Rank == plugin.RankWildcard {
		out := make([]int, len(job.Nodes))
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	rankNode := job.RankNodes()
	if r := req.Proc.Rank; r >= 0 && int(r) < len(rankNode) && rankNode[r] >= 0 {
		return []int{int(rankNode[r])}, nil
	}
	return nil, plugin.Errorf(plugin.ErrInvalidArgument, "direct modex of %s for %s: job %s has no rank %d", req.Proc, req.Requestor, job.Nspace, req.Proc.Rank)
}

// read answers req, a read of a rank of p's job, from the nodes that
// hold the data: local answers for node index self (-1: none), the
// others are asked over their links, each for its own data only.
func (p *peers) read(ctx context.Context, req *plugin.ModexRequest, self int, local func(now bool) ([]byte, error)) (*plugin.ModexResponse, error) {
	job := p.links.Job()
	nodes, err := modexNodes(job, req)
	if err != nil {
		return nil, err
	}
	// One time-out for the whole read: each node's dial and its call,
	// which is given what is left of it; the grace lets its answer (a
	// time-out that says why) come back.
	timeout := req.TimeoutOrDefault()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout+sendGrace)
	defer cancel()
	dialCtx, dialCancel := context.WithTimeout(ctx, timeout)
	defer dialCancel()
	parts := make([][]byte, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for k, i := range nodes {
		one := func() {
			if i == self {
				// For the whole job, the requestor's own node is not
				// waited for: its data is at the requestor already.
				parts[k], errs[k] = local(req.Proc.Rank == plugin.RankWildcard)
				return
			}
			if data, ok := p.departedData(i); ok {
				parts[k] = data
				return
			}
			one := *req
			if one.Proc.Rank == plugin.RankWildcard {
				// Each node answers for itself: its data.
				one.Proc.Rank = job.Nodes[i].Ranks[0]
			}
			left := func() time.Duration { return max(timeout-time.Since(start), time.Millisecond) }
			var up plugin.Full
			var err error
			gone := false // the node's server has ended: nothing listens, or its link broke
			switch {
			case p.viaRoot == nil:
				up, err = p.links.Link(dialCtx, i, timeout)
			case p.links.UnreachedLately(i, false):
				gone = true
			default:
				p.links.DropLost(i)
				up, err = p.links.LinkOrGone(dialCtx, i, timeout)
				gone = errors.Is(err, overlay.ErrNoneListens)
			}
			if up != nil && err == nil {
				one.Timeout = left()
				resp, rerr := up.DirectModex(ctx, &one)
				if rerr == nil {
					parts[k] = resp.Data
					return
				}
				if !errors.Is(rerr, plugin.ErrBackendGone) && !errors.Is(rerr, plugin.ErrUnavailable) {
					errs[k] = rerr // the node's own answer
					return
				}
				err, gone = rerr, true // the node went away under the read
			}
			if data, ok := p.departedData(i); ok {
				parts[k] = data
				return
			}
			if gone && p.viaRoot != nil && ctx.Err() == nil {
				// Its data is at the coordinator (Node.Depart), or the
				// coordinator reads it once its server is up again.
				p.links.UnreachedLately(i, true)
				one.Timeout = left()
				resp, rerr := p.viaRoot(ctx, &one)
				if errors.Is(rerr, plugin.ErrTimeout) {
					rerr = plugin.Errorf(plugin.ErrTimeout, "node %s did not answer in %s (its gopmi is not up yet, or gone): %v",
						job.Nodes[i].Name, plugin.RoundDuration(timeout), rerr)
				}
				if rerr != nil {
					errs[k] = rerr
					return
				}
				parts[k] = resp.Data
				return
			}
			if time.Since(start) >= timeout {
				// Nothing listened there for the whole time-out: its
				// gopmi is not up (none of its ranks has spoken PMI
				// yet), or gone.
				err = plugin.Errorf(plugin.ErrTimeout, "node %s did not answer in %s (its gopmi is not up yet, or gone): %v",
					job.Nodes[i].Name, plugin.RoundDuration(timeout), err)
			}
			errs[k] = err
		}
		if len(nodes) == 1 {
			one()
		} else {
			wg.Go(one)
		}
	}
	wg.Wait()
	var data []byte
	for k := range nodes {
		if errs[k] != nil {
			return nil, plugin.Wrapf(errs[k], plugin.ErrUnavailable, "direct modex of %s for %s", req.Proc, req.Requestor)
		}
		data = append(data, parts[k]...)
	}
	return &plugin.ModexResponse{Data: data}, nil
}

// JobReader reads direct modex from the nodes of a job on several nodes,
// which hold their data themselves: the coordinator's way to answer a
// reader outside the job. Close closes its links.
type JobReader struct{ p peers }

// NewJobReader returns a reader of job's nodes, which prove secret;
// ports is their port range ("LOW-HIGH", "" for the default).
func NewJobReader(job plugin.Job, secret, ports string) *JobReader {
	return &JobReader{p: peers{links: overlay.NewLinks(job, secret, overlay.ParsePorts(ports))}}
}

// HoldsOwnData reports whether job's nodes keep their own data: a job
// on several nodes does.
func HoldsOwnData(job plugin.Job) bool { return len(job.Nodes) >= 2 }

// DirectModex reads req from the node that hosts its rank (every node's
// data, in node order, for RankWildcard), or from what that node handed
// over when it departed.
func (r *JobReader) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	return r.p.read(ctx, req, -1, nil)
}

// Depart keeps the data a node of the job handed over as it ended
// (Node.Depart): reads of its ranks are answered from it from now on.
func (r *JobReader) Depart(req *plugin.DepartRequest) error {
	job := r.p.links.Job()
	rankNode := job.RankNodes()
	for _, pr := range req.Procs {
		if pr.Nspace != job.Nspace || pr.Rank < 0 || int(pr.Rank) >= len(rankNode) || rankNode[pr.Rank] < 0 {
			continue
		}
		i := int(rankNode[pr.Rank])
		r.p.mu.Lock()
		if r.p.departed == nil {
			r.p.departed = map[int][]byte{}
		}
		r.p.departed[i] = req.Data
		r.p.mu.Unlock()
		return nil
	}
	return plugin.Errorf(plugin.ErrInvalidArgument, "depart of node %s: no process of job %s named", req.Node, job.Nspace)
}

// Close closes the links made.
func (r *JobReader) Close() { r.p.links.Close() }

// nodeRead answers a read that reached this node's listener: its own
// data for a rank it hosts; anything else goes up.
func (t *tree) nodeRead(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	if req.Proc.Nspace == t.Job.Nspace && req.Proc.Rank >= 0 {
		rankNode := t.Job.RankNodes()
		if r := req.Proc.Rank; int(r) < len(rankNode) && int(rankNode[r]) == t.Self {
			data, err := t.data.mine.read(ctx, req.TimeoutOrDefault(), false, t.readWhat(req))
			if err != nil {
				return nil, err
			}
			return &plugin.ModexResponse{Data: data}, nil
		}
	}
	return t.toRoot.DirectModex(ctx, req)
}

func (t *tree) readWhat(req *plugin.ModexRequest) string {
	return fmt.Sprintf("direct modex of %s for %s: node %s", req.Proc, req.Requestor, t.Job.Nodes[t.Self].Name)
}

// directModex is a read by this node's own ranks: of its own job, from
// the nodes that hold the data; of another job, up to the coordinator.
func (t *tree) directModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	if req.Proc.Nspace != t.Job.Nspace {
		return t.toRoot.DirectModex(ctx, req)
	}
	t.mu.Lock()
	err := t.end.err
	t.mu.Unlock()
	if err != nil {
		return nil, plugin.Wrapf(err, plugin.ErrAborted, "direct modex of %s for %s", req.Proc, req.Requestor)
	}
	return t.data.peers.read(ctx, req, t.Self, func(now bool) ([]byte, error) {
		return t.data.mine.read(ctx, req.TimeoutOrDefault(), now, t.readWhat(req))
	})
}
