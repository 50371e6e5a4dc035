//go:build pmix

package pmix

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
)

// dmodexWait bounds how long the server waits for libpmix's direct-modex
// data of a local client it hands the backend (at a connect, and in a
// fence that collects nothing). libpmix answers at once for a client that
// committed; one that committed nothing is answered only when it does, so
// its data is left out after this.
const dmodexWait = 2 * time.Second

// dmodexWaits are the dmodex requests libpmix has not answered yet, by id.
type dmodexWaits struct {
	next  uintptr
	waits map[uintptr]chan dmodexData
	// version numbers libpmix's answers in the order they came (frames.go).
	version uint64
	// watches are the requests that watch for a client's first commit
	// (watchCommits), by id.
	watches map[uintptr]plugin.Proc
	// sent is, per client that committed, a digest of the data last
	// handed to the backend by its first commit's hand-over or a fence
	// that collects nothing: unchanged data is not sent again (the
	// backend keeps every contribution).
	sent map[plugin.Proc][sha256.Size]byte
	// handing is the data of the clients that committed first since the
	// last hand-over, framed, and whose they are; flushing is set while
	// a hand-over is due.
	handing      []byte
	handingProcs []plugin.Proc
	flushing     bool
	// fenced are the clients that entered a fence after their first
	// commit: what they committed before it went with it (markFenced).
	fenced map[plugin.Proc]bool
}

// dmodexData is one of libpmix's answers and its version.
type dmodexData struct {
	data    []byte
	version uint64
}

// handOverDelay gathers the first commits of a node's clients into one
// hand-over to the backend: clients that start together commit together.
const handOverDelay = 10 * time.Millisecond

// watchCommits asks libpmix for the direct-modex data of each of a
// multi-node job's local clients before any committed: libpmix answers
// once the client commits, which is how the server learns of a commit.
// The first commit's data is handed to the backend at once (handOver),
// so that a client on another node may read it by direct modex with no
// fence between (Open MPI's async modex); a fence that collects nothing
// carries the newer data of every client that committed (goFence). Data
// of a later commit reaches other nodes only through such a fence: PMIx
// clients fence between their rounds of puts.
func (s *Server) watchCommits(nspace string, ranks []int32) {
	ns := C.CString(nspace)
	defer C.free(unsafe.Pointer(ns))
	for _, r := range ranks {
		p := plugin.Proc{Nspace: nspace, Rank: r}
		s.mu.Lock()
		if s.dmodex.watches == nil {
			s.dmodex.watches, s.dmodex.sent = map[uintptr]plugin.Proc{}, map[plugin.Proc][sha256.Size]byte{}
		}
		s.dmodex.next++
		id := s.dmodex.next
		s.dmodex.watches[id] = p
		s.mu.Unlock()
		if rc := C.gopmi_dmodex_request(ns, C.uint32_t(r), C.uintptr_t(id)); rc != C.PMIX_SUCCESS {
			s.mu.Lock()
			delete(s.dmodex.watches, id)
			s.mu.Unlock()
			s.log.Warn().Str("proc", p.String()).Str("status", C.GoString(C.gopmi_error_string(rc))).
				Msg("pmix: cannot watch for the client's commit: its data reaches other nodes only through collecting fences")
		}
	}
}

