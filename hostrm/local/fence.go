package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Participant marks in fence.parts.
const (
	notParticipant uint8 = iota
	expected
	arrived
)

// fence is one collective, matched across nodes by the namespaces of its
// participants and its ID. Every field is guarded by Universe.mu; err and
// result are written before done closes, so a waiter reads them after
// <-done without the lock.
type fence struct {
	id        string
	nspaces   []string           // sorted namespaces of the participants
	desc      string             // canonical participant list, to match nodes' requests
	parts     map[string][]uint8 // nspace -> per rank: notParticipant, expected, arrived
	nexpected int
	narrived  int
	data      [][]byte // contributions in arrival order
	start     time.Time
	finished  bool
	done      chan struct{}
	err       error
	result    []byte
	// beyond are the participants of jobs of other runs (after a
	// connect), whose arrivals the node daemon counts: once every
	// participant of this run arrived, the universe joins the daemon's
	// fence with them all, and its answer is this fence's.
	beyond []plugin.Proc
	procs  []plugin.Proc // every participant, as the nodes name them
}

func (f *fence) step() string {
	if len(f.nspaces) == 1 {
		return fmt.Sprintf("fence %s of job %s", f.id, f.nspaces[0])
	}
	return fmt.Sprintf("fence %s of jobs %s", f.id, strings.Join(f.nspaces, ","))
}

func (f *fence) fail(err error) {
	if f.finished {
		return
	}
	f.finished, f.err = true, err
	close(f.done)
}

func (f *fence) complete() {
	if f.finished {
		return
	}
	n := 0
	for _, d := range f.data {
		n += len(d)
	}
	f.result = make([]byte, 0, n)
	for _, d := range f.data {
		f.result = append(f.result, d...)
	}
	f.data = nil
	f.finished = true
	close(f.done)
}

// canonicalProcs sorts procs and formats them, so two nodes' participant
// lists compare equal when they name the same set.
func canonicalProcs(procs []plugin.Proc) (desc string, nspaces []string) {
	ps, desc := plugin.ProcSet(procs)
	for _, p := range ps {
		if len(nspaces) == 0 || nspaces[len(nspaces)-1] != p.Nspace {
			nspaces = append(nspaces, p.Nspace)
		}
	}
	return desc, nspaces
}

// newFence builds a collective from its participant list. Called with mu
// held.
func (u *Universe) newFence(id, desc string, nspaces []string, procs []plugin.Proc) (*fence, error) {
	f := &fence{
		id: id, desc: desc, nspaces: nspaces,
		parts: make(map[string][]uint8, len(nspaces)),
		start: time.Now(), done: make(chan struct{}),
	}
	for _, p := range procs {
		j := u.jobs[p.Nspace]
		if j == nil && u.opts.Beyond != nil {
			f.beyond = append(f.beyond, p)
			continue
		}
		if j == nil {
			return nil, plugin.Errorf(plugin.ErrNotFound, "%s: participant job %q is unknown", f.step(), p.Nspace)
		}
		marks := f.parts[p.Nspace]
		if marks == nil {
			marks = make([]uint8, j.layout.Size)
			f.parts[p.Nspace] = marks
		}
		if p.Rank == plugin.RankWildcard {
			for r := range marks {
				if marks[r] == notParticipant {
					marks[r] = expected
					f.nexpected++
				}
			}
			continue
		}
		if p.Rank < 0 || p.Rank >= j.layout.Size {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: job %s has no rank %d", f.step(), p.Nspace, p.Rank)
		}
		if marks[p.Rank] == notParticipant {
			marks[p.Rank] = expected
			f.nexpected++
		}
	}
	if f.nexpected == 0 {
		return nil, plugin.Errorf(plugin.ErrNotFound, "%s: no participant job is of this run", f.step())
	}
	f.procs = procs
	return f, nil
}

// localParticipants lists f's participants of this run, each once.
// Called with mu held.
func (f *fence) localParticipants() []plugin.Proc {
	var out []plugin.Proc
	for _, ns := range f.nspaces {
		for r, m := range f.parts[ns] {
			if m != notParticipant {
				out = append(out, plugin.Proc{Nspace: ns, Rank: int32(r)})
			}
		}
	}
	return out
}

