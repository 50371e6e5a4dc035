//go:build pmix

package pmix

// libpmix's callbacks (face.c's server module calls these): each copies
// its arguments into Go values, asks the engine, and answers libpmix
// through the callback libpmix gave, from the function the engine calls
// back on a goroutine of its crew's, never on libpmix's own thread. What
// to do is the engine's (package engine); who may ask is the guard's.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/bridge/policy"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/pmix/engine"
)

// seconds is a time-out libpmix gave in seconds (0 or less: none).
func seconds(n C.int) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// opDone answers libpmix's op callback.
func opDone(cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) func(error) {
	return func(err error) { C.gopmi_op_done(cbfunc, rcOf(err), cbdata) }
}

// accepted is what a callback returns once the engine took the call.
func accepted(err error) C.int {
	if err != nil {
		return rcOf(err)
	}
	return C.PMIX_SUCCESS
}

//export goClientConnected
func goClientConnected(ns *C.char, rank C.uint32_t) {
	if s := server(); s != nil {
		s.eng.ClientConnected(procOf(ns, rank))
	}
}

// goClientFinalized: the client waits in PMIx_Finalize until the backend
// heard of its finalize; it succeeds whatever the backend said (it is
// done with PMIx either way).
//
//export goClientFinalized
func goClientFinalized(ns *C.char, rank C.uint32_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_OPERATION_SUCCEEDED
	}
	later := s.eng.ClientFinalized(procOf(ns, rank), func() { C.gopmi_op_done(cbfunc, C.PMIX_SUCCESS, cbdata) })
	if !later || cbfunc == nil {
		return C.PMIX_OPERATION_SUCCEEDED
	}
	return C.PMIX_SUCCESS
}

// goClientLost: a client's connection closed before PMIx_Finalize.
//
//export goClientLost
func goClientLost(ns *C.char, rank C.uint32_t, st C.int) {
	s := server()
	if s == nil {
		return
	}
	why := C.GoString(C.gopmi_error_string(st))
	if uid, ok := s.guard.cutLately(); ok {
		why += fmt.Sprintf("; perhaps it was another user's connection, claiming this rank, that the server refused and cut (uid %d)", uid)
	}
	s.eng.ClientLost(procOf(ns, rank), why)
}

//export goAbort
func goAbort(ns *C.char, rank C.uint32_t, st C.int, msg *C.char, procs *C.pmix_proc_t, nprocs C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	if err := s.guard.check("abort"); err != nil {
		return rcOf(err)
	}
	req := &plugin.AbortRequest{Proc: procOf(ns, rank), Status: int32(st), Message: C.GoString(msg)}
	if nprocs > 0 {
		req.Targets = procsOf(procs, nprocs)
	}
	return accepted(s.eng.Op("abort", req.Proc, func(ctx context.Context, be plugin.Full) error { return be.Abort(ctx, req) }, opDone(cbfunc, cbdata)))
}

//export goFence
func goFence(procs *C.pmix_proc_t, nprocs C.size_t, collect C.int, timeout C.int, local C.int, data *C.char, ndata C.size_t, cbfunc C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	f := engine.FenceCall{Procs: procsOf(procs, nprocs), Collect: collect != 0, Timeout: seconds(timeout), Skip: local != C.PMIX_SUCCESS}
	if ndata > 0 {
		f.Blob = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(ndata)) // the engine copies it
	}
	err := s.eng.Fence(f, func(frames []engine.Frame, err error) {
		if err != nil {
			C.gopmi_modex_done(cbfunc, rcOf(err), nil, 0, cbdata)
			return
		}
		// libpmix gets the fence blobs, concatenated, in memory of its
		// own (it frees it), copied there once.
		var buf unsafe.Pointer
		out := engine.FenceBlobs(frames, func(n int) []byte {
			buf = C.malloc(C.size_t(n))
			return unsafe.Slice((*byte)(buf), n)
		})
		C.gopmi_modex_done(cbfunc, C.PMIX_SUCCESS, (*C.char)(buf), C.size_t(len(out)), cbdata)
	})
	if f.Skip {
		return local // the fence fails here, and cbfunc is not ours to call
	}
	return accepted(err)
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
	var d []byte
	if st == C.PMIX_SUCCESS {
		d = C.GoBytes(unsafe.Pointer(data), C.int(n))
	}
	s.eng.DataAnswer(uint64(id), d, st == C.PMIX_SUCCESS)
}

