//go:build pmix

package pmix

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
)

// eventWait is how long one AwaitEvents call waits for an event before
// the watcher asks again.
const eventWait = time.Minute

// goNotifyEvent copies a client's event for other nodes and tells the
// backend from a goroutine of the server's; it answers libpmix at once.
//
//export goNotifyEvent
func goNotifyEvent(code C.int, ns *C.char, rank C.uint32_t, rng C.int, keys, vals **C.char, n C.size_t) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	if err := s.guard("event"); err != nil {
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
	req := &plugin.EventRequest{Code: plugin.EventCode(plugin.EventClientPrefix + strconv.Itoa(int(code))), Source: procOf(ns, rank), Range: r}
	ks, vs := unsafe.Slice(keys, int(n)), unsafe.Slice(vals, int(n))
	for i := range ks {
		req.Info = append(req.Info, plugin.Info{Key: C.GoString(ks[i]), Value: C.GoString(vs[i])})
	}
	s.mu.Lock()
	req.Node = s.node
	s.mu.Unlock()
	ok := s.spawn(func() {
		ctx, cancel := s.newsContext()
		defer cancel()
		if err := s.be.NotifyEvent(ctx, req); err != nil {
			s.log.Warn().Err(err).Str("code", string(req.Code)).Str("source", req.Source.String()).Msg("pmix: an event for other nodes not passed on")
		}
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_OPERATION_SUCCEEDED
}

// watchEvents gives this server's clients the events raised for job
// nspace's processes elsewhere (AwaitEvents): on other nodes, or by
// another job's server on this node. It ends when the server closes, the
// job is aborted or failed, or the backend does not keep events.
func (s *Server) watchEvents(nspace, node string) {
	s.spawn(func() {
		var after uint64
		failed := 0 // calls failed in a row
		for s.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(s.ctx, eventWait+newsBound)
			resp, err := s.be.AwaitEvents(ctx, &plugin.AwaitEventsRequest{Nspace: nspace, After: after, Timeout: eventWait})
			cancel()
			switch {
			case s.ctx.Err() != nil:
				return
			case errors.Is(err, plugin.ErrNotSupported):
				s.log.Debug().Err(err).Msg("pmix: the backend does not carry clients' events between nodes")
				return
			case errors.Is(err, plugin.ErrAborted):
				return // the job was aborted or failed, or the run ends
			case err != nil:
				// One failure is the usual end of a step (the link up
				// went with its node); more say the events are lost.
				failed++
				ev := s.log.Debug()
				if failed > 2 {
					ev = s.log.Warn()
				}
				ev.Err(err).Str("job", nspace).Msg("pmix: waiting for other nodes' events")
				select {
				case <-s.ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			failed = 0
			if resp.Missed {
				s.log.Warn().Str("job", nspace).Msg("pmix: some events of other nodes were lost: the backend no longer kept them")
			}
			for _, e := range resp.Events {
				after = max(after, e.Seq)
				// This server raised it (libpmix gave it to its clients
				// then) when it comes from this node and this job.
				if e.Node != node || e.Source.Nspace != nspace {
					s.deliver(e)
				}
			}
		}
	})
}

// deliver gives this node's clients one event raised on another node.
func (s *Server) deliver(e plugin.Event) {
	code, err := strconv.Atoi(strings.TrimPrefix(string(e.Code), plugin.EventClientPrefix))
	if err != nil || !strings.HasPrefix(string(e.Code), plugin.EventClientPrefix) {
		return // not a client's event
	}
	rank := uint32(e.Source.Rank)
	if e.Source.Rank == plugin.RankWildcard {
		rank = uint32(C.PMIX_RANK_WILDCARD)
	}
	ks, vs := cArray(len(e.Info)), cArray(len(e.Info))
	defer ks.free()
	defer vs.free()
	for i, in := range e.Info {
		ks.set(i, in.Key)
		vs.set(i, in.Value)
	}
	ns := C.CString(e.Source.Nspace)
	defer C.free(unsafe.Pointer(ns))
	if err := status(C.gopmi_notify(C.int(code), ns, C.uint32_t(rank), C.int(pmixRange(e.Range)), ks.p, vs.p, C.size_t(len(e.Info)))); err != nil {
		s.log.Warn().Err(err).Str("code", string(e.Code)).Str("source", e.Source.String()).Msg("pmix: an event of another node not given to this node's clients")
	}
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
