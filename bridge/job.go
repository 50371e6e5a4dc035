package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// Job is the PMI engine for one job on one node. It is safe for
// concurrent use: the shim calls Session methods from one goroutine per
// connection, and backend calls complete on goroutines of the Job's own.
type Job struct {
	cfg   Config
	lay   *layout
	be    *Backend
	log   zerolog.Logger
	clock Clock
	attrs map[string]string

	needOnce sync.Once // asks for the backend and watches it come up, once

	ctx     context.Context // ends when the job ends
	cancel  context.CancelFunc
	wg      sync.WaitGroup // backend calls and timers in flight
	wgMu    sync.Mutex     // orders wg.Add before Shutdown's wg.Wait
	closing bool           // guarded by wgMu; no new goroutines once set
	done    chan struct{}

	mu         sync.Mutex
	tasks      map[int32]*task   // guarded by mu; one per local rank
	store      *kvs.Store        // guarded by mu
	fences     map[string]*fence // guarded by mu; open and in-flight fences by ID
	groupDone  map[string]int    // guarded by mu; last finished seq per fence group
	publishSeq int               // guarded by mu; numbers the publish fences
	// carry is what node barriers of a job on several nodes committed
	// here since the last world fence, which takes it to the other
	// nodes. Guarded by mu.
	carry      []byte
	nodeAttrs  map[string]string     // guarded by mu
	attrWaits  map[string][]*waiter  // guarded by mu; info-getnodeattr with wait
	lazyWaits  []*waiter             // guarded by mu; gets waiting for a world fence
	pending    map[*request]struct{} // guarded by mu; requests not yet answered
	notices    notices               // guarded by mu
	fenceErr   error                 // guarded by mu; the last fence failure, which explains later ones
	fetched    map[int32]int         // guarded by mu; node index (-1: all) -> world epoch of its last direct modex
	modexWaits map[int32][]*waiter   // guarded by mu; gets waiting on a direct modex per node index
	ended      bool                  // guarded by mu
	result     Result                // guarded by mu
}

// task is one local rank.
type task struct {
	rank      int32
	sess      *Session
	inited    bool
	finalized bool
	aborted   bool
	closed    bool
	pending   []byte         // kvs blob of puts since the task's last fence
	seq       map[string]int // fences entered per group
}

// waiter is a parked request with its deadline timer.
type waiter struct {
	req  *request
	key  string
	need int // lazy: world fence epoch the get waits for
	stop func() bool
}

// NewJob builds the engine. It calls no backend method: the host brings
// the backend up (GetInfo, Configure) and says so through cfg.Backend.
func NewJob(ctx context.Context, cfg Config) (*Job, error) {
	cfg.Limits = cfg.Limits.withDefaults()
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	lay, err := buildLayout(&cfg)
	if err != nil {
		return nil, err
	}
	be := cfg.Backend
	if be == nil {
		return nil, errors.New("bridge config: no backend")
	}
	clock := cfg.Clock
	if clock == nil {
		clock = realClock{}
	}
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := &Job{
		cfg:       cfg,
		lay:       lay,
		be:        be,
		log:       cfg.Logger.With().Str("job", cfg.Job.Nspace).Int32("node", cfg.NodeID).Logger(),
		clock:     clock,
		ctx:       jctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		tasks:     make(map[int32]*task, len(lay.local)),
		store:     kvs.NewStore(),
		fences:    make(map[string]*fence),
		groupDone: make(map[string]int),
		nodeAttrs: make(map[string]string),
		attrWaits: make(map[string][]*waiter),
		pending:   make(map[*request]struct{}),
	}
	for _, r := range lay.local {
		j.tasks[r] = &task{rank: r, seq: make(map[string]int)}
	}
	for _, p := range cfg.Preput {
		j.store.Put(kvs.Record{Rank: -1, Key: p.Key, Value: p.Value})
	}
	j.attrs = j.jobAttrs()
	if len(lay.local) == 0 {
		j.end(Result{})
	}
	return j, nil
}

// backendUp waits, without asking for the backend, until it is up or the
// job ends: notifications are worth sending only to a backend something
// else needed.
func (j *Job) backendUp(ctx context.Context) bool {
	select {
	case <-j.be.Ready():
	case <-j.done:
	case <-ctx.Done():
	}
	return j.be.IsUp()
}

// needBackend asks for the backend. The first call also watches it come
// up, to hand it what a one-node job committed meanwhile.
func (j *Job) needBackend() {
	j.needOnce.Do(func() {
		if j.track() {
			go func() {
				defer j.wg.Done()
				select {
				case <-j.be.Ready():
					j.mu.Lock()
					j.flushStoreLocked()
					j.mu.Unlock()
				case <-j.done:
					// An ended job publishes nothing.
				}
			}()
		}
		j.be.Need()
	})
}

// capabilities asks for the backend and waits until it is up, failed, or
// ctx ended.
func (j *Job) capabilities(ctx context.Context) error {
	j.needBackend()
	return j.be.Wait(ctx)
}

// jobAttrs are served to info-getjobattr and, for PMI-1, to get.
func (j *Job) jobAttrs() map[string]string {
	a := map[string]string{
		"PMI_process_mapping": j.lay.mapping,
		"universeSize":        fmt.Sprint(j.universeSize()),
		"PMI_dead_processes":  "",
	}
	for _, kv := range j.cfg.Attrs {
		a[kv.Key] = kv.Value
	}
	return a
}