// goDirectModex: a local client wants data of a process another server
// hosts (of another job, after a spawn or a connect).
//
//export goDirectModex
func goDirectModex(ns *C.char, rank C.uint32_t, timeout C.int, key *C.char, cbfunc C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	need := ""
	if key != nil {
		need = C.GoString(key)
	}
	return accepted(s.eng.DirectModex(procOf(ns, rank), seconds(timeout), need, func(data []byte, err error) {
		if err != nil {
			C.gopmi_modex_done(cbfunc, rcOf(err), nil, 0, cbdata)
			return
		}
		C.gopmi_modex_done(cbfunc, C.PMIX_SUCCESS, (*C.char)(C.CBytes(data)), C.size_t(len(data)), cbdata)
	}))
}

// goConnect is PMIx_Connect (connect 1) and PMIx_Disconnect (0) of procs.
//
//export goConnect
func goConnect(procs *C.pmix_proc_t, nprocs C.size_t, timeout C.int, connect C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return accepted(s.eng.Connect(procsOf(procs, nprocs), seconds(timeout), connect != 0, opDone(cbfunc, cbdata)))
}

// goSpawn starts a job (PMIx_Spawn, MPI_Comm_spawn) through the backend.
// The apps are libpmix's; their info and the job's come flattened (idx:
// the app, -1 the job). Open MPI passes the environment its children
// need in each app's env (OMPI_PARENT_PORT, its MCA settings): it goes to
// the app's tasks; a working directory (pmix.wdir) is the app's Cwd.
//
//export goSpawn
func goSpawn(ns *C.char, rank C.uint32_t, apps *C.pmix_app_t, napps C.size_t, keys, vals **C.char, idx *C.int, n C.size_t,
	cbfunc C.pmix_spawn_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	if err := s.guard.check("spawn"); err != nil {
		return rcOf(err)
	}
	req := &plugin.SpawnRequest{Requestor: procOf(ns, rank)}
	cmds := make([]policy.Command, 0, int(napps))
	for _, a := range unsafe.Slice(apps, int(napps)) {
		c := policy.Command{Cmd: C.GoString(a.cmd), MaxProcs: int(a.maxprocs), Cwd: C.GoString(a.cwd), Env: goStrings(a.env)}
		// argv[0] is the command.
		if argv := goStrings(a.argv); len(argv) > 1 {
			c.Args = argv[1:]
		}
		cmds = append(cmds, c)
	}
	ks, vs, is := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n)), unsafe.Slice(idx, int(n))
	for i := range ks {
		in := plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])}
		switch {
		case is[i] >= 0 && int(is[i]) < len(cmds):
			cmds[is[i]].Info = append(cmds[is[i]].Info, in)
		case !policy.Hint(in.Key):
			req.JobInfo = append(req.JobInfo, in)
		}
	}
	for _, c := range cmds {
		req.Apps = append(req.Apps, policy.SpawnApp(c))
	}
	if err := policy.CheckSpawn(req.Apps); err != nil {
		s.log.Warn().Err(err).Str("proc", req.Requestor.String()).Msg("pmix: spawn")
		return C.PMIX_ERR_BAD_PARAM
	}
	return accepted(s.eng.Spawn(req, func(nspace string, err error) {
		if err != nil {
			C.gopmi_spawn_done(cbfunc, rcOf(err), nil, cbdata)
			return
		}
		cns := C.CString(nspace)
		defer C.free(unsafe.Pointer(cns))
		C.gopmi_spawn_done(cbfunc, C.PMIX_SUCCESS, cns, cbdata)
	}))
}