// joinBeyond completes f, whose participants of this run all arrived,
// with the node daemon's fence of every participant's run (f.beyond):
// this run's part is one call carrying them all, and its answer is the
// answer of every node here.
// The daemon's fence gets what is left of this one's time-out, so that
// every run ends it alike, with the daemon's answer; the callers here
// wait for it (timeoutFence leaves it alone). It runs on the universe's
// crew: ctx ends when the universe closes.
func (u *Universe) joinBeyond(ctx context.Context, f *fence, key string, req *plugin.FenceRequest, local []plugin.Proc, data []byte) {
	left := plugin.TimeoutOr(req.Timeout, u.opts.FenceTimeout) - time.Since(f.start)
	if left < time.Second {
		left = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, left+time.Second)
	defer cancel()
	resp, err := u.opts.Beyond.Fence(ctx, &plugin.FenceRequest{ID: req.ID, Procs: f.procs, LocalProcs: local,
		Node: u.opts.Prefix, Data: data, Collect: req.Collect, Timeout: left})
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fences[key] == f {
		delete(u.fences, key)
	}
	if err != nil {
		f.fail(err)
		return
	}
	f.data = [][]byte{resp.Data}
	f.complete()
}

// arrive marks the caller's local procs. It changes nothing when one of
// them is not a participant or arrived already. Called with mu held.
func (f *fence) arrive(local []plugin.Proc) error {
	var marked []plugin.Proc
	undo := func() {
		for _, p := range marked {
			f.parts[p.Nspace][p.Rank] = expected
		}
		f.narrived -= len(marked)
	}
	mark := func(ns string, r int32) error {
		marks := f.parts[ns]
		if marks == nil || r < 0 || int(r) >= len(marks) || marks[r] == notParticipant {
			return plugin.Errorf(plugin.ErrInvalidArgument, "%s: %s is not a participant", f.step(), plugin.Proc{Nspace: ns, Rank: r})
		}
		if marks[r] == arrived {
			return plugin.Errorf(plugin.ErrInvalidArgument, "%s: %s arrived twice", f.step(), plugin.Proc{Nspace: ns, Rank: r})
		}
		marks[r] = arrived
		f.narrived++
		marked = append(marked, plugin.Proc{Nspace: ns, Rank: r})
		return nil
	}
	for _, p := range local {
		if p.Rank != plugin.RankWildcard {
			if err := mark(p.Nspace, p.Rank); err != nil {
				undo()
				return err
			}
			continue
		}
		marks := f.parts[p.Nspace]
		if marks == nil {
			undo()
			return plugin.Errorf(plugin.ErrInvalidArgument, "%s: job %s is not a participant", f.step(), p.Nspace)
		}
		for r := range marks {
			if err := mark(p.Nspace, int32(r)); err != nil {
				undo()
				return err
			}
		}
	}
	return nil
}

// missing names the participants that have not arrived, grouped by job
// and node: "ranks 4-7 (node vm-1), rank 9 (node vm-2)". At most limit
// groups are listed. Called with mu held.
func (u *Universe) missing(f *fence, limit int) string {
	var groups []string
	more := 0
	for _, ns := range f.nspaces {
		j := u.jobs[ns]
		marks := f.parts[ns]
		if j == nil || marks == nil {
			continue
		}
		for _, n := range j.layout.Nodes {
			var ranks []int32
			for _, r := range n.Ranks {
				if marks[r] == expected {
					ranks = append(ranks, r)
				}
			}
			if len(ranks) == 0 {
				continue
			}
			if len(groups) == limit {
				more++
				continue
			}
			slices.Sort(ranks)
			g := plugin.RankList(ranks) + " (node " + n.Name + ")"
			if len(f.nspaces) > 1 {
				g = "job " + ns + " " + g
			}
			groups = append(groups, g)
		}
	}
	s := strings.Join(groups, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more nodes", more)
	}
	if s == "" {
		s = "no participant"
	}
	return s
}

