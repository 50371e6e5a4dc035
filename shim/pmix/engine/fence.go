package engine

// Fences: libpmix hands the server a node's part once every local client
// arrived; the backend gathers the job's, and the answer goes back in
// frames.

import (
	"context"
	"errors"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// FenceCall is a fence libpmix hands the server.
type FenceCall struct {
	Procs   []plugin.Proc
	Collect bool
	// Timeout is the clients' (PMIX_TIMEOUT); 0: they gave none, and the
	// run's bounds it.
	Timeout time.Duration
	// Blob is the node's part (libpmix's), which Fence copies.
	Blob []byte
	// Skip: the node's part failed in libpmix. The fence is only
	// counted, so that every node names the next one alike.
	Skip bool
}

// callGrace is how much longer than its own time-out a call's context
// lasts: the backend answers the time-out itself, naming who is missing.
const callGrace = 5 * time.Second

// Fence runs f: done gets the frames of every node's part, or the error,
// once. A fence that timed out at the run's time-out (not one the clients
// chose) fails the job (Failed).
func (e *Engine) Fence(f FenceCall, done func([]Frame, error)) error {
	req := e.jobs.fence(f.Procs)
	if f.Skip {
		return nil
	}
	req.Collect, req.Timeout = f.Collect, plugin.TimeoutOr(f.Timeout, e.fenceTimeout)
	var part []byte
	if f.Collect {
		// The node's part: libpmix's blob, framed (frames.go), copied
		// once (libpmix keeps its buffer).
		part = appendFrame(make([]byte, 0, frameSize("", len(f.Blob))), frameFence, "", 0, f.Blob)
	}
	e.commits.markFenced(req)
	runTimeout := f.Timeout <= 0 // f's blob is libpmix's: not kept past this call
	return e.run(req.Timeout+callGrace, func(ctx context.Context) {
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
			req.Data = e.commits.frames(ctx, e.commits.committed(req.LocalProcs), true)
		}
		resp, err := e.be.Fence(ctx, req)
		var frames []Frame
		if err == nil && req.Collect {
			frames, err = parseFrames(resp.Data)
		}
		if err != nil {
			e.log.Warn().Err(err).Str("fence", req.ID).Msg("pmix: fence")
			// The clients hear first: the job's end, which comes
			// next, stops the server once libpmix sent what it
			// queued.
			done(nil, err)
			if runTimeout && errors.Is(err, plugin.ErrTimeout) {
				// The run's time-out, not one the clients chose
				// (PMIX_TIMEOUT, theirs to handle): the job ends.
				e.failure.fail(err)
			}
			return
		}
		done(frames, nil)
	})
}