// goNotifyEvent passes a client's event on to other nodes; it answers
// libpmix at once.
//
//export goNotifyEvent
func goNotifyEvent(code C.int, ns *C.char, rank C.uint32_t, rng C.int, keys, vals **C.char, n C.size_t) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	if err := s.guard.check("event"); err != nil {
		return rcOf(err)
	}
	r, err := rangeOf(rng)
	if err != nil {
		// A range the contract does not carry (one process, a custom
		// list, the RM itself): libpmix gave it to this node's clients,
		// which is all that is done with it.
		s.log.Debug().Err(err).Int("status", int(code)).Msg("pmix: an event not passed on to other nodes")
		return C.PMIX_OPERATION_SUCCEEDED
	}
	req := &plugin.EventRequest{Code: plugin.EventCode(plugin.EventClientPrefix + strconv.Itoa(int(code))), Source: procOf(ns, rank), Range: r,
		Info: infos(keys, vals, n)}
	if err := s.eng.NotifyEvent(req); err != nil {
		return rcOf(err)
	}
	return C.PMIX_OPERATION_SUCCEEDED
}

// infos copies n keys and values.
func infos(keys, vals **C.char, n C.size_t) []plugin.Info {
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n))
	out := make([]plugin.Info, 0, len(ks))
	for i := range ks {
		out = append(out, plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])})
	}
	return out
}

//export goPublish
func goPublish(ns *C.char, rank C.uint32_t, keys, vals **C.char, n C.size_t, rng, persist C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.PublishRequest{Proc: procOf(ns, rank)}
	err := s.guard.check("publish")
	if err == nil {
		req.Data = infos(keys, vals, n)
		if req.Range, err = rangeOf(rng); err == nil {
			req.Persistence, err = persistenceOf(persist)
		}
		if err != nil {
			s.log.Warn().Err(err).Str("proc", req.Proc.String()).Msg("pmix: publish")
		}
	}
	if err != nil {
		return rcOf(err)
	}
	return accepted(s.eng.Op("publish", req.Proc, func(ctx context.Context, be plugin.Full) error { return be.Publish(ctx, req) }, opDone(cbfunc, cbdata)))
}

//export goUnpublish
func goUnpublish(ns *C.char, rank C.uint32_t, keys **C.char, rng C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.UnpublishRequest{Proc: procOf(ns, rank), Keys: goStrings(keys)}
	err := s.guard.check("unpublish")
	if err == nil {
		req.Range, err = rangeOf(rng)
	}
	if err != nil {
		return rcOf(err)
	}
	return accepted(s.eng.Op("unpublish", req.Proc, func(ctx context.Context, be plugin.Full) error { return be.Unpublish(ctx, req) }, opDone(cbfunc, cbdata)))
}

// goLookup: PMIX_WAIT (how many values, 0: all; a bool true reads 0)
// makes the lookup wait for every key; absent or false (-1), it does not.
//
//export goLookup
func goLookup(ns *C.char, rank C.uint32_t, keys **C.char, rng, wait, timeout C.int, cbfunc C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.LookupRequest{Proc: procOf(ns, rank), Keys: goStrings(keys), Wait: wait >= 0, Timeout: seconds(timeout)}
	err := s.guard.check("lookup")
	if err == nil {
		req.Range, err = rangeOf(rng)
	}
	if err != nil {
		return rcOf(err)
	}
	return accepted(s.eng.Lookup(req, func(resp *plugin.LookupResponse, err error) {
		if err != nil {
			C.gopmi_lookup_done(cbfunc, rcOf(err), 0, nil, nil, nil, nil, cbdata)
			return
		}
		n := len(resp.Data)
		nss, ks, vs := cArray(n), cArray(n), cArray(n)
		defer nss.free()
		defer ks.free()
		defer vs.free()
		ranks := (*C.uint32_t)(C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(C.uint32_t(0)))))
		defer C.free(unsafe.Pointer(ranks))
		rs := unsafe.Slice(ranks, max(n, 1))
		for i, d := range resp.Data {
			nss.set(i, d.Publisher.Nspace)
			ks.set(i, d.Key)
			vs.set(i, d.Value)
			r := uint32(d.Publisher.Rank)
			if d.Publisher.Rank == plugin.RankWildcard {
				r = uint32(C.PMIX_RANK_WILDCARD)
			}
			rs[i] = C.uint32_t(r)
		}
		C.gopmi_lookup_done(cbfunc, C.PMIX_SUCCESS, C.size_t(n), nss.p, ranks, ks.p, vs.p, cbdata)
	}))
}