// failFences fails and forgets every fence one of whose participants is
// in job ns. Called with mu held.
func (u *Universe) failFences(ns string, err error) {
	u.events.changed.Broadcast() // the job's event watchers end too
	for key, f := range u.fences {
		if slices.Contains(f.nspaces, ns) {
			f.fail(err)
			delete(u.fences, key)
		}
	}
}

// timeoutFence fails f naming who did not arrive within d. The failed
// fence stays registered so that a node arriving later fails at once with
// the same message instead of waiting for its own time-out.
func (u *Universe) timeoutFence(f *fence, d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if f.finished {
		return
	}
	if f.narrived == f.nexpected && len(f.beyond) > 0 {
		// This run's part is with the node daemon, whose answer
		// (naming whoever of the other runs never arrived) ends it.
		return
	}
	f.fail(plugin.Errorf(plugin.ErrTimeout, "%s: %s did not arrive in %s", f.step(), u.missing(f, 16), plugin.RoundDuration(d)))
}

// Fence runs one node's part of a collective. Calls are matched by the
// namespaces of req.Procs and req.ID; arrivals are counted with
// req.LocalProcs. When every participant arrived, each caller gets the
// concatenation of all nodes' Data in arrival order (Collect) or nothing.
// Each node's Data is also kept for DirectModex. On time-out every waiting
// caller fails with ErrTimeout naming the missing ranks and their nodes; an
// abort of a participating job fails them with ErrAborted.
//
// The returned Data is shared between callers and must not be modified.
func (u *Universe) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if req.ID == "" {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "fence: empty id")
	}
	if len(req.LocalProcs) == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "fence %s: no local participants", req.ID)
	}
	procs := req.Procs
	if len(procs) == 0 {
		procs = []plugin.Proc{{Nspace: req.LocalProcs[0].Nspace, Rank: plugin.RankWildcard}}
	}
	desc, nspaces := canonicalProcs(procs)
	key := strings.Join(nspaces, ",") + "/" + req.ID

	u.mu.Lock()
	f := u.fences[key]
	if f == nil {
		for _, ns := range nspaces {
			if err := u.jobGone("fence "+req.ID, ns); err != nil {
				u.mu.Unlock()
				return nil, err
			}
		}
		var err error
		if f, err = u.newFence(req.ID, desc, nspaces, procs); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		u.fences[key] = f
	}
	if f.err != nil {
		u.mu.Unlock()
		return nil, f.err
	}
	if f.desc != desc {
		u.mu.Unlock()
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: node %s names other participants than the first node did", f.step(), req.Node)
	}
	if err := f.arrive(req.LocalProcs); err != nil {
		if f.narrived == 0 {
			delete(u.fences, key)
		}
		u.mu.Unlock()
		return nil, err
	}
	if len(req.Data) > 0 {
		f.data = append(f.data, req.Data)
	}
	u.recordContribution(req)
	if f.narrived == f.nexpected && len(f.beyond) > 0 {
		// It stays registered, where an abort of its jobs finds it.
		var data []byte
		for _, d := range f.data {
			data = append(data, d...)
		}
		local := f.localParticipants()
		if !u.crew.Spawn(func(ctx context.Context) { u.joinBeyond(ctx, f, key, req, local, data) }) {
			f.fail(plugin.Errorf(plugin.ErrAborted, "%s: the run is ending", f.step()))
			delete(u.fences, key)
		}
	} else if f.narrived == f.nexpected {
		f.complete()
		delete(u.fences, key)
	}
	u.broadcast()
	u.mu.Unlock()

	timeout := plugin.TimeoutOr(req.Timeout, u.opts.FenceTimeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-f.done:
	case <-timer.C:
		u.timeoutFence(f, timeout)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", f.step(), ctx.Err())
		}
		u.timeoutFence(f, time.Since(f.start))
	}
	<-f.done
	if f.err != nil {
		return nil, f.err
	}
	if !req.Collect {
		return &plugin.FenceResponse{}, nil
	}
	return &plugin.FenceResponse{Data: f.result}, nil
}

