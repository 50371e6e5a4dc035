package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// clientInit marks a rank as a PMI client and tells the backend.
func (j *Job) clientInit(s *Session, rank int32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.tasks[rank]
	if t == nil || t.inited {
		return
	}
	t.inited = true
	j.notices.connected = append(j.notices.connected, j.proc(rank))
	j.flushNoticesLocked()
}

func (s *Session) finalize(r *request) {
	j := s.j
	j.mu.Lock()
	t := j.tasks[s.rank]
	if !t.finalized {
		t.finalized = true
		j.notices.finalized = append(j.notices.finalized, j.proc(s.rank))
		j.flushNoticesLocked()
	}
	j.mu.Unlock()
	r.ok()
}

// notices batches the ClientConnected and ClientFinalized reports: while
// one call is in flight the next ranks queue up and go together, so a job
// of a thousand ranks costs a few calls, not two thousand.
type notices struct {
	connected []plugin.Proc
	finalized []plugin.Proc
	busy      bool // a flush goroutine is running
}

// flushNoticesLocked starts the goroutine that sends queued notices,
// unless it runs already. A rank's connect always goes before its
// finalize: each round sends the connects first.
func (j *Job) flushNoticesLocked() {
	if j.notices.busy {
		return
	}
	j.notices.busy = true
	started := j.goNotify(func(ctx context.Context) {
		if !j.backendUp(ctx) {
			// A job that never needed its backend ended without it: the
			// RM saw its tasks come and go without gopmi's word.
			j.mu.Lock()
			j.notices = notices{}
			j.mu.Unlock()
			return
		}
		for {
			j.mu.Lock()
			conn, fin := j.notices.connected, j.notices.finalized
			j.notices.connected, j.notices.finalized = nil, nil
			if len(conn) == 0 && len(fin) == 0 {
				j.notices.busy = false
				j.mu.Unlock()
				return
			}
			j.mu.Unlock()
			if len(conn) > 0 {
				j.notify(ctx, "ClientConnected", conn, j.be.ClientConnected)
			}
			if len(fin) > 0 {
				j.notify(ctx, "ClientFinalized", fin, j.be.ClientFinalized)
			}
		}
	})
	if !started {
		j.notices.busy = false
	}
}

func (j *Job) notify(ctx context.Context, what string, procs []plugin.Proc, call func(context.Context, *plugin.ClientRequest) error) {
	err := call(ctx, &plugin.ClientRequest{Procs: procs})
	switch {
	case err == nil, errors.Is(err, plugin.ErrNotSupported):
	case errors.Is(err, plugin.ErrBackendGone):
		// The job fails on its own account when its backend is gone, or
		// ended before the backend was needed.
		j.log.Debug().Int("ranks", len(procs)).Err(err).Msg("backend " + what + " not delivered")
	default:
		j.log.Warn().Int("ranks", len(procs)).Err(err).Msg("backend " + what + " failed")
	}
}

// abort asks the RM to end the job and then ends it here. The client
// expects no answer: it exits.
func (s *Session) abort(r *request, code int, msg string, world bool) {
	j := s.j
	rank := s.rank
	r.answered.Store(true)
	req := &plugin.AbortRequest{Proc: j.proc(rank), Status: int32(code), Message: msg}
	if !world {
		// MPI_Abort on a smaller communicator still ends the job in
		// MPICH; name the caller so the RM may be more precise.
		req.Targets = []plugin.Proc{j.proc(rank)}
	}
	j.log.Warn().Int32("rank", rank).Int("status", code).Str("abort_message", msg).Msg("task aborted the job")
	j.mu.Lock()
	// The client exits right after its abort: its connection closing is
	// part of the abort, not an early exit.
	j.tasks[rank].aborted = true
	j.mu.Unlock()
	// The RM hears of it on a goroutine that Shutdown waits for, so the
	// abort reaches the backend even though the job ends now.
	j.goNotify(func(ctx context.Context) {
		if err := j.be.Abort(ctx, req); err != nil {
			j.log.Error().Err(err).Msg("backend abort failed; the shim's exit status reports it")
		}
	})
	err := fmt.Errorf("%w: job %s aborted by rank %d with status %d: %s", plugin.ErrAborted, j.cfg.Job.Nspace, rank, code, msg)
	j.end(Result{Aborted: true, Status: code, Err: err})
}

