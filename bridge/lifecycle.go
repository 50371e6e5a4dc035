package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

// calls is where the job's work off the Session's goroutine runs: each
// backend call on a goroutine of its own with a deadline, and the timers
// of its waits, on the job's crew (plugin/crew). Nothing else in the
// package starts a goroutine or arms a timer, so Shutdown can wait for
// all of it and a test can tell when the job is quiet (tap).
type calls struct {
	ctx    context.Context // ends when the job ends
	cancel context.CancelFunc
	clock  Clock
	crew   *crew.Crew // the goroutines and timers Shutdown waits for
	tap    tap
	ended  event // fires when the job ends
}

// tap observes the job's goroutines: Begin before one starts, End when it
// returns. Tests use it to wait until nothing runs but what waits on them.
type tap interface {
	Begin()
	End()
}

func newCalls(ctx context.Context, clock Clock, t tap) *calls {
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &calls{ctx: jctx, cancel: cancel, clock: clock, crew: crew.New(clock), tap: t}
}

// track counts work the job will wait for, unless Shutdown began: the
// work starts later with spawnUntil, which takes done.
func (c *calls) track() (done func(), ok bool) { return c.crew.Enter() }

// run runs f on a goroutine of its own with a deadline d and reports
// whether it started (not once Shutdown began). With outlive, f's context
// outlives the job: the last finalize ends the job, and its notification
// must still reach the RM.
func (c *calls) run(d time.Duration, outlive bool, f func(ctx context.Context)) bool {
	done, ok := c.track()
	if !ok {
		return false
	}
	c.spawnUntil(done, time.Now().Add(d), outlive, f)
	return true
}

// spawnUntil runs f, work that track counted (done), with a deadline.
func (c *calls) spawnUntil(done func(), deadline time.Time, outlive bool, f func(ctx context.Context)) {
	if c.tap != nil {
		c.tap.Begin()
	}
	c.crew.SpawnEntered(done, func(context.Context) {
		if c.tap != nil {
			defer c.tap.End()
		}
		parent := c.ctx
		if outlive {
			parent = context.Background()
		}
		ctx, cancel := context.WithDeadline(parent, deadline)
		defer cancel()
		f(ctx)
	})
}

// atEnd registers f to run when the job ends, on the goroutine that ends
// it (at once if it has ended), and returns its stop.
func (c *calls) atEnd(f func()) func() bool { return c.ended.on(f) }

// end cancels the job's calls and runs what waited for the end.
func (c *calls) end() {
	c.cancel()
	c.ended.fire()
}

// after arms a timer whose callback Shutdown waits for.
func (c *calls) after(d time.Duration, f func()) func() bool { return c.crew.After(d, f) }

// shutdown refuses new work and waits for what runs until ctx ends.
func (c *calls) shutdown(ctx context.Context) error {
	if err := c.crew.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: the job's backend calls: %w", err)
	}
	return nil
}

// Done is closed when every local rank's session has closed, or the job
// failed or was aborted.
func (j *Job) Done() <-chan struct{} { return j.done }

// Result says how the job ended; valid after Done.
func (j *Job) Result() Result {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.result
}

// Fail ends the job from outside (the backend died, a signal): pending
// requests are answered with an error naming err, and Done closes.
func (j *Job) Fail(err error) {
	j.end(Result{Err: err})
}

// end ends the job with res unless it has ended already: every request
// still owed an answer gets one, and only then does Done close, so an RM
// that closes connections on Done loses no answer.
func (j *Job) end(res Result) {
	j.mu.Lock()
	if j.ended {
		j.mu.Unlock()
		return
	}
	j.ended = true
	j.log.Debug().Int64("kvs_bytes", j.held).Msg("bytes of KVS records this node held for the job")
	j.noteHeldLocked()
	j.result = res
	j.fences.stopTimers()
	j.attrWaits.stopAll()
	j.lazy.stopAll()
	reqs := make([]*request, 0, len(j.pending))
	for r := range j.pending {
		reqs = append(reqs, r)
	}
	clear(j.pending)
	j.mu.Unlock()
	j.calls.end()
	if res.Err != nil && !res.Aborted {
		j.log.Error().Err(res.Err).Msg("job failed")
	}
	err := res.Err
	if err == nil {
		err = errors.New("the job has ended")
	}
	for _, r := range reqs {
		r.failKV(wire.RcFail, err, failKV(r)...)
	}
	close(j.done)
}

// endedErrLocked is why a request that arrives after the job's end fails.
func (j *Job) endedErrLocked(what string) error {
	return fmt.Errorf("%s: job has ended: %w", what, j.result.Err)
}

// Shutdown cancels pending work and waits for the job's goroutines until
// ctx ends.
func (j *Job) Shutdown(ctx context.Context) error {
	j.Fail(fmt.Errorf("%w: PMI server shutting down", plugin.ErrAborted))
	return j.calls.shutdown(ctx)
}

