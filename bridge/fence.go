package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

const (
	worldName = "world"
	nodeName  = "node"
	ringName  = "ring"
	// grace lets a backend report its own time-out before our context
	// deadline cuts the call, so the message that names the missing
	// ranks reaches the client.
	grace = 5 * time.Second
)

// group is the set of ranks a fence waits for.
type group struct {
	name     string  // "world", "node", "ring" or "ranks:<list>"
	ranks    []int32 // explicit members, nil for world, node and ring
	nodeOnly bool    // completes on this node without the backend
}

// oneNode reports whether every rank of the job is on this node.
func (j *Job) oneNode() bool { return len(j.cfg.Job.Nodes) == 1 }

// worldGroup is every rank of the job. When they all live on this node
// the fence completes here: there is nothing to exchange, and a backend
// round trip would only add latency to every MPI_Init.
func (j *Job) worldGroup() group {
	return group{name: worldName, nodeOnly: j.oneNode()}
}

// group turns a PMI 1.2 barrier group into the fence group: WORLD with
// tag 0 is the ordinary world fence; other tags and kinds get their own
// sequence so concurrent group barriers never mix.
func (j *Job) group(pg pmi1.Group, self int32) (group, error) {
	tag := ""
	if pg.Tag != 0 {
		tag = ":" + strconv.Itoa(pg.Tag)
	}
	switch pg.Kind {
	case pmi1.GroupWorld:
		g := j.worldGroup()
		g.name += tag
		return g, nil
	case pmi1.GroupNode:
		return group{name: nodeName + tag, nodeOnly: true}, nil
	}
	ranks := make([]int32, 0, len(pg.Ranks))
	member := false
	for _, r := range pg.Ranks {
		if r >= int(j.cfg.Job.Size) {
			return group{}, fmt.Errorf("rank %d is not in this job of %d", r, j.cfg.Job.Size)
		}
		ranks = append(ranks, int32(r))
		member = member || int32(r) == self
	}
	if !member {
		return group{}, fmt.Errorf("the group does not include the caller, rank %d", self)
	}
	slices.Sort(ranks)
	ids := make([]string, len(ranks))
	g := group{ranks: ranks, nodeOnly: true}
	for i, r := range ranks {
		ids[i] = strconv.Itoa(int(r))
		if !j.lay.isLocal[r] {
			g.nodeOnly = false
		}
	}
	g.name = "ranks:" + strings.Join(ids, ",") + tag
	return g, nil
}

// localMembers are the group's ranks on this node.
func (j *Job) localMembers(g group) []int32 {
	if g.ranks == nil {
		return j.lay.local
	}
	var out []int32
	for _, r := range g.ranks {
		if j.lay.isLocal[r] {
			out = append(out, r)
		}
	}
	return out
}

func fenceID(group string, seq int) string {
	return group + "/" + strconv.Itoa(seq)
}

// fence is one collective as this node sees it.
type fence struct {
	id      string
	g       group
	seq     int
	local   []int32
	arrived map[int32]bool
	waiters []fenceWaiter // answered when the fence completes
	data    kvs.Buffer    // the local participants' records
	carried int           // bytes of node barriers' data sent with it
	ready   bool          // every local participant arrived
	started bool          // handed to the backend
	err     error         // set when the fence failed
	stop    func() bool
}

// fenceTable is this node's fences: the open ones by ID, the sequence
// each group finished last (fences of a group complete in order), what
// node barriers committed for the next world fence to carry, and the
// last failure, which explains what follows it. Guarded by j.mu.
type fenceTable struct {
	open      map[string]*fence
	done      map[string]int
	carry     []byte // held in j.held until the world fence commits
	lastErr   error
	publishes int  // numbers the publish fences
	withheld  bool // a one-node job committed data before its backend was up
}

func newFenceTable() fenceTable {
	return fenceTable{open: make(map[string]*fence), done: make(map[string]int)}
}

// next is the group's fence after the last finished one, if open.
func (t *fenceTable) next(gname string) *fence {
	return t.open[fenceID(gname, t.done[gname]+1)]
}