// put buffers a key until the task's next fence.
func (s *Session) put(r *request, key, val string) {
	j := s.j
	l := j.cfg.Limits
	switch {
	case key == "":
		r.fail(wire.RcInvalidKey, fmt.Errorf("put: empty key"))
		return
	case len(key) > l.KeyMax:
		r.fail(wire.RcInvalidKeyLength, fmt.Errorf("put: key of %d bytes exceeds keylen_max=%d", len(key), l.KeyMax))
		return
	case len(val) > l.ValMax:
		r.fail(wire.RcInvalidValLength, fmt.Errorf("put %s: value of %d bytes exceeds vallen_max=%d", key, len(val), l.ValMax))
		return
	}
	j.mu.Lock()
	t := j.tasks[s.rank]
	t.pending = kvs.AppendRecord(t.pending, kvs.Record{Rank: s.rank, Key: key, Value: val})
	j.mu.Unlock()
	r.ok()
}

// get answers a PMI-1 get or PMI-2 kvs-get. src is the PMI-2 srcid (-1
// when unknown). v1 gets also see job attributes, which PMI-1 has no
// other way to read.
func (s *Session) get(r *request, jobid string, src int32, key string, v1 bool) {
	j := s.j
	if jobid != j.cfg.Job.Nspace {
		s.foreignGet(r, jobid, src, key)
		return
	}
	if v1 {
		if v, ok := j.attrs[key]; ok {
			r.ok("value", v)
			return
		}
		if key == hasNameServ {
			s.hasNameServ(r)
			return
		}
	}
	j.mu.Lock()
	if v, _, ok := j.store.Get(key); ok {
		j.mu.Unlock()
		r.foundValue(v)
		return
	}
	if !v1 {
		if v, ok := j.attrs[key]; ok {
			j.mu.Unlock()
			r.foundValue(v)
			return
		}
	}
	if j.ended {
		err := j.result.Err
		j.mu.Unlock()
		r.fail(wire.RcFail, fmt.Errorf("get %s: %w", key, err))
		return
	}
	t := j.tasks[s.rank]
	need := t.seq[worldName]
	done := j.groupDone[worldName]
	switch {
	case need > done:
		// The task has fenced but the fence has not finished (lazy mode):
		// wait for it, as Hydra does.
		j.parkLazyLocked(r, key, need)
		j.mu.Unlock()
	case j.cfg.FenceMode == FenceModex:
		answer := j.modexGetLocked(r, src, key)
		j.mu.Unlock()
		if answer != nil {
			answer()
		}
	default:
		j.mu.Unlock()
		s.backendAttr(r, key)
	}
}

// backendAttr answers a key found nowhere else from the attributes the
// backend owns, waiting for the backend if it is still starting.
func (s *Session) backendAttr(r *request, key string) {
	j := s.j
	if j.be.Known() {
		if v, ok := j.be.Attr(key); ok {
			r.foundValue(v)
		} else {
			r.notFound(key)
		}
		return
	}
	s.async(r, toBackend, func(ctx context.Context) {
		if err := j.capabilities(ctx); err != nil {
			r.notFound(key)
			return
		}
		s.backendAttr(r, key)
	})
}

// foundValue answers a successful get in the form of its protocol.
func (r *request) foundValue(v string) {
	if r.v == 2 {
		r.ok("found", "TRUE", "value", v)
		return
	}
	r.ok("value", v)
}

// notFound answers a get of a missing key: PMI-2 clients expect rc=0 and
// found=FALSE (MPICH's "-NONEXIST-KEY" barrier), PMI-1 ones an error.
func (r *request) notFound(key string) {
	if r.v == 2 {
		r.ok("found", "FALSE")
		return
	}
	r.fail(wire.RcFail, fmt.Errorf("key %s not found", key))
}

func (j *Job) parkLazyLocked(r *request, key string, need int) {
	w := &waiter{req: r, key: key, need: need}
	r.park()
	w.stop = j.afterFunc(j.cfg.Timeouts.Get, func() {
		j.mu.Lock()
		found := false
		for i, x := range j.lazyWaits {
			if x == w {
				j.lazyWaits = append(j.lazyWaits[:i], j.lazyWaits[i+1:]...)
				found = true
				break
			}
		}
		r.unpark()
		j.mu.Unlock()
		if found {
			r.fail(wire.RcFail, fmt.Errorf("get %s: %s did not complete within %s", key, fenceID(worldName, need), j.cfg.Timeouts.Get))
		}
	})
	j.lazyWaits = append(j.lazyWaits, w)
}