func (j *Job) universeSize() int32 {
	if u := j.cfg.Job.UniverseSize; u > 0 {
		return u
	}
	return j.cfg.Job.Size
}

// proc names a rank of this job.
func (j *Job) proc(rank int32) plugin.Proc {
	return plugin.Proc{Nspace: j.cfg.Job.Nspace, Rank: rank}
}

// Attach opens a session for the connection of a known local rank
// (PMI_FD). Replies go to out.
func (j *Job) Attach(rank int32, out Sender) (*Session, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.tasks[rank]
	if !ok {
		return nil, fmt.Errorf("attach: rank %d is not on node %d", rank, j.cfg.NodeID)
	}
	if t.sess != nil {
		return nil, fmt.Errorf("attach: rank %d already has a connection", rank)
	}
	s := newSession(j, out)
	s.rank = rank
	t.sess = s
	return s, nil
}

// AttachPort opens a session for a connection accepted on the PMI_PORT
// listener; the rank is bound by initack or fullinit.
func (j *Job) AttachPort(out Sender) *Session {
	s := newSession(j, out)
	s.rank = -1
	return s
}

// bind ties a port session to a rank (initack pmiid=, or fullinit).
func (j *Job) bind(s *Session, rank int32) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.tasks[rank]
	if !ok {
		return fmt.Errorf("rank %d is not a task of job %s on this node", rank, j.cfg.Job.Nspace)
	}
	if t.sess != nil && t.sess != s {
		return fmt.Errorf("rank %d is already connected", rank)
	}
	t.sess = s
	s.rank = rank
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
	j.result = res
	for _, f := range j.fences {
		f.stopTimer()
	}
	for _, ws := range j.attrWaits {
		for _, w := range ws {
			w.stop()
		}
	}
	for _, w := range j.lazyWaits {
		w.stop()
	}
	reqs := make([]*request, 0, len(j.pending))
	for r := range j.pending {
		reqs = append(reqs, r)
	}
	clear(j.pending)
	j.mu.Unlock()
	j.cancel()
	if res.Err != nil && !res.Aborted {
		j.log.Error().Err(res.Err).Msg("job failed")
	}
	err := res.Err
	if err == nil {
		err = errors.New("the job has ended")
	}
	for _, r := range reqs {
		r.fail(wire.RcFail, err)
	}
	close(j.done)
}

// Shutdown cancels pending work and waits for the job's goroutines until
// ctx ends.
func (j *Job) Shutdown(ctx context.Context) error {
	j.Fail(fmt.Errorf("%w: PMI server shutting down", plugin.ErrAborted))
	j.wgMu.Lock()
	j.closing = true
	j.wgMu.Unlock()
	waited := make(chan struct{})
	go func() {
		j.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown: backend calls still running: %w", ctx.Err())
	}
}

// goBackend runs a backend call on its own goroutine with a deadline, so a
// Session never blocks on the backend.
func (j *Job) goBackend(timeout time.Duration, call func(ctx context.Context)) {
	if !j.track() {
		return // shut down: the job ended and answered every request
	}
	go func() {
		defer j.wg.Done()
		ctx, cancel := context.WithTimeout(j.ctx, timeout)
		defer cancel()
		call(ctx)
	}()
}

// track counts a goroutine the job will wait for, unless Shutdown began.
func (j *Job) track() bool {
	j.wgMu.Lock()
	defer j.wgMu.Unlock()
	if j.closing {
		return false
	}
	j.wg.Add(1)
	return true
}

// goNotify runs a notification to the backend and reports whether it
// started (not once Shutdown began). Unlike goBackend its context outlives
// the job: the last finalize ends the job, and its notification must still
// reach the RM.
func (j *Job) goNotify(call func(ctx context.Context)) bool {
	if !j.track() {
		return false
	}
	go func() {
		defer j.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), j.cfg.Timeouts.Backend)
		defer cancel()
		call(ctx)
	}()
	return true
}

// afterFunc arms a timer whose callback the job waits for on Shutdown.
func (j *Job) afterFunc(d time.Duration, f func()) func() bool {
	if !j.track() {
		return func() bool { return false }
	}
	stop := j.clock.AfterFunc(d, func() {
		defer j.wg.Done()
		f()
	})
	return func() bool {
		if stop() {
			j.wg.Done()
			return true
		}
		return false
	}
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
	if t.inited && !t.finalized && !t.aborted && !j.ended {
		why := "closed its PMI connection before finalize"
		if err != nil {
			why = fmt.Sprintf("lost its PMI connection before finalize (%v)", err)
		}
		if j.fenceErr != nil {
			// A task that gives up after a failed fence is a consequence:
			// name the cause.
			why += ", after " + j.fenceErr.Error()
		}
		failErr = fmt.Errorf("rank %d of job %s %s", t.rank, j.cfg.Job.Nspace, why)
	} else {
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
	j.goNotify(func(ctx context.Context) {
		p := j.proc(rank)
		if j.capabilities(ctx) == nil && j.be.Has(plugin.CapNotify) {
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