// epoch is the sequence of the last finished world fence.
func (t *fenceTable) epoch() int { return t.done[worldName] }

// finish records f's end: a failed fence stays open so late arrivals
// learn of it at once.
func (t *fenceTable) finish(f *fence, err error) {
	if err != nil {
		f.err = err
		t.lastErr = err
	} else {
		delete(t.open, f.id)
	}
	t.done[f.g.name] = f.seq
}

func (t *fenceTable) stopTimers() {
	for _, f := range t.open {
		f.stopTimer()
	}
}

// fenceWaiter is a request parked in a fence with the extra pairs of its
// success answer (the PMI 1.2 tag), which are the request's own: ranks
// meet in one fence whether or not they named its group.
type fenceWaiter struct {
	r       *request
	replyKV []string
}

func (f *fence) stopTimer() {
	if f.stop != nil {
		f.stop()
		f.stop = nil
	}
}

// enterFence registers r's rank at the next fence of group g. With
// answerNow the request is answered at once (lazy PMI-2 fence) and gets
// wait for the fence instead.
func (j *Job) enterFence(r *request, g group, answerNow bool, replyKV []string) {
	j.enterCollective(r, g, answerNow, replyKV, nil)
}

// enterCollective is enterFence with, when extra is set, that record as
// the caller's contribution instead of its puts (the ring's).
func (j *Job) enterCollective(r *request, g group, answerNow bool, replyKV []string, extra []byte) {
	j.mu.Lock()
	if j.ended {
		err := j.endedErrLocked(r.cmd)
		j.mu.Unlock()
		r.fail(wire.RcFail, err)
		return
	}
	t := j.tasks[r.rank]
	seq := t.seq[g.name] + 1
	t.seq[g.name] = seq
	id := fenceID(g.name, seq)
	f := j.fences.open[id]
	if f == nil {
		f = &fence{id: id, g: g, seq: seq, local: j.localMembers(g), arrived: make(map[int32]bool)}
		j.fences.open[id] = f
		f.stop = j.calls.after(j.cfg.Timeouts.Fence, func() { j.fenceTimedOut(f) })
	}
	if f.err != nil {
		err := f.err
		j.mu.Unlock()
		r.fail(wire.RcFail, err)
		return
	}
	f.arrived[r.rank] = true
	if extra != nil {
		// The ring's contribution: the puts wait for the next fence.
		f.data.AppendBlob(extra)
	} else {
		f.data.Move(&t.pending)
	}
	if !answerNow {
		f.waiters = append(f.waiters, fenceWaiter{r: r, replyKV: replyKV})
		r.park()
	}
	if len(f.arrived) == len(f.local) {
		f.ready = true
		f.stopTimer()
		j.startNextLocked(g.name)
	}
	j.mu.Unlock()
	if answerNow {
		r.ok(replyKV...)
	}
}

// startNextLocked hands the group's next fence to the backend when it is
// ready and the one before it finished: fences of a group complete in
// order so a later fence's data never lands under an earlier one's.
func (j *Job) startNextLocked(gname string) {
	f := j.fences.next(gname)
	if f == nil || !f.ready || f.started || f.err != nil {
		return
	}
	f.started = true
	if f.g.nodeOnly {
		if !j.oneNode() {
			// A node barrier's puts are the other nodes' too, from
			// the next world fence on: a copy, held until it commits.
			j.fences.carry = append(j.fences.carry, f.data.Bytes()...)
			j.held += int64(f.data.Len())
		}
		// completeFence takes j.mu, which the caller holds. Once Shutdown
		// began the job has ended and there is nothing to complete.
		j.calls.run(j.cfg.Timeouts.Fence, false, func(context.Context) {
			j.completeFence(f, nil, nil)
		})
		return
	}
	collect := !(f.g.name == worldName && j.cfg.FenceMode == FenceModex)
	data := f.data.Bytes()
	if f.g.name == worldName && len(j.fences.carry) > 0 {
		data = append(j.fences.carry, data...)
		f.carried = len(j.fences.carry)
		j.fences.carry = nil
	}
	req := &plugin.FenceRequest{
		ID:         f.id,
		Procs:      j.groupProcs(f.g),
		LocalProcs: j.procs(f.local),
		Node:       j.lay.node.Name,
		Data:       data,
		Collect:    collect,
		Timeout:    j.cfg.Timeouts.Fence,
	}
	j.withBackend(j.cfg.Timeouts.Fence+grace, false, func(ctx context.Context, err error) {
		var resp *plugin.FenceResponse
		if err == nil {
			resp, err = j.be.Fence(ctx, req)
		}
		var blob []byte
		switch {
		case err != nil:
			err = inStep("fence "+f.id, err)
		case collect:
			blob = resp.Data
			if blob == nil {
				blob = []byte{} // all nodes' data is this: none
			}
		}
		// A barrier (collect false) commits only our own node's data;
		// the rest comes by direct modex.
		j.completeFence(f, blob, err)
	})
}