// wakeLazyLocked answers the gets that waited for world fences up to done.
// It returns the answers to send once the lock is released.
func (j *Job) wakeLazyLocked(done int, ferr error) []func() {
	var out []func()
	keep := j.lazyWaits[:0]
	for _, w := range j.lazyWaits {
		if w.need > done {
			keep = append(keep, w)
			continue
		}
		w.stop()
		w.req.unpark()
		r, key := w.req, w.key
		if ferr != nil {
			out = append(out, func() { r.fail(wire.RcFail, fmt.Errorf("get %s: %w", key, ferr)) })
			continue
		}
		out = append(out, j.heldAnswerLocked(r, key))
	}
	for i := len(keep); i < len(j.lazyWaits); i++ {
		j.lazyWaits[i] = nil
	}
	j.lazyWaits = keep
	return out
}

// heldAnswerLocked is the answer to a parked get once what it waited for
// is here: the committed value, else (PMI-2) the job attribute, else not
// found. Run it after unlocking.
func (j *Job) heldAnswerLocked(r *request, key string) func() {
	if v, _, ok := j.store.Get(key); ok {
		return func() { r.foundValue(v) }
	}
	if v, ok := j.attrs[key]; ok && r.v == 2 {
		return func() { r.foundValue(v) }
	}
	return func() { r.notFound(key) }
}

// modexGetLocked fetches a missing key from the node that holds it. It
// returns the answer to send after unlocking when there is nothing to
// fetch.
func (j *Job) modexGetLocked(r *request, src int32, key string) func() {
	notFound := func() { r.notFound(key) }
	target := plugin.Proc{Nspace: j.cfg.Job.Nspace, Rank: plugin.RankWildcard}
	node := int32(-1)
	if src >= 0 && src < j.cfg.Job.Size {
		node = j.lay.rankNode[src]
		if j.cfg.Job.Nodes[node].ID == j.cfg.NodeID {
			return notFound // our own node's data is all here
		}
		target.Rank = src
	}
	epoch := j.groupDone[worldName]
	if j.fetched == nil {
		j.fetched = make(map[int32]int)
	}
	if got, ok := j.fetched[node]; ok && got >= epoch {
		return notFound
	}
	if waits, busy := j.modexWaits[node]; busy {
		j.modexWaits[node] = append(waits, &waiter{req: r, key: key})
		r.park()
		return nil
	}
	if j.modexWaits == nil {
		j.modexWaits = make(map[int32][]*waiter)
	}
	j.modexWaits[node] = []*waiter{{req: r, key: key}}
	r.park()
	requestor := j.proc(r.rank)
	j.goBackend(j.cfg.Timeouts.Get+grace, func(ctx context.Context) {
		resp, err := j.be.DirectModex(ctx, &plugin.ModexRequest{Requestor: requestor, Proc: target, Timeout: j.cfg.Timeouts.Get})
		j.mu.Lock()
		waits := j.modexWaits[node]
		delete(j.modexWaits, node)
		if err == nil {
			_, err = j.store.Commit(resp.Data)
			j.fetched[node] = epoch
		}
		var out []func()
		for _, w := range waits {
			w.req.unpark()
			r, key := w.req, w.key
			if err != nil {
				out = append(out, func() { r.fail(wire.RcFail, fmt.Errorf("get %s from %s: %w", key, target, err)) })
			} else {
				out = append(out, j.heldAnswerLocked(r, key))
			}
		}
		j.mu.Unlock()
		for _, f := range out {
			f()
		}
	})
	return nil
}