// sessionClosed is called when a connection ends.
func (j *Job) sessionClosed(s *Session, err error) {
	j.mu.Lock()
	for r := range j.pending {
		if r.s == s {
			delete(j.pending, r)
		}
	}
	t := j.tasks[s.rank]
	if s.rank < 0 || t == nil || t.sess != s {
		j.mu.Unlock()
		return
	}
	t.closed = true
	var failErr error
	done := false
	switch {
	case j.aborting:
		// The abort ends the job, as aborted, on its own goroutine.
	case t.inited && !t.finalized && !t.aborted && !j.ended:
		why := "closed its PMI connection before finalize"
		if err != nil {
			why = fmt.Sprintf("lost its PMI connection before finalize (%v)", err)
		}
		if j.fences.lastErr != nil {
			// A task that gives up after a failed fence is a consequence:
			// name the cause.
			why += ", after " + j.fences.lastErr.Error()
		}
		failErr = fmt.Errorf("rank %d of job %s %s", t.rank, j.cfg.Job.Nspace, why)
	default:
		done = j.allClosedLocked()
	}
	j.mu.Unlock()
	switch {
	case failErr != nil:
		j.reportEarlyExit(t.rank, failErr)
		j.end(Result{Err: failErr})
	case done:
		j.end(Result{})
	}
}

func (j *Job) allClosedLocked() bool {
	for _, t := range j.tasks {
		if !t.closed {
			return false
		}
	}
	return true
}

// reportEarlyExit tells the backend a task ended before finalize so the
// RM ends the job loudly instead of letting its peers hang.
func (j *Job) reportEarlyExit(rank int32, why error) {
	p := j.proc(rank)
	j.withBackend(j.cfg.Timeouts.Backend, true, func(ctx context.Context, err error) {
		if err == nil && j.be.Has(plugin.CapNotify) {
			err := j.be.NotifyEvent(ctx, &plugin.EventRequest{
				Code:   plugin.EventProcAborted,
				Source: p,
				Info:   []plugin.Info{{Key: "message", Value: why.Error()}},
			})
			if err == nil {
				return
			}
			j.log.Warn().Err(err).Msg("notify event failed; aborting the job instead")
		}
		if err := j.be.Abort(ctx, &plugin.AbortRequest{Proc: p, Status: 1, Message: why.Error()}); err != nil {
			j.log.Error().Err(err).Msg("abort after early exit failed")
		}
	})
}

// clientInit marks a rank as a PMI client and tells the backend.
func (j *Job) clientInit(s *Session, rank int32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.tasks[rank]
	if t == nil || t.inited {
		return
	}
	t.inited = true
	j.notices.connected = append(j.notices.connected, j.proc(rank))
	j.flushNoticesLocked()
}

func (s *Session) finalize(r *request) {
	j := s.j
	j.mu.Lock()
	t := j.tasks[s.rank]
	if !t.finalized {
		t.finalized = true
		j.notices.finalized = append(j.notices.finalized, j.proc(s.rank))
		j.flushNoticesLocked()
	}
	if j.ended && j.result.Err != nil {
		// Nothing to hand over: the rank hears why the job ended, now.
		err := j.endedErrLocked(r.cmd)
		j.mu.Unlock()
		r.fail(wire.RcFail, err)
		return
	}
	if !j.oneNode() && !j.ended && j.lastFinalizeLocked(t) {
		// The node's last rank: its answer waits for the hand-over.
		r.park()
		j.depart.waiting = append(j.depart.waiting, r)
		j.departIfDueLocked()
		j.mu.Unlock()
		return
	}
	j.mu.Unlock()
	if !j.drainThen(func() { r.ok() }) {
		r.ok()
	}
}

// drainThen runs answer once the backend in this process, which passes
// other nodes' answers through it, has let them leave (the rank exits
// once answered); false: there is nothing to drain, or the job has shut
// down, and answer was not run.
func (j *Job) drainThen(answer func()) bool {
	d, ok := j.be.drainer()
	if !ok {
		return false
	}
	return j.calls.run(j.cfg.Timeouts.Backend, true, func(ctx context.Context) {
		d.DrainBeforeFinalize(ctx)
		answer()
	})
}

// departure is a node's hand-over, made once per job at the finalize of
// its last local rank of a job on several nodes. Data put in a job stays
// readable until the job ends, whichever node finishes first, so that
// finalize is answered only once (1) every fence the node entered has
// completed: a fence answered at once (lazy PMI-2) still owes the other
// nodes this node's part, which leaves with its call to the backend; and
// (2) the backend holds the node's data where it stays readable without
// the node (plugin.Departer, contract 1.2): a node's server ends with its
// ranks (under Slurm the stepd kills it), and with it what a backend in
// its process held. Guarded by j.mu.
type departure struct {
	waiting []*request // the finalizes answered after the next one
	running bool       // one is on its way; the next waits for it
}

// lastFinalizeLocked reports whether t's is the node's last finalize:
// every other local rank that initialized has finalized or gone.
func (j *Job) lastFinalizeLocked(t *task) bool {
	for _, o := range j.tasks {
		if o != t && o.inited && !o.finalized && !o.closed {
			return false
		}
	}
	return true
}