// publishLocked gives the backend what a fence of a one-node job
// committed on this node alone, so that other jobs (a parent, a child, a
// connected job) can read it by direct modex: without it, a job on one
// node would keep its keys to itself. It is a Fence whose participants
// are all here, without collect, and nothing waits for it. Before the
// backend is up nothing is sent: once it is, flushStoreLocked sends the
// whole store. A spawned job asks for its backend for this (its parent
// is the likely reader); a first job does not: if it never needs its
// backend, nobody else can have asked for its data.
func (j *Job) publishLocked(b *kvs.Buffer) {
	if b.Len() == 0 {
		return
	}
	if !j.be.Known() {
		j.fences.withheld = true
		if j.cfg.Job.Parent != "" {
			j.needBackend()
		}
		return
	}
	j.sendPublishLocked(b.Bytes())
}

// flushStoreLocked publishes what a one-node job committed before its
// backend was up. A fence committed meanwhile may go twice; the
// records are the same.
func (j *Job) flushStoreLocked() {
	if j.oneNode() && j.fences.withheld {
		j.fences.withheld = false
		if data := j.store.AppendAll(nil); len(data) > 0 {
			j.sendPublishLocked(data)
		}
	}
}

func (j *Job) sendPublishLocked(data []byte) {
	if !j.be.IsUp() || j.ended {
		return // no backend, or no job: nobody can read it from elsewhere
	}
	j.fences.publishes++
	req := &plugin.FenceRequest{
		ID:         "publish:" + j.lay.node.Name + "/" + strconv.Itoa(j.fences.publishes),
		Procs:      []plugin.Proc{j.proc(plugin.RankWildcard)}, // the whole job is here
		LocalProcs: j.procs(j.lay.local),
		Node:       j.lay.node.Name,
		Data:       data,
		Timeout:    j.cfg.Timeouts.Fence,
		HandOver:   true,
	}
	j.calls.run(j.cfg.Timeouts.Fence+grace, false, func(ctx context.Context) {
		if _, err := j.be.Fence(ctx, req); err != nil && ctx.Err() == nil {
			j.log.Warn().Err(err).Msg("publishing this node's fence data failed: other nodes and jobs cannot read it")
		}
	})
}

func (j *Job) groupProcs(g group) []plugin.Proc {
	if g.ranks == nil {
		return []plugin.Proc{{Nspace: j.cfg.Job.Nspace, Rank: plugin.RankWildcard}}
	}
	return j.procs(g.ranks)
}

func (j *Job) procs(ranks []int32) []plugin.Proc {
	out := make([]plugin.Proc, len(ranks))
	for i, r := range ranks {
		out[i] = j.proc(r)
	}
	return out
}