// foreignGet reads another job's KVS through the backend (after
// job-connect, or a spawner reading its child).
func (s *Session) foreignGet(r *request, jobid string, src int32, key string) {
	j := s.j
	target := plugin.Proc{Nspace: jobid, Rank: plugin.RankWildcard}
	if src >= 0 {
		target.Rank = src
	}
	requestor := j.proc(s.rank)
	s.async(r, toGet, func(ctx context.Context) {
		resp, err := j.be.DirectModex(ctx, &plugin.ModexRequest{Requestor: requestor, Proc: target, Timeout: j.cfg.Timeouts.Get})
		if err != nil {
			r.fail(wire.RcFail, fmt.Errorf("get %s from job %s: %w", key, jobid, err))
			return
		}
		var val string
		found := false
		derr := kvs.Decode(resp.Data, func(rec kvs.Record) error {
			if rec.Key == key {
				val, found = rec.Value, true
			}
			return nil
		})
		switch {
		case derr != nil:
			r.fail(wire.RcFail, fmt.Errorf("get %s from job %s: %w", key, jobid, derr))
		case found:
			r.foundValue(val)
		default:
			r.notFound(key)
		}
	})
}

// putNodeAttr stores a node attribute and wakes its waiters.
func (s *Session) putNodeAttr(r *request, key, val string) {
	j := s.j
	if len(key) > j.cfg.Limits.KeyMax {
		r.fail(wire.RcInvalidKeyLength, fmt.Errorf("info-putnodeattr: key of %d bytes exceeds %d", len(key), j.cfg.Limits.KeyMax))
		return
	}
	if len(val) > j.cfg.Limits.ValMax {
		r.fail(wire.RcInvalidValLength, fmt.Errorf("info-putnodeattr %s: value of %d bytes exceeds %d", key, len(val), j.cfg.Limits.ValMax))
		return
	}
	j.mu.Lock()
	j.nodeAttrs[key] = val
	waits := j.attrWaits[key]
	delete(j.attrWaits, key)
	for _, w := range waits {
		w.stop()
		w.req.unpark()
	}
	j.mu.Unlock()
	r.ok()
	for _, w := range waits {
		w.req.ok("found", "TRUE", "value", val)
	}
}

// getNodeAttr answers at once, or with wait=TRUE parks until the key is
// put on this node or the node-attribute timeout passes.
func (s *Session) getNodeAttr(r *request, key string, wait bool) {
	j := s.j
	j.mu.Lock()
	if v, ok := j.nodeAttrs[key]; ok {
		j.mu.Unlock()
		r.ok("found", "TRUE", "value", v)
		return
	}
	if !wait {
		j.mu.Unlock()
		r.ok("found", "FALSE")
		return
	}
	if j.ended {
		err := j.result.Err
		j.mu.Unlock()
		r.failKV(wire.RcFail, fmt.Errorf("info-getnodeattr %s: the job has ended: %w", key, err), "found", "FALSE")
		return
	}
	w := &waiter{req: r, key: key}
	r.park()
	w.stop = j.afterFunc(j.cfg.Timeouts.NodeAttr, func() {
		j.mu.Lock()
		ws := j.attrWaits[key]
		found := false
		for i, x := range ws {
			if x == w {
				j.attrWaits[key] = append(ws[:i], ws[i+1:]...)
				found = true
				break
			}
		}
		r.unpark()
		j.mu.Unlock()
		if found {
			r.failKV(wire.RcFail, fmt.Errorf("info-getnodeattr %s: no task on node %s put it within %s", key, j.lay.node.Name, j.cfg.Timeouts.NodeAttr), "found", "FALSE")
		}
	})
	j.attrWaits[key] = append(j.attrWaits[key], w)
	j.mu.Unlock()
}

// getJobAttr serves job attributes, then (as Hydra does) the KVS.
func (s *Session) getJobAttr(r *request, key string) {
	j := s.j
	if v, ok := j.attrs[key]; ok {
		r.ok("found", "TRUE", "value", v)
		return
	}
	if key == hasNameServ {
		s.hasNameServ(r)
		return
	}
	j.mu.Lock()
	v, _, ok := j.store.Get(key)
	j.mu.Unlock()
	if ok {
		r.ok("found", "TRUE", "value", v)
		return
	}
	s.backendAttr(r, key)
}

// hasNameServ is the PMI-2 job attribute that says whether the name
// service works: whether the backend publishes.
const hasNameServ = "hasNameServ"

func (s *Session) hasNameServ(r *request) {
	s.async(r, toBackend, func(ctx context.Context) {
		if err := s.j.capabilities(ctx); err != nil {
			r.fail(wire.RcFail, fmt.Errorf("%s %s: %w", r.cmd, hasNameServ, err))
			return
		}
		r.foundValue(wire.FormatBool(s.j.be.Has(plugin.CapPublish)))
	})
}
