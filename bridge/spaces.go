package bridge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/wire"
)

// The legacy KVS commands of MPICH's old simple PMI-1 client, which no
// other server answers: create_kvs and destroy_kvs make and remove extra
// key spaces of the job, which put and get address with kvsname=, and
// getbyidx iterates a space.
//
// An extra space is a key prefix in the job's own KVS: its keys are
// "\x00<kvsname>\x00<key>", which no client can put (put refuses a key
// with a NUL byte), so they travel through fences, the backend and direct
// modex as the job's keys do, and count against the same limits. A
// barrier commits every space. A space's name says which job and rank made
// it, so a rank on another node can address it without being told.

// maxSpacesPerRank bounds the extra spaces one rank may create.
const maxSpacesPerRank = 64

// spaceKey is the key under which key of extra space name is stored.
func spaceKey(name, key string) string {
	return "\x00" + name + "\x00" + key
}

// displayKey shows a stored key as its client wrote it.
func displayKey(k string) string {
	if rest, ok := strings.CutPrefix(k, "\x00"); ok {
		if name, key, ok := strings.Cut(rest, "\x00"); ok {
			return key + " (in kvs " + name + ")"
		}
	}
	return k
}

// spacePrefix is how names of the job's extra spaces start.
func (j *Job) spacePrefix() string { return j.cfg.Job.Nspace + "-kvs-" }

// space resolves a PMI-1 request's kvsname= to the prefix of its keys: ""
// for the job's own KVS. It answers r and returns false when the name is
// not one of the job's live spaces.
func (s *Session) space(r *request, m *wire.Message) (string, bool) {
	name, ok := m.Get("kvsname")
	j := s.j
	if !ok || name == j.cfg.Job.Nspace {
		return "", true
	}
	if !j.isSpaceName(name) {
		r.fail(wire.RcInvalidArg, fmt.Errorf("%s: kvsname %q is not a KVS of this job (%s, or a space made by create_kvs)", m.Cmd, name, j.cfg.Job.Nspace))
		return "", false
	}
	j.mu.Lock()
	gone := j.spacesGone[name]
	j.mu.Unlock()
	if gone {
		r.fail(wire.RcInvalidArg, fmt.Errorf("%s: kvs %s was destroyed", m.Cmd, name))
		return "", false
	}
	return spaceKey(name, ""), true
}

// isSpaceName: <nspace>-kvs-<rank>.<n> with a rank of the job.
func (j *Job) isSpaceName(name string) bool {
	rest, ok := strings.CutPrefix(name, j.spacePrefix())
	if !ok {
		return false
	}
	rs, ns, ok := strings.Cut(rest, ".")
	rank, err1 := strconv.ParseInt(rs, 10, 32)
	n, err2 := strconv.Atoi(ns)
	return ok && err1 == nil && err2 == nil && rank >= 0 && rank < int64(j.cfg.Job.Size) &&
		n >= 0 && n < maxSpacesPerRank && strconv.Itoa(n) == ns && strconv.FormatInt(rank, 10) == rs
}

// createSpace answers create_kvs with a new space's name.
func (s *Session) createSpace(r *request) {
	j := s.j
	j.mu.Lock()
	t := j.tasks[s.rank]
	// A name destroyed before it was made (destroy_kvs takes any name
	// of the job's) is never handed out.
	for t.spaces < maxSpacesPerRank && j.spacesGone[j.spacePrefix()+strconv.Itoa(int(s.rank))+"."+strconv.Itoa(t.spaces)] {
		t.spaces++
	}
	n := t.spaces
	if n >= maxSpacesPerRank {
		j.mu.Unlock()
		r.fail(wire.RcFail, fmt.Errorf("create_kvs: rank %d already created %d key spaces, the most one rank may", s.rank, maxSpacesPerRank))
		return
	}
	t.spaces++
	j.mu.Unlock()
	r.ok("kvsname", j.spacePrefix()+strconv.Itoa(int(s.rank))+"."+strconv.Itoa(n))
}

// destroySpace answers destroy_kvs: the space's keys go from this node,
// and its name may not be used here again.
func (s *Session) destroySpace(r *request, m *wire.Message) {
	j := s.j
	name := m.Value("kvsname")
	if name == j.cfg.Job.Nspace {
		r.fail(wire.RcInvalidArg, fmt.Errorf("destroy_kvs: %s is the job's own KVS; only spaces made by create_kvs can be destroyed", name))
		return
	}
	prefix, ok := s.space(r, m)
	if !ok {
		return
	}
	j.mu.Lock()
	j.spacesGone[name] = true
	j.store.Delete(prefix)
	j.mu.Unlock()
	r.ok()
}

// getByIdx answers getbyidx: the idx-th key of a space in byte order of
// the keys, then rc=-1 reason=no_more_keyvals. The order is stable while
// the space does not change (a fence may add keys).
func (s *Session) getByIdx(r *request, spec *wire.CommandSpec, m *wire.Message) {
	j := s.j
	idx, err := spec.Int(m, "idx")
	if err != nil || idx < 0 {
		r.fail(wire.RcInvalidArg, fmt.Errorf("getbyidx: bad idx=%q", m.Value("idx")))
		return
	}
	prefix, ok := s.space(r, m)
	if !ok {
		return
	}
	j.mu.Lock()
	switch {
	case j.cfg.FenceMode == FenceModex:
		j.mu.Unlock()
		r.fail(wire.RcFail, fmt.Errorf("getbyidx: under fence mode modex no node holds the whole KVS; run the job with -fence-mode collect"))
		return
	case j.tasks[s.rank].seq[worldName] > j.fences.epoch():
		j.mu.Unlock()
		r.fail(wire.RcFail, fmt.Errorf("getbyidx: the fence rank %d entered has not completed yet", s.rank))
		return
	}
	keys := j.store.Keys(prefix)
	if prefix == "" {
		// The job's own keys sort after every extra space's ("\x00...").
		i, _ := slices.BinarySearch(keys, "\x01")
		keys = keys[i:]
	}
	if idx >= len(keys) {
		j.mu.Unlock()
		r.failKV(-1, nil, "reason", "no_more_keyvals")
		return
	}
	k := keys[idx]
	v, _, _ := j.store.Get(k)
	j.mu.Unlock()
	r.ok("nextidx", strconv.Itoa(idx+1), "key", strings.TrimPrefix(k, prefix), "val", v)
}
