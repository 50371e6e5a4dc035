//go:build pmix

package pmix

// The name service: publish, unpublish and lookup, with PMIx's ranges and
// persistences mapped to the contract's.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
)

// rangeOf maps a PMIx data range (-1: none given) onto the contract's.
func rangeOf(r C.int) (plugin.Range, error) {
	switch r {
	case -1, C.PMIX_RANGE_UNDEF:
		return plugin.RangeDefault, nil
	case C.PMIX_RANGE_LOCAL:
		return plugin.RangeLocal, nil
	case C.PMIX_RANGE_NAMESPACE:
		return plugin.RangeNamespace, nil
	case C.PMIX_RANGE_SESSION:
		return plugin.RangeSession, nil
	case C.PMIX_RANGE_GLOBAL:
		return plugin.RangeGlobal, nil
	}
	return 0, plugin.Errorf(plugin.ErrNotSupported, "PMIx data range %d is not supported (local, namespace, session and global are)", int(r))
}

// persistenceOf maps a PMIx persistence (-1: none given) onto the
// contract's.
func persistenceOf(p C.int) (plugin.Persistence, error) {
	switch p {
	case -1:
		return plugin.PersistDefault, nil
	case C.PMIX_PERSIST_INDEF:
		return plugin.PersistIndefinite, nil
	case C.PMIX_PERSIST_FIRST_READ:
		return plugin.PersistFirstRead, nil
	case C.PMIX_PERSIST_PROC:
		return plugin.PersistProc, nil
	case C.PMIX_PERSIST_APP:
		return plugin.PersistApp, nil
	case C.PMIX_PERSIST_SESSION:
		return plugin.PersistSession, nil
	}
	return 0, plugin.Errorf(plugin.ErrNotSupported, "PMIx persistence %d is not supported", int(p))
}

//export goPublish
func goPublish(ns *C.char, rank C.uint32_t, keys, vals **C.char, n C.size_t, rng, persist C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.PublishRequest{Proc: procOf(ns, rank)}
	if err := s.guard("publish"); err != nil {
		return rcOf(err)
	}
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n))
	for i := range ks {
		req.Data = append(req.Data, plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])})
	}
	var err error
	if req.Range, err = rangeOf(rng); err == nil {
		req.Persistence, err = persistenceOf(persist)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("proc", req.Proc.String()).Msg("pmix: publish")
		return rcOf(err)
	}
	return s.opCall("publish", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Publish(ctx, req) })
}

//export goUnpublish
func goUnpublish(ns *C.char, rank C.uint32_t, keys **C.char, rng C.int, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.UnpublishRequest{Proc: procOf(ns, rank), Keys: goStrings(keys)}
	err := s.guard("unpublish")
	if err == nil {
		req.Range, err = rangeOf(rng)
	}
	if err != nil {
		return rcOf(err)
	}
	return s.opCall("unpublish", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Unpublish(ctx, req) })
}

//export goLookup
func goLookup(ns *C.char, rank C.uint32_t, keys **C.char, rng, wait, timeout C.int, cbfunc C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	// PMIX_WAIT (how many values, 0: all; a bool true reads 0) makes the
	// lookup wait for every key; absent or false (-1), it does not.
	req := &plugin.LookupRequest{Proc: procOf(ns, rank), Keys: goStrings(keys), Wait: wait >= 0}
	if timeout > 0 {
		req.Timeout = time.Duration(timeout) * time.Second
	}
	err := s.guard("lookup")
	if err == nil {
		req.Range, err = rangeOf(rng)
	}
	if err != nil {
		return rcOf(err)
	}
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, req.TimeoutOrDefault()+5*time.Second)
		defer cancel()
		resp, err := s.be.Lookup(ctx, req)
		if err != nil {
			s.log.Debug().Err(err).Str("proc", req.Proc.String()).Msg("pmix: lookup")
			C.gopmi_lookup_done(cbfunc, rcOf(err), 0, nil, nil, nil, nil, cbdata)
			return
		}
		n := len(resp.Data)
		nss := cArray(n)
		ks, vs := cArray(n), cArray(n)
		ranks := (*C.uint32_t)(C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(C.uint32_t(0)))))
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
		nss.free()
		ks.free()
		vs.free()
		C.free(unsafe.Pointer(ranks))
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

// cStrs is a C array of C strings the Go side made and frees.
type cStrs struct {
	p **C.char
	n int
}

func cArray(n int) cStrs {
	return cStrs{p: (**C.char)(C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof((*C.char)(nil))))), n: n}
}

func (a cStrs) set(i int, v string) { unsafe.Slice(a.p, a.n)[i] = C.CString(v) }

func (a cStrs) free() {
	for _, p := range unsafe.Slice(a.p, a.n) {
		C.free(unsafe.Pointer(p))
	}
	C.free(unsafe.Pointer(a.p))
}