// completeFence commits the fence's data and answers its waiters. blob
// is every node's data the backend brought back; nil: the fence brought
// none, and this node's own (f.data) is committed.
func (j *Job) completeFence(f *fence, blob []byte, err error) {
	j.mu.Lock()
	if j.ended {
		j.mu.Unlock()
		return
	}
	var ring map[int32]ringEntry
	if err == nil {
		switch {
		case f.g.name == ringName:
			if blob == nil {
				blob = f.data.Bytes()
			}
			ring, err = decodeRing(blob)
			f.data = kvs.Buffer{} // ring data is not the KVS's
		case blob == nil:
			if j.oneNode() {
				j.publishLocked(&f.data)
			}
			// The records were counted when they were put; the copy of
			// node barriers' data sent along is gone.
			j.held -= int64(f.carried)
			if _, cerr := j.store.CommitOwned(&f.data); cerr != nil {
				err = fmt.Errorf("fence %s: %w", f.id, cerr)
			}
		default:
			// Every node's data replaces this node's own: its puts,
			// the copy of node barriers' data sent along, and those
			// barriers' data committed here (the blob holds it again).
			own := int64(f.data.Len() + 2*f.carried)
			f.data = kvs.Buffer{}
			if held := j.held - own + int64(len(blob)); held > j.cfg.Limits.KVSMax {
				j.held -= own
				err = fmt.Errorf("fence %s: the job's KVS would hold %d bytes on node %s, more than its limit of %d bytes (-max-kvs)",
					f.id, held, j.lay.node.Name, j.cfg.Limits.KVSMax)
			} else if _, cerr := j.store.Commit(blob); cerr != nil {
				j.held -= own
				err = fmt.Errorf("fence %s: %w", f.id, cerr)
			} else {
				j.held = held
			}
			j.noteHeldLocked()
		}
	}
	if err != nil {
		j.log.Error().Err(err).Msg("fence failed")
	}
	j.fences.finish(f, err)
	var answers []func()
	if f.g.name == worldName {
		answers = j.wakeLazyLocked(f.seq, err)
	}
	for _, w := range f.waiters {
		w.r.unpark()
	}
	j.startNextLocked(f.g.name)
	j.departIfDueLocked()
	j.mu.Unlock()

	for _, w := range f.waiters {
		switch {
		case err != nil:
			w.r.fail(wire.RcFail, err)
		case ring != nil:
			j.answerRing(w.r, ring)
		default:
			w.r.ok(w.replyKV...)
		}
	}
	for _, a := range answers {
		a()
	}
	j.endAfterTimeout(err)
}

// endAfterTimeout ends the job once a fence of it timed out, its waiters
// told why: a fence that cannot complete ends the job, whatever its
// ranks do next (one that went on after its failed fence, and hung, kept
// the run for as long as it hung).
func (j *Job) endAfterTimeout(err error) {
	if err != nil && errors.Is(err, plugin.ErrTimeout) {
		j.end(Result{Err: err})
	}
}

// fenceTimedOut fails a fence whose local participants did not all
// arrive, naming the missing ones.
func (j *Job) fenceTimedOut(f *fence) {
	j.mu.Lock()
	if f.ready || f.err != nil || j.ended {
		j.mu.Unlock()
		return
	}
	var missing []int32
	for _, r := range f.local {
		if !f.arrived[r] {
			missing = append(missing, r)
		}
	}
	err := fmt.Errorf("fence %s of job %s: %s (node %s) did not arrive within %s: %w",
		f.id, j.cfg.Job.Nspace, plugin.RankList(missing), j.lay.node.Name, j.cfg.Timeouts.Fence, plugin.ErrTimeout)
	f.err = err
	f.stop = nil
	j.fences.lastErr = err
	var answers []func()
	if f.g.name == worldName {
		answers = j.wakeLazyLocked(f.seq, err)
	}
	for _, w := range f.waiters {
		w.r.unpark()
	}
	j.departIfDueLocked()
	j.mu.Unlock()
	j.log.Error().Err(err).Msg("fence timed out")
	for _, w := range f.waiters {
		w.r.fail(wire.RcFail, err)
	}
	for _, a := range answers {
		a()
	}
	j.endAfterTimeout(err)
}