// toolRanks numbers the tools that connected to this process's server.
var toolRanks atomic.Uint32

// goToolConnect numbers a tool that connects. It refuses none: libpmix,
// refused a tool or failing to answer it, closes its socket twice and
// may stop listening. Another user's tool is refused its calls (guard).
//
//export goToolConnect
func goToolConnect() C.uint32_t {
	n := toolRanks.Add(1) - 1
	if s := server(); s != nil {
		s.log.Debug().Uint32("rank", n).Msg("pmix: a tool connected")
	}
	return C.uint32_t(n)
}

//export goQuery
func goQuery(keys **C.char, kq *C.int, nk C.size_t, qk, qv **C.char, qq *C.int, nq C.size_t, cbfunc C.pmix_info_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	if err := s.guard.check("query"); err != nil {
		return rcOf(err)
	}
	req := &plugin.QueryRequest{}
	at := func(i int) *plugin.Query {
		for len(req.Queries) <= i {
			req.Queries = append(req.Queries, plugin.Query{})
		}
		return &req.Queries[i]
	}
	ks, kqs := unsafe.Slice(keys, int(nk)), unsafe.Slice(kq, int(nk))
	for i := range ks {
		q := at(int(kqs[i]))
		q.Keys = append(q.Keys, C.GoString(ks[i]))
	}
	qks, qvs, qqs := unsafe.Slice(qk, int(nq)), unsafe.Slice(qv, int(nq)), unsafe.Slice(qq, int(nq))
	for i := range qks {
		q := at(int(qqs[i]))
		q.Qualifiers = append(q.Qualifiers, plugin.Info{Key: C.GoString(qks[i]), Value: C.GoString(qvs[i])})
	}
	return accepted(s.eng.Query(req, func(resp *plugin.QueryResponse, err error) {
		if err != nil {
			C.gopmi_query_done(cbfunc, rcOf(err), 0, nil, nil, cbdata)
			return
		}
		n := len(resp.Results)
		ak, av := cArray(n), cArray(n)
		defer ak.free()
		defer av.free()
		for i, r := range resp.Results {
			ak.set(i, r.Key)
			av.set(i, r.Value)
		}
		C.gopmi_query_done(cbfunc, C.PMIX_SUCCESS, C.size_t(n), ak.p, av.p, cbdata)
	}))
}

// goLog answers off libpmix's upcall, as every answer, a refusal too:
// one inside it wedged libpmix's server (no client connected after it,
// no fence ended).
//
//export goLog
func goLog(ns *C.char, rank C.uint32_t, keys, vals **C.char, n C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) {
	done := opDone(cbfunc, cbdata)
	s := server()
	if s == nil {
		later(nil, func() { done(engine.ErrClosed) })
		return
	}
	if err := s.guard.check("log"); err != nil {
		later(s, func() { done(err) })
		return
	}
	req := &plugin.LogRequest{Proc: procOf(ns, rank), Data: infos(keys, vals, n)}
	if err := s.eng.Op("log", req.Proc, func(ctx context.Context, be plugin.Full) error { return be.Log(ctx, req) }, done); err != nil {
		later(nil, func() { done(err) })
	}
}

// later runs an answer off libpmix's thread: on s's crew, or on a
// goroutine of its own once the server has closed.
func later(s *Server, answer func()) {
	if s != nil && s.crew.Spawn(func(context.Context) { answer() }) {
		return
	}
	go answer()
}

//export goRefuse
func goRefuse(ns *C.char, rank C.uint32_t, key *C.char, typ C.uint16_t) C.int {
	if s := server(); s != nil {
		s.log.Warn().Str("proc", procOf(ns, rank).String()).Str("key", C.GoString(key)).Int("type", int(typ)).
			Msg("pmix: publish of a value libpmix cannot pack refused")
	}
	return C.PMIX_ERR_NOT_SUPPORTED
}

// goVetPeer judges a connection libpmix's listener accepted, before
// libpmix reads a byte of it (rendezvous.c's accept): 1 to serve it.
//
//export goVetPeer
func goVetPeer(fd C.int) C.int {
	var g *guard
	if s := server(); s != nil {
		g = s.guard
	}
	if vet(int(fd), g) {
		return 1
	}
	return 0
}
