package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// The backend gate. A job's backend may still be starting (a shim serves
// its tasks meanwhile) or not be asked for yet (a job on one node starts
// it only when a request needs it). Work that needs it waits here, as a
// callback on the Backend, never as a goroutine blocked on it: once the
// host says Up or Fail, or the work's own deadline passes, the work runs
// on the job's calls.

// needBackend asks for the backend. The first call also arranges that
// what a one-node job committed meanwhile is published once it is up.
func (j *Job) needBackend() {
	j.needOnce.Do(func() {
		j.be.whenKnown(func() {
			j.calls.run(j.cfg.Timeouts.Backend, false, func(context.Context) {
				j.mu.Lock()
				defer j.mu.Unlock()
				j.flushStoreLocked()
			})
		})
		j.be.Need()
	})
}

// withBackend asks for the backend and, once its bring-up ended, runs f
// on a call with deadline d; err says why the backend is not available
// (nil when it is up). A backend still not known after d gives f a
// time-out, and so does the job's end unless outlive: f's context then
// outlives the job, as an abort's report to the RM must. The work counts
// for Shutdown from now on. It may be called with j.mu held.
func (j *Job) withBackend(d time.Duration, outlive bool, f func(ctx context.Context, err error)) {
	j.needBackend()
	done, ok := j.calls.track()
	if !ok {
		return // shut down: the job ended and answered every request
	}
	// One deadline for the wait and the call: a request never waits
	// longer than its time-out in all.
	deadline := time.Now().Add(d)
	w := &gateWait{}
	start := func(err error) {
		if !w.claim() {
			return
		}
		if err == nil && !outlive && j.calls.ctx.Err() != nil {
			err = fmt.Errorf("waiting for %s to start: the job ended", j.be.Name())
		}
		j.calls.spawnUntil(done, deadline, outlive, func(ctx context.Context) { f(ctx, err) })
	}
	if j.be.Known() {
		start(j.be.Err())
		return
	}
	w.also(j.calls.clock.AfterFunc(d, func() {
		start(fmt.Errorf("waiting for %s to start: no answer within %s: %w", j.be.Name(), d, plugin.ErrTimeout))
	}))
	if !outlive {
		// The job's end claims it, on the ending goroutine (calls.end).
		w.also(j.calls.atEnd(func() {
			start(fmt.Errorf("waiting for %s to start: the job ended", j.be.Name()))
		}))
	}
	w.also(j.be.whenKnown(func() { start(j.be.Err()) }))
}

// gateWait is one piece of work at the gate: whichever of its triggers
// (the backend known, the deadline, the job's end) comes first claims it
// and stops the others.
type gateWait struct {
	mu      sync.Mutex
	claimed bool
	stops   []func() bool
}

// also adds a trigger's stop; once claimed, it stops it at once.
func (w *gateWait) also(stop func() bool) {
	w.mu.Lock()
	if w.claimed {
		w.mu.Unlock()
		stop()
		return
	}
	w.stops = append(w.stops, stop)
	w.mu.Unlock()
}

// claim reports whether the caller's trigger came first.
func (w *gateWait) claim() bool {
	w.mu.Lock()
	if w.claimed {
		w.mu.Unlock()
		return false
	}
	w.claimed = true
	stops := w.stops
	w.stops = nil
	w.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	return true
}

// async parks r, runs call against the backend with the deadline of kind
// d once the backend is up, and unparks r afterwards; call answers r.
// When the backend is not available, or lacks capName (unless empty),
// down answers r instead: nil answers with an error naming the cause.
func (s *Session) async(r *request, capName, what string, d timeoutKind, down func(err error), call func(ctx context.Context)) {
	j := s.j
	j.mu.Lock()
	if j.ended {
		err := j.endedErrLocked(r.cmd)
		j.mu.Unlock()
		r.fail(wire.RcFail, err)
		return
	}
	r.park()
	j.mu.Unlock()
	if down == nil {
		down = func(err error) { r.failKV(wire.RcFail, fmt.Errorf("%s: %w", r.cmd, err), failKV(r)...) }
	}
	j.withBackend(j.timeout(d)+grace, false, func(ctx context.Context, err error) {
		defer func() {
			j.mu.Lock()
			r.unpark()
			j.mu.Unlock()
		}()
		switch {
		case err != nil:
			down(err)
		case capName != "" && !j.be.Has(capName):
			r.fail(wire.RcFail, fmt.Errorf("%s: %s does not provide %s (capability %q)", r.cmd, j.be.Name(), what, capName))
		default:
			call(ctx)
		}
	})
}

type timeoutKind int

const (
	toBackend timeoutKind = iota
	toLookup
	toSpawn
	toGet
)

func (j *Job) timeout(k timeoutKind) time.Duration {
	switch k {
	case toLookup:
		return j.cfg.Timeouts.Lookup
	case toSpawn:
		return j.cfg.Timeouts.Spawn
	case toGet:
		return j.cfg.Timeouts.Get
	}
	return j.cfg.Timeouts.Backend
}
