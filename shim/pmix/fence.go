//go:build pmix

package pmix

// Fences: libpmix hands the server a node's part once every local client
// arrived; the backend gathers the job's, and the answer goes back in
// frames.

/*
#include <stdlib.h>
#include "face.h"
*/
import "C"

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
	"unsafe"

	"github.com/gopmi/gopmi/plugin"
)

// fence makes the backend's request of a fence of procs: its ID, as every
// node's server names it (the set of processes, sorted and hashed, and how
// many fences of that set came before), and this node's part of it.
func (s *Server) fence(procs []plugin.Proc) *plugin.FenceRequest {
	procs, text := plugin.ProcSet(procs)
	sum := sha256.Sum256([]byte(text))
	set := hex.EncodeToString(sum[:6])
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.fences[set]
	s.fences[set] = n + 1
	req := &plugin.FenceRequest{ID: "pmix:" + set + "/" + strconv.Itoa(n), Procs: procs}
	req.Node, req.LocalProcs = s.localProcsLocked(procs)
	return req
}

// localProcsLocked is the expansion of procs to this server's clients,
// and their node's name. Called with mu held.
func (s *Server) localProcsLocked(procs []plugin.Proc) (node string, local []plugin.Proc) {
	for _, p := range procs {
		j := s.jobs[p.Nspace]
		if j == nil {
			continue
		}
		node = j.node
		for _, r := range j.ranks {
			if p.Rank == plugin.RankWildcard || p.Rank == r {
				local = append(local, plugin.Proc{Nspace: p.Nspace, Rank: r})
			}
		}
	}
	return node, local
}

//export goFence
func goFence(procs *C.pmix_proc_t, nprocs C.size_t, collect C.int, timeout C.int, local C.int, data *C.char, ndata C.size_t, cbfunc C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.int {
	s := server()
	if s == nil {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	req := s.fence(procsOf(procs, nprocs))
	if local != C.PMIX_SUCCESS {
		return local
	}
	req.Collect, req.Timeout = collect != 0, s.opts.FenceTimeout
	if timeout > 0 {
		req.Timeout = time.Duration(timeout) * time.Second
	}
	var part []byte
	if collect != 0 {
		// The node's part: libpmix's blob, framed (frames.go), copied
		// once (libpmix keeps its buffer).
		var blob []byte
		if ndata > 0 {
			blob = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(ndata))
		}
		part = appendFrame(make([]byte, 0, frameSize("", len(blob))), frameFence, "", 0, blob)
	}
	s.markFenced(req)
	ok := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, req.Timeout+5*time.Second)
		defer cancel()
		if req.Collect {
			req.Data = part
		} else {
			// A fence that collects nothing (PMIx_Fence without
			// PMIX_COLLECT_DATA) leaves each process's data where it
			// is: a client on another node gets it by direct modex,
			// which the backend answers from the fences' parts. So
			// the node's part is the newest data of its clients that
			// committed any (libpmix answers for them at once), where
			// it changed since it was last handed over.
			s.mu.Lock()
			committed := s.committedLocked(req.LocalProcs)
			s.mu.Unlock()
			req.Data = s.dmodexFrames(ctx, committed, nil, true)
		}
		resp, err := s.be.Fence(ctx, req)
		var frames []frame
		if err == nil && req.Collect {
			frames, err = parseFrames(resp.Data)
		}
		if err != nil {
			s.log.Warn().Err(err).Str("fence", req.ID).Msg("pmix: fence")
			C.gopmi_modex_done(cbfunc, rcOf(err), nil, 0, cbdata)
			if timeout <= 0 && errors.Is(err, plugin.ErrTimeout) {
				// The run's time-out, not one the clients chose
				// (PMIX_TIMEOUT, theirs to handle): the job ends.
				s.fail(err)
			}
			return
		}
		// libpmix gets the fence blobs, concatenated, in memory of its
		// own (it frees it), copied there once.
		cout, n := fenceBlobsC(frames)
		C.gopmi_modex_done(cbfunc, C.PMIX_SUCCESS, cout, C.size_t(n), cbdata)
	})
	if !ok {
		return C.PMIX_ERR_NOT_AVAILABLE
	}
	return C.PMIX_SUCCESS
}

// fail ends the job for err, once (failed).
func (s *Server) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
		close(s.failed)
	}
}

// fenceBlobsC is fenceBlobs in C memory, which libpmix frees: nil when
// there is none.
func fenceBlobsC(frames []frame) (*C.char, int) {
	var buf unsafe.Pointer
	out := fenceBlobs(frames, func(n int) []byte {
		buf = C.malloc(C.size_t(n))
		return unsafe.Slice((*byte)(buf), n)
	})
	return (*C.char)(buf), len(out)
}
