//go:build pmix

package pmix

// Values between libpmix's C and the contract's Go.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/pmix/engine"
)

// goStrings copies a NULL-terminated C array of strings.
func goStrings(env **C.char) []string {
	var out []string
	if env == nil {
		return nil
	}
	for p := env; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		out = append(out, C.GoString(*p))
	}
	return out
}

// procOf reads a libpmix process name.
func procOf(ns *C.char, rank C.uint32_t) plugin.Proc {
	r := int32(rank)
	if uint32(rank) == uint32(C.PMIX_RANK_WILDCARD) {
		r = plugin.RankWildcard
	}
	return plugin.Proc{Nspace: C.GoString(ns), Rank: r}
}

// procsOf reads libpmix's array of process names.
func procsOf(procs *C.pmix_proc_t, n C.size_t) []plugin.Proc {
	out := make([]plugin.Proc, 0, int(n))
	for _, p := range unsafe.Slice(procs, int(n)) {
		out = append(out, procOf(&p.nspace[0], C.uint32_t(p.rank)))
	}
	return out
}

// rcOf is the PMIx status for a backend's error.
func rcOf(err error) C.int {
	switch {
	case err == nil:
		return C.PMIX_SUCCESS
	case errors.Is(err, engine.ErrClosed):
		return C.PMIX_ERR_NOT_AVAILABLE
	case errors.Is(err, plugin.ErrTimeout):
		return C.PMIX_ERR_TIMEOUT
	case errors.Is(err, plugin.ErrNotFound):
		return C.PMIX_ERR_NOT_FOUND
	case errors.Is(err, plugin.ErrNotSupported):
		return C.PMIX_ERR_NOT_SUPPORTED
	case errors.Is(err, plugin.ErrPermission):
		return C.PMIX_ERR_NO_PERMISSIONS
	case errors.Is(err, plugin.ErrInvalidArgument):
		return C.PMIX_ERR_BAD_PARAM
	case errors.Is(err, plugin.ErrAborted):
		return C.PMIX_ERR_PROC_ABORTED
	}
	return C.PMIX_ERROR
}

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

// pmixRange is the PMIx range of the contract's r.
func pmixRange(r plugin.Range) C.int {
	switch r {
	case plugin.RangeLocal:
		return C.PMIX_RANGE_LOCAL
	case plugin.RangeNamespace:
		return C.PMIX_RANGE_NAMESPACE
	case plugin.RangeGlobal:
		return C.PMIX_RANGE_GLOBAL
	}
	return C.PMIX_RANGE_SESSION
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
