//go:build pmix

package pmix

// Queries and logs from clients and tools, and the ranks tools are given.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"sync/atomic"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
)

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
	if err := s.guard("query"); err != nil {
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
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, plugin.DefaultLookupTimeout)
		defer cancel()
		resp, err := s.be.Query(ctx, req)
		if err != nil {
			s.log.Debug().Err(err).Msg("pmix: query")
			C.gopmi_query_done(cbfunc, rcOf(err), 0, nil, nil, cbdata)
			return
		}
		n := len(resp.Results)
		ak, av := cArray(n), cArray(n)
		for i, r := range resp.Results {
			ak.set(i, r.Key)
			av.set(i, r.Value)
		}
		C.gopmi_query_done(cbfunc, C.PMIX_SUCCESS, C.size_t(n), ak.p, av.p, cbdata)
		ak.free()
		av.free()
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

//export goLog
func goLog(ns *C.char, rank C.uint32_t, keys, vals **C.char, n C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) {
	s := server()
	if s == nil {
		C.gopmi_op_done(cbfunc, C.PMIX_ERR_NOT_AVAILABLE, cbdata)
		return
	}
	req := &plugin.LogRequest{Proc: procOf(ns, rank)}
	if err := s.guard("log"); err != nil {
		// Answered off libpmix's upcall, as every answer: one inside it
		// wedged libpmix's server (no client connected after it, no
		// fence ended).
		rc := rcOf(err)
		go C.gopmi_op_done(cbfunc, rc, cbdata)
		return
	}
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n))
	for i := range ks {
		req.Data = append(req.Data, plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])})
	}
	if rc := s.opCall("log", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Log(ctx, req) }); rc != C.PMIX_SUCCESS {
		go C.gopmi_op_done(cbfunc, rc, cbdata)
	}
}