// committedLocked is the procs that committed data (watchCommits). Called
// with mu held.
func (s *Server) committedLocked(procs []plugin.Proc) []plugin.Proc {
	var out []plugin.Proc
	for _, p := range procs {
		if _, ok := s.dmodex.sent[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// handOver gives the backend, after handOverDelay, the data of the
// clients that committed for the first time: a fence of theirs alone,
// which completes at once and keeps its data for DirectModex as every
// fence's.
func (s *Server) handOver() {
	select {
	case <-time.After(handOverDelay):
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	data, procs := s.dmodex.handing, s.dmodex.handingProcs
	s.dmodex.handing, s.dmodex.handingProcs, s.dmodex.flushing = nil, nil, false
	s.mu.Unlock()
	if len(procs) == 0 {
		return
	}
	ctx, cancel := s.newsContext()
	defer cancel()
	if err := s.handData(ctx, procs, data, s.opts.FenceTimeout); err != nil {
		s.log.Warn().Err(err).Int("clients", len(procs)).Msg("pmix: hand the committed data to the backend")
		return
	}
	s.lateCommits(procs)
}

// handData gives the backend data, frames of procs (this node's
// clients): a fence of theirs alone, which completes at once and keeps
// its data for DirectModex as every fence's.
func (s *Server) handData(ctx context.Context, procs []plugin.Proc, data []byte, timeout time.Duration) error {
	s.mu.Lock()
	node, _ := s.localProcsLocked(procs)
	s.published++
	id := fmt.Sprintf("pmix:modex:%s/%d", node, s.published)
	s.mu.Unlock()
	_, err := s.be.Fence(ctx, &plugin.FenceRequest{ID: id, Procs: procs, LocalProcs: procs, Node: node, Data: data, Timeout: timeout, HandOver: true})
	return err
}

// lateCommitChecks are when, after a hand-over, the clients' data is
// asked again: a client that commits again soon (Open MPI does, once its
// transports are up, and then reads its peers with no fence between)
// has the newer data handed over too, so that a reader elsewhere finds
// the keys of its later commit (directModex waits keyWait for them).
var lateCommitChecks = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond,
	160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond, 1280 * time.Millisecond}

// lateCommits hands over, at each of lateCommitChecks, the data of procs
// that changed since it was last handed over, until they entered a fence.
func (s *Server) lateCommits(procs []plugin.Proc) {
	for _, d := range lateCommitChecks {
		select {
		case <-time.After(d):
		case <-s.ctx.Done():
			return
		}
		if procs = s.unfenced(procs); len(procs) == 0 {
			return
		}
		ctx, cancel := s.newsContext()
		var err error
		if data := s.dmodexFrames(ctx, procs, nil, true); len(data) > 0 {
			err = s.handData(ctx, procs, data, s.opts.FenceTimeout)
		}
		cancel()
		if err != nil {
			s.log.Warn().Err(err).Int("clients", len(procs)).Msg("pmix: hand a later commit to the backend")
			return
		}
	}
}

// markFenced notes that req's local participants, this node's clients,
// entered a fence: the ones that committed are asked no more by
// lateCommits. A fence that collects nothing hands over what they
// committed before it (goFence), and one that collects their whole job's
// gives it to every node of the job; a later commit reaches other nodes
// through their next fence, as between any rounds of puts. (A collecting
// fence of some ranks only leaves readers outside them to the hand-overs,
// so it marks nobody.) Asking a node's every client again and again (64
// libpmix answers each time) while the job's ranks fence and read cost
// the job CPU it waits for.
func (s *Server) markFenced(req *plugin.FenceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range req.LocalProcs {
		if _, ok := s.dmodex.sent[p]; !ok {
			continue
		}
		if req.Collect && !slices.Contains(req.Procs, plugin.Proc{Nspace: p.Nspace, Rank: plugin.RankWildcard}) {
			continue
		}
		if s.dmodex.fenced == nil {
			s.dmodex.fenced = map[plugin.Proc]bool{}
		}
		s.dmodex.fenced[p] = true
	}
}

// unfenced is procs without those that entered a fence after their first
// commit (markFenced).
func (s *Server) unfenced(procs []plugin.Proc) []plugin.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(procs), func(p plugin.Proc) bool { return s.dmodex.fenced[p] })
}

// dmodexFrames appends to part the direct-modex data of each of procs
// that libpmix gives within dmodexWait, as frames; with changed, only
// the data that differs from what was last sent (dmodexWaits.sent).
func (s *Server) dmodexFrames(ctx context.Context, procs []plugin.Proc, part []byte, changed bool) []byte {
	type ask struct {
		p  plugin.Proc
		id uintptr
		ch chan dmodexData
	}
	asks := make([]ask, 0, len(procs))
	s.mu.Lock()
	if s.dmodex.waits == nil {
		s.dmodex.waits = map[uintptr]chan dmodexData{}
	}
	for _, p := range procs {
		s.dmodex.next++
		a := ask{p: p, id: s.dmodex.next, ch: make(chan dmodexData, 1)}
		s.dmodex.waits[a.id] = a.ch
		asks = append(asks, a)
	}
	s.mu.Unlock()
	forget := func(id uintptr) {
		s.mu.Lock()
		delete(s.dmodex.waits, id)
		s.mu.Unlock()
	}
	for i, a := range asks {
		ns := C.CString(a.p.Nspace)
		rc := C.gopmi_dmodex_request(ns, C.uint32_t(a.p.Rank), C.uintptr_t(a.id))
		C.free(unsafe.Pointer(ns))
		if rc != C.PMIX_SUCCESS {
			forget(a.id)
			asks[i].ch = nil
			s.log.Debug().Str("proc", a.p.String()).Str("status", C.GoString(C.gopmi_error_string(rc))).Msg("pmix: no direct-modex data")
		}
	}
	// One deadline for all: each wait gets what is left of it.
	deadline := time.Now().Add(dmodexWait)
	for _, a := range asks {
		if a.ch == nil {
			continue
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case d, ok := <-a.ch:
			t.Stop()
			if ok && (!changed || s.sending(a.p, d.data)) {
				part = appendDmodex(part, a.p.Nspace, uint32(a.p.Rank), d.version, d.data)
			}
			continue
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		// Not committed: left out, and its late answer dropped.
		forget(a.id)
		s.log.Debug().Str("proc", a.p.String()).Msg("pmix: a client's data is not in the fence: it committed none")
	}
	return part
}

// sending records that p's data goes to the backend, and says whether it
// differs from what went last.
func (s *Server) sending(p plugin.Proc, data []byte) bool {
	sum := sha256.Sum256(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.dmodex.sent[p]; ok && last == sum {
		return false
	}
	s.dmodex.sent[p] = sum
	return true
}

// goDmodexAnswer is libpmix's answer to gopmi_dmodex_request id: the data
// is copied before libpmix frees it.
//
//export goDmodexAnswer
func goDmodexAnswer(id C.uintptr_t, st C.int, data *C.char, n C.size_t) {
	s := server()
	if s == nil {
		return
	}
	s.mu.Lock()
	s.dmodex.version++
	d := dmodexData{version: s.dmodex.version}
	if st == C.PMIX_SUCCESS {
		d.data = C.GoBytes(unsafe.Pointer(data), C.int(n))
	}
	ch := s.dmodex.waits[uintptr(id)]
	delete(s.dmodex.waits, uintptr(id))
	if p, ok := s.dmodex.watches[uintptr(id)]; ok {
		// A client's first commit (watchCommits).
		delete(s.dmodex.watches, uintptr(id))
		// What it committed, or none (an error: nothing for other
		// nodes), which a reader elsewhere is then told at once.
		s.dmodex.handing = appendDmodex(s.dmodex.handing, p.Nspace, uint32(p.Rank), d.version, d.data)
		s.dmodex.handingProcs = append(s.dmodex.handingProcs, p)
		s.dmodex.sent[p] = sha256.Sum256(d.data)
		flush := !s.dmodex.flushing
		s.dmodex.flushing = true
		s.mu.Unlock()
		if flush && !s.spawn(s.handOver) {
			s.log.Debug().Str("proc", p.String()).Msg("pmix: a commit while the server closes is not handed over")
		}
		return
	}
	s.mu.Unlock()
	if ch == nil {
		return // given up on
	}
	if st != C.PMIX_SUCCESS {
		close(ch)
		return
	}
	ch <- d
}

// goDirectModex: a local client wants data of a process another server
// hosts (of another job, after a spawn or a connect). The backend returns
// everything that process's node contributed to its job's fences; the
// process's newest direct-modex frame is libpmix's answer.
//
//export goDirectModex
func goDirectModex(ns *C.char, rank C.uint32_t, timeout C.int, key *C.char, cbfunc C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	p := procOf(ns, rank)
	if p.Rank == plugin.RankWildcard {
		// Job-level data of another job: what its server registered,
		// which no fence carries.
		return C.PMIX_ERR_NOT_FOUND
	}
	req := &plugin.ModexRequest{Requestor: s.requestor(), Proc: p, Timeout: s.opts.FenceTimeout}
	need := ""
	if key != nil {
		need = C.GoString(key)
	}
	if timeout > 0 {
		req.Timeout = time.Duration(timeout) * time.Second
	}
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, req.Timeout+5*time.Second)
		defer cancel()
		data, err := s.directModex(ctx, req, need)
		if err != nil {
			ev := s.log.Warn()
			if errors.Is(err, plugin.ErrNotFound) {
				ev = s.log.Debug()
			}
			ev.Err(err).Str("proc", p.String()).Msg("pmix: direct modex")
			C.gopmi_modex_done(cbfunc, rcOf(err), nil, 0, cbdata)
			return
		}
		C.gopmi_modex_done(cbfunc, C.PMIX_SUCCESS, (*C.char)(C.CBytes(data)), C.size_t(len(data)), cbdata)
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

// publishModex hands the backend the direct-modex data of this node's
// clients among procs, for the other members of a connect: libpmix
// completes a fence whose processes are all its own without calling the
// face, so a job on one node may never have contributed any. It is a
// fence of this node's clients alone, which completes at once and keeps
// its data for DirectModex as every fence's.
func (s *Server) publishModex(ctx context.Context, procs []plugin.Proc, timeout time.Duration) error {
	s.mu.Lock()
	_, local := s.localProcsLocked(procs)
	s.mu.Unlock()
	if len(local) == 0 {
		return nil
	}
	if err := s.handData(ctx, local, s.dmodexFrames(ctx, local, nil, false), timeout); err != nil {
		return fmt.Errorf("hand the clients' data to the backend: %w", err)
	}
	return nil
}

// registerOthers registers with libpmix the jobs among procs that this
// server does not host, as the backend's proc table lays them out: a
// client's read of a process of a job libpmix knows only partly waits
// for the job's registration, and never asks for its data.
func (s *Server) registerOthers(ctx context.Context, procs []plugin.Proc) error {
	for _, ns := range nspaces(procs) {
		s.mu.Lock()
		known := s.jobs[ns] != nil || s.others[ns]
		s.mu.Unlock()
		if known {
			continue
		}
		job, err := s.layoutOf(ctx, ns)
		if err != nil {
			return err
		}
		if _, err := s.registerNspace(job, -1); err != nil {
			return err
		}
		s.mu.Lock()
		if s.others == nil {
			s.others = map[string]bool{}
		}
		s.others[ns] = true
		s.mu.Unlock()
	}
	return nil
}

// layoutOf is job ns's layout from the backend's proc table.
func (s *Server) layoutOf(ctx context.Context, ns string) (plugin.Job, error) {
	resp, err := s.be.Query(ctx, &plugin.QueryRequest{Proc: s.requestor(), Queries: []plugin.Query{{
		Keys: []string{plugin.QueryProcTable}, Qualifiers: []plugin.Info{{Key: plugin.QualNspace, Value: ns}}}}})
	if err != nil {
		return plugin.Job{}, fmt.Errorf("the layout of job %s: %w", ns, err)
	}
	v, ok := plugin.Qualifier(resp.Results, plugin.QueryProcTable)
	if !ok {
		return plugin.Job{}, plugin.Errorf(plugin.ErrNotFound, "the layout of job %s: the backend has no proc table of it", ns)
	}
	rows, err := plugin.DecodeProcTable(v)
	if err != nil {
		return plugin.Job{}, fmt.Errorf("the layout of job %s: %w", ns, err)
	}
	job := plugin.Job{Nspace: ns, Size: int32(len(rows))}
	nodes := map[string]int{}
	for _, r := range rows {
		i, ok := nodes[r.Node]
		if !ok {
			i = len(job.Nodes)
			nodes[r.Node] = i
			job.Nodes = append(job.Nodes, plugin.Node{ID: int32(i), Name: r.Node})
		}
		job.Nodes[i].Ranks = append(job.Nodes[i].Ranks, r.Rank)
	}
	job.UniverseSize = job.Size
	return job, job.Validate()
}

// nspaces lists the jobs of procs, once each.
func nspaces(procs []plugin.Proc) []string {
	var out []string
	for _, p := range procs {
		if !slices.Contains(out, p.Nspace) {
			out = append(out, p.Nspace)
		}
	}
	return out
}

// dmodexPoll is how soon directModex asks again for data its owner's
// server has not handed over yet, doubling up to dmodexPollMax.
const (
	dmodexPoll    = 10 * time.Millisecond
	dmodexPollMax = 500 * time.Millisecond
)

// keyWait is how long directModex waits, once it has data of the
// process, for the key libpmix needs (PMIX_REQUIRED_KEY) to appear in
// it: the process's server hands over its later commits (lateCommits).
// A key the process never puts (a transport it lacks) costs this much.
const keyWait = time.Second

// directModex reads req.Proc's data from the frames its node gave the
// backend. Its server hands them over when one of its clients connects
// (publishModex), which may come after this server's own client asked:
// until then, and within req.Timeout, it asks again. Data without the
// key libpmix needs (PMIX_REQUIRED_KEY, key) is a commit of the process's before the
// one that puts the key: libpmix would keep it and answer the key not
// found, so it waits up to keyWait for newer data with the key.
func (s *Server) directModex(ctx context.Context, req *plugin.ModexRequest, key string) ([]byte, error) {
	deadline := time.Now().Add(req.Timeout)
	var keyDeadline time.Time
	p := req.Proc
	for wait := dmodexPoll; ; wait = min(2*wait, dmodexPollMax) {
		resp, err := s.be.DirectModex(ctx, req)
		if err != nil {
			return nil, err
		}
		frames, err := parseFrames(resp.Data)
		if err != nil {
			return nil, err
		}
		if data := dmodexOf(frames, p.Nspace, uint32(p.Rank)); data != nil {
			if key == "" || holdsKey(data, key) {
				return data, nil
			}
			if keyDeadline.IsZero() {
				keyDeadline = time.Now().Add(keyWait)
			}
			if !time.Now().Add(wait).Before(keyDeadline) {
				return data, nil // libpmix says what it lacks
			}
			wait = min(wait, time.Until(keyDeadline))
		} else if time.Now().Add(wait).After(deadline) {
			return nil, plugin.Errorf(plugin.ErrNotFound, "direct modex of %s: its server handed over no data of it in %s", p, plugin.RoundDuration(req.Timeout))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrAborted, "direct modex of %s: %v", p, ctx.Err())
		}
	}
}

// holdsKey reports whether data, libpmix's packed key-values of one
// process, holds key: a packed key is its bytes and a NUL.
func holdsKey(data []byte, key string) bool {
	return bytes.Contains(data, append([]byte(key), 0))
}

// requestor names this server in requests that are no client's: the
// first local rank of its first job.
func (s *Server) requestor() plugin.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ns, j := range s.jobs {
		if len(j.ranks) > 0 {
			return plugin.Proc{Nspace: ns, Rank: j.ranks[0]}
		}
	}
	return plugin.Proc{Rank: plugin.RankWildcard}
}
