//go:build pmix

package pmix

// A client's life as libpmix tells it: connected, finalized, lost, or
// aborting its job.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
)

//export goClientConnected
func goClientConnected(ns *C.char, rank C.uint32_t) {
	p := procOf(ns, rank)
	s := server()
	if s == nil {
		return
	}
	reported := make(chan struct{})
	s.mu.Lock()
	s.connects[p] = reported
	s.mu.Unlock()
	s.notify(false, p, func() { close(reported) })
}

//export goClientFinalized
func goClientFinalized(ns *C.char, rank C.uint32_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	p := procOf(ns, rank)
	s := server()
	if s == nil {
		return C.PMIX_OPERATION_SUCCEEDED
	}
	s.mu.Lock()
	connected := s.connects[p]
	delete(s.connects, p)
	s.mu.Unlock()
	// The client waits in PMIx_Finalize until the backend heard of its
	// finalize, after its connect: a task that ended after PMIx_Finalize
	// returned is never taken for one that left without it. Only then is
	// the finalize counted (the last one ends the server's wait).
	finalize := func(done func()) {
		if connected != nil {
			select {
			case <-connected:
			case <-time.After(5 * time.Second):
			}
		}
		if d, ok := s.be.(plugin.FinalizeDrainer); ok {
			// The backend passes other nodes' answers through this
			// process: the client exits only once they left.
			ctx, cancel := s.newsContext()
			d.DrainBeforeFinalize(ctx)
			cancel()
		}
		s.notify(true, p, func() {
			// The node's last client of a job on several nodes hands
			// the node's data over before it may exit (its server
			// ends with it), as the PMI face does (bridge).
			s.departIfLast(p)
			s.finalized(p)
			done()
		})
	}
	ok := s.spawn(func() {
		finalize(func() {
			// The client's finalize succeeds whatever the backend said:
			// it is done with PMIx either way.
			C.gopmi_op_done(cbfunc, C.PMIX_SUCCESS, cbdata)
		})
	})
	if !ok {
		finalize(func() {}) // the server is closing: still heard, bounded
		return C.PMIX_OPERATION_SUCCEEDED
	}
	if cbfunc == nil {
		return C.PMIX_OPERATION_SUCCEEDED
	}
	return C.PMIX_SUCCESS
}

// goClientLost: a client's connection closed before PMIx_Finalize (the
// task died, or exited without it). Under a step daemon that is not the
// shim's parent (slurmstepd) nothing else sees it, and its job would wait
// in its next fence until the time-out: the backend hears of it as a
// failed process, as a PMI task's closed fd is reported.
//
//export goClientLost
func goClientLost(ns *C.char, rank C.uint32_t, st C.int) {
	p := procOf(ns, rank)
	s := server()
	if s == nil {
		return
	}
	s.mu.Lock()
	_, ours := s.jobs[p.Nspace]
	s.mu.Unlock()
	if !ours || p.Rank == plugin.RankWildcard {
		return
	}
	why := C.GoString(C.gopmi_error_string(st))
	s.mu.Lock()
	if time.Since(s.lastCut) < cutRecent {
		why += fmt.Sprintf("; perhaps it was another user's connection, claiming this rank, that the server refused and cut (uid %d)", s.lastCutUID)
	}
	s.mu.Unlock()
	lost := func() {
		ctx, cancel := s.newsContext()
		defer cancel()
		err := s.be.NotifyEvent(ctx, &plugin.EventRequest{Code: plugin.EventProcAborted, Source: p,
			Info: []plugin.Info{{Key: "reason", Value: "ended before PMIx_Finalize (its PMIx connection closed: " + why + ")"}}})
		if err != nil {
			s.log.Warn().Err(err).Str("proc", p.String()).Msg("pmix: report a client that left before PMIx_Finalize")
		}
	}
	if !s.spawn(lost) {
		lost() // the server is closing: still heard, bounded
	}
}

// newsBound bounds a call that tells the backend something it must hear
// (a finalize, a client lost, the end of a failed spawn's job).
const newsBound = 5 * time.Second

// newsContext is such a call's context: it outlives the server's own
// (news comes also while the server closes), within newsBound.
func (s *Server) newsContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(s.ctx), newsBound)
}

//export goAbort
func goAbort(ns *C.char, rank C.uint32_t, st C.int, msg *C.char, procs *C.pmix_proc_t, nprocs C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := &plugin.AbortRequest{Proc: procOf(ns, rank), Status: int32(st), Message: C.GoString(msg)}
	if err := s.guard("abort"); err != nil {
		return rcOf(err)
	}
	if nprocs > 0 {
		req.Targets = procsOf(procs, nprocs)
	}
	return s.opCall("abort", req.Proc, cbfunc, cbdata, func(ctx context.Context) error { return s.be.Abort(ctx, req) })
}
