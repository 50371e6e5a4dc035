package bridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// put buffers a key until the task's next fence. prefix places it in an
// extra key space ("": the job's own).
func (s *Session) put(r *request, prefix, key, val string) {
	j := s.j
	l := j.cfg.Limits
	switch {
	case key == "" && val == "" && r.c.emptyPutOK():
		// MPICH's singleton pushes the put it cached before it had a
		// process manager, an empty one when it cached nothing.
		r.ok()
		return
	case key == "":
		r.fail(wire.RcInvalidKey, fmt.Errorf("put: empty key"))
		return
	case strings.IndexByte(key, 0) >= 0:
		r.fail(wire.RcInvalidKey, fmt.Errorf("put: key %q holds a NUL byte", key))
		return
	case len(key) > l.KeyMax:
		r.fail(wire.RcInvalidKeyLength, fmt.Errorf("put: key of %d bytes exceeds keylen_max=%d", len(key), l.KeyMax))
		return
	case len(val) > l.ValMax:
		r.fail(wire.RcInvalidValLength, fmt.Errorf("put %s: value of %d bytes exceeds vallen_max=%d", key, len(val), l.ValMax))
		return
	}
	rec := kvs.Record{Rank: s.rank, Key: prefix + key, Value: val}
	n := int64(kvs.RecordSize(rec))
	j.mu.Lock()
	if j.held+n > l.KVSMax {
		err := fmt.Errorf("put %s: the job's KVS holds %d bytes on this node; %d more would pass its limit of %d bytes (-max-kvs)",
			displayKey(rec.Key), j.held, n, l.KVSMax)
		first := !j.kvsFull
		j.kvsFull = true
		j.mu.Unlock()
		if first {
			j.log.Warn().Int32("rank", s.rank).Err(err).Msg("a put was refused: the job's KVS is full on this node (later refusals are not logged)")
		}
		r.fail(wire.RcNoMem, err)
		return
	}
	j.held += n
	j.noteHeldLocked()
	j.tasks[s.rank].pending.Append(rec)
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
		err := j.endedErrLocked("get " + key)
		j.mu.Unlock()
		r.fail(wire.RcFail, err)
		return
	}
	t := j.tasks[s.rank]
	need := t.seq[worldName]
	done := j.fences.epoch()
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

// foundValue answers a successful get in the form of its protocol.
func (r *request) foundValue(v string) {
	r.c.found(r, v)
}

// notFound answers a get of a missing key: PMI-2 clients expect rc=0 and
// found=FALSE (MPICH's "-NONEXIST-KEY" barrier), PMI-1 ones an error.
func (r *request) notFound(key string) {
	r.c.notFound(r, key)
}

// parkLazyLocked parks a get until the world fence need ended.
func (j *Job) parkLazyLocked(r *request, key string, need int) {
	d := j.cfg.Timeouts.Get
	j.lazy.park(j, need, &waiter{req: r, key: key}, d, func() {
		r.fail(wire.RcFail, fmt.Errorf("get %s: %s did not complete within %s", displayKey(key), fenceID(worldName, need), d))
	})
}

// wakeLazyLocked answers the gets that waited for world fences up to done.
// It returns the answers to send once the lock is released.
func (j *Job) wakeLazyLocked(done int, ferr error) []func() {
	var out []func()
	for _, w := range j.lazy.take(func(need int) bool { return need <= done }) {
		r, key := w.req, w.key
		if ferr != nil {
			out = append(out, func() { r.fail(wire.RcFail, fmt.Errorf("get %s: %w", displayKey(key), ferr)) })
			continue
		}
		out = append(out, j.heldAnswerLocked(r, key))
	}
	return out
}

// heldAnswerLocked is the answer to a parked get once what it waited for
// is here: the committed value, else (PMI-2) the job attribute, else not
// found. Run it after unlocking.
func (j *Job) heldAnswerLocked(r *request, key string) func() {
	if v, _, ok := j.store.Get(key); ok {
		return func() { r.foundValue(v) }
	}
	if v, ok := j.attrs[key]; ok && r.c.attrsInGet() {
		return func() { r.foundValue(v) }
	}
	return func() { r.notFound(key) }
}

// modexTable is this node's direct modex of other nodes' data: the gets
// waiting on a fetch in flight and the world fence each node was last
// fetched at, by node index (-1: the whole job). Guarded by j.mu.
type modexTable struct {
	fetched map[int32]int
	waiting map[int32][]*waiter
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
	m := &j.modex
	epoch := j.fences.epoch()
	if got, ok := m.fetched[node]; ok && got >= epoch {
		return notFound
	}
	r.park()
	w := &waiter{req: r, key: key}
	if waits, busy := m.waiting[node]; busy {
		m.waiting[node] = append(waits, w)
		return nil
	}
	if m.waiting == nil {
		m.waiting = make(map[int32][]*waiter)
		m.fetched = make(map[int32]int)
	}
	m.waiting[node] = []*waiter{w}
	req := &plugin.ModexRequest{Requestor: j.proc(r.rank), Proc: target, Timeout: j.cfg.Timeouts.Get}
	j.withBackend(j.cfg.Timeouts.Get+grace, false, func(ctx context.Context, err error) {
		var resp *plugin.ModexResponse
		if err == nil {
			resp, err = j.be.DirectModex(ctx, req)
		}
		j.mu.Lock()
		waits := m.waiting[node]
		delete(m.waiting, node)
		if err == nil {
			err = j.commitFetchedLocked(resp.Data)
			m.fetched[node] = epoch
		}
		var out []func()
		for _, w := range waits {
			w.req.unpark()
			r, key := w.req, w.key
			if err != nil {
				out = append(out, func() { r.fail(wire.RcFail, fmt.Errorf("get %s from %s: %w", displayKey(key), target, err)) })
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
	req := &plugin.ModexRequest{Requestor: j.proc(s.rank), Proc: target, Timeout: j.cfg.Timeouts.Get}
	s.async(r, "", "", toGet, nil, func(ctx context.Context) {
		resp, err := j.be.DirectModex(ctx, req)
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

// commitFetchedLocked commits records direct modex brought, unless they
// would pass the job's KVS limit on this node.
func (j *Job) commitFetchedLocked(blob []byte) error {
	if held := j.held + int64(len(blob)); held > j.cfg.Limits.KVSMax {
		return fmt.Errorf("the job's KVS would hold %d bytes on node %s, more than its limit of %d bytes (-max-kvs)",
			held, j.lay.node.Name, j.cfg.Limits.KVSMax)
	}
	j.held += int64(len(blob))
	j.noteHeldLocked()
	_, err := j.store.Commit(blob)
	return err
}