// recordContribution adds req.Data to the data of the nodes that host
// req.LocalProcs. Called with mu held.
func (u *Universe) recordContribution(req *plugin.FenceRequest) {
	add := func(j *job, node int32, seen map[*job]map[int32]bool) {
		if seen[j] == nil {
			seen[j] = map[int32]bool{}
		}
		if seen[j][node] {
			return
		}
		seen[j][node] = true
		c := j.modex[node]
		if c == nil {
			c = &contribution{}
			j.modex[node] = c
		}
		if len(req.Data) > 0 {
			c.chunks = append(c.chunks, req.Data)
			c.size += len(req.Data)
		}
	}
	seen := map[*job]map[int32]bool{}
	for _, p := range req.LocalProcs {
		j := u.jobs[p.Nspace]
		if j == nil {
			continue
		}
		if p.Rank == plugin.RankWildcard {
			for _, n := range j.layout.Nodes {
				add(j, n.ID, seen)
			}
			continue
		}
		add(j, j.rankNode[p.Rank], seen)
	}
}

// DirectModex returns the data contributed to the job's fences so far by
// the node hosting req.Proc, or, for RankWildcard, by every node of the
// job, concatenated (the requestor's own node is not waited for). A host sends each fence only the puts made since the
// previous one, so the answer holds every contribution in order. If a
// node concerned has contributed nothing yet, DirectModex waits for its
// first contribution, bounded by req.Timeout (default the fence time-out)
// and ctx, and then fails with ErrTimeout naming the nodes.
//
// req.Key is not interpreted: the blob is opaque to the universe, so a key
// cannot be looked for in it. A host that does not find the key in the
// returned blob decides itself whether to ask again after the next fence.
func (u *Universe) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	step := fmt.Sprintf("direct modex of %s for %s", req.Proc, req.Requestor)
	timeout := plugin.TimeoutOr(req.Timeout, u.opts.FenceTimeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		u.mu.Lock()
		j := u.jobs[req.Proc.Nspace]
		if j == nil && u.opts.Beyond != nil {
			// A job of another run (after a connect): the node daemon
			// asks that run.
			u.mu.Unlock()
			return u.opts.Beyond.DirectModex(ctx, req)
		}
		if j == nil {
			u.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrNotFound, "%s: no job %q", step, req.Proc.Nspace)
		}
		var nodes []plugin.Node
		switch r := req.Proc.Rank; {
		case r == plugin.RankWildcard:
			nodes = j.layout.Nodes
		case r >= 0 && r < j.layout.Size:
			nodes = []plugin.Node{j.layout.Nodes[j.nodeIndex[j.rankNode[r]]]}
		default:
			u.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: job %s has no rank %d", step, req.Proc.Nspace, r)
		}
		var missing []string
		size := 0
		for _, n := range nodes {
			if c := j.modex[n.ID]; c != nil {
				size += c.size
			} else if !(req.Proc.Rank == plugin.RankWildcard && req.Requestor.Nspace == req.Proc.Nspace && slices.Contains(n.Ranks, req.Requestor.Rank)) {
				// For the whole job, the requestor's own node is not
				// waited for: its data is already at the requestor.
				missing = append(missing, n.Name)
			}
		}
		if len(missing) == 0 {
			data := make([]byte, 0, size)
			for _, n := range nodes {
				if c := j.modex[n.ID]; c != nil {
					for _, chunk := range c.chunks {
						data = append(data, chunk...)
					}
				}
			}
			u.mu.Unlock()
			return &plugin.ModexResponse{Data: data}, nil
		}
		if err := u.jobGone(step, req.Proc.Nspace); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		if err := u.jobGone(step, req.Requestor.Nspace); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		ch := u.changed.C()
		u.mu.Unlock()
		changed, err := waitChange(ctx, ch, timer.C)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, err)
		}
		if !changed {
			what := "node " + missing[0]
			if len(missing) > 1 {
				what = "nodes " + strings.Join(missing, ",")
			}
			return nil, plugin.Errorf(plugin.ErrTimeout, "%s: %s contributed no data in %s", step, what, plugin.RoundDuration(timeout))
		}
	}
}