// departIfDueLocked starts the hand-over once finalizes wait for it and no
// fence the node entered is still on its way; completeFence and
// fenceTimedOut call it again as fences end, and a hand-over's end for
// the finalizes that came meanwhile (a rank that initialized late is the
// last again).
func (j *Job) departIfDueLocked() {
	if len(j.depart.waiting) == 0 || j.depart.running || j.ended {
		return
	}
	for _, f := range j.fences.open {
		if f.ready && f.err == nil {
			return // still owes the others this node's part
		}
	}
	j.depart.running = true
	reqs := j.depart.waiting
	j.depart.waiting = nil
	answer := func() {
		j.mu.Lock()
		for _, r := range reqs {
			r.unpark()
		}
		j.depart.running = false
		j.departIfDueLocked()
		j.mu.Unlock()
		for _, r := range reqs {
			r.ok()
		}
	}
	req := &plugin.DepartRequest{Procs: j.procs(j.lay.local), Node: j.lay.node.Name}
	hand := j.be.Has(plugin.CapDepart)
	// Once shut down, the job's end has answered them.
	j.calls.run(j.cfg.Timeouts.Backend, true, func(ctx context.Context) {
		if hand {
			if err := j.be.Depart(ctx, req); err != nil {
				j.log.Warn().Err(err).Msg("handing this node's data over at its last finalize failed: other nodes may not read it once this node's server has ended")
			}
		}
		if !j.drainThen(answer) {
			answer()
		}
	})
}

// notices batches the ClientConnected and ClientFinalized reports: while
// one call is in flight the next ranks queue up and go together, so a job
// of a thousand ranks costs a few calls, not two thousand.
type notices struct {
	connected []plugin.Proc
	finalized []plugin.Proc
	busy      bool // a flush is waiting for the backend or running
}

// flushNoticesLocked sends the queued notices once the backend is up,
// unless a flush is on its way already. It does not ask for the backend:
// notices are worth sending only to a backend something else needed, and
// a job that never needed it ends without: the RM saw its tasks come and
// go without gopmi's word.
func (j *Job) flushNoticesLocked() {
	if j.notices.busy {
		return
	}
	j.notices.busy = true
	j.be.whenKnown(func() {
		j.calls.run(j.cfg.Timeouts.Backend, true, j.sendNotices)
	})
}

// sendNotices sends batches until none is queued. A rank's connect always
// goes before its finalize: each round sends the connects first.
func (j *Job) sendNotices(ctx context.Context) {
	for {
		j.mu.Lock()
		conn, fin := j.notices.connected, j.notices.finalized
		j.notices.connected, j.notices.finalized = nil, nil
		if !j.be.IsUp() || (len(conn) == 0 && len(fin) == 0) {
			j.notices.busy = false
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		if len(conn) > 0 {
			j.notify(ctx, "ClientConnected", conn, j.be.ClientConnected)
		}
		if len(fin) > 0 {
			j.notify(ctx, "ClientFinalized", fin, j.be.ClientFinalized)
		}
	}
}

func (j *Job) notify(ctx context.Context, what string, procs []plugin.Proc, call func(context.Context, *plugin.ClientRequest) error) {
	err := call(ctx, &plugin.ClientRequest{Procs: procs})
	switch {
	case err == nil, errors.Is(err, plugin.ErrNotSupported):
	case errors.Is(err, plugin.ErrBackendGone):
		// The job fails on its own account when its backend is gone, or
		// ended before the backend was needed.
		j.log.Debug().Int("ranks", len(procs)).Err(err).Msg("backend " + what + " not delivered")
	default:
		j.log.Warn().Int("ranks", len(procs)).Err(err).Msg("backend " + what + " failed")
	}
}

// abort asks the RM to end the job and then ends it here. The client
// expects no answer: it exits.
func (s *Session) abort(r *request, code int, msg string, world bool) {
	j := s.j
	rank := s.rank
	r.answered.Store(true)
	req := &plugin.AbortRequest{Proc: j.proc(rank), Status: int32(code), Message: msg}
	if !world {
		// MPI_Abort on a smaller communicator still ends the job in
		// MPICH; name the caller so the RM may be more precise.
		req.Targets = []plugin.Proc{j.proc(rank)}
	}
	j.log.Warn().Int32("rank", rank).Int("status", code).Str("abort_message", msg).Msg("task aborted the job")
	j.mu.Lock()
	// The client exits right after its abort: its connection closing is
	// part of the abort, not an early exit.
	j.tasks[rank].aborted = true
	j.aborting = true
	j.mu.Unlock()
	// The RM hears of it on a call that outlives the job and that
	// Shutdown waits for, so the abort reaches the backend even though the
	// job ends now.
	j.withBackend(j.cfg.Timeouts.Backend, true, func(ctx context.Context, err error) {
		if err == nil {
			err = j.be.Abort(ctx, req)
		}
		if err != nil {
			j.log.Error().Err(err).Msg("backend abort failed; the shim's exit status reports it")
		}
	})
	err := fmt.Errorf("%w: job %s aborted by rank %d with status %d: %s", plugin.ErrAborted, j.cfg.Job.Nspace, rank, code, msg)
	j.end(Result{Aborted: true, Status: code, Err: err})
}
