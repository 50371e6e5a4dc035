// Package engine is what gopmi's PMIx face decides, in Go alone: how a
// fence is named and which of the node's clients are in it, what a fence
// that collects nothing carries, when the clients' committed data is
// handed to the backend (their first commit, their later ones until they
// fence), how another node's data is read by direct modex, when every
// client finalized, and how connects, spawns and the name service reach
// the backend. libpmix is behind Lib, time behind the crew's clock: the
// tests drive both (engine_test.go), with no libpmix and no waiting.
//
// The face (package pmix) is a shell over it: libpmix's callbacks copy
// their arguments into Go values, call the engine, and answer libpmix
// from the function the engine calls back, on a goroutine of the crew's
// (never on libpmix's own thread).
package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

// Lib is what the engine asks of libpmix.
type Lib interface {
	// AskData asks libpmix for local client p's data in the direct-modex
	// form (PMIx_server_dmodex_request). libpmix answers through
	// Engine.DataAnswer with id: at once for a client that committed,
	// at its first commit for one that has not.
	AskData(p plugin.Proc, id uint64) error
	// Register tells libpmix of job's layout, with the ranks of its node
	// index ni as this server's (none for -1: another job's, which local
	// clients reach after a spawn or a connect).
	Register(job plugin.Job, ni int) error
	// Deliver gives this node's clients an event a client raised
	// elsewhere, with libpmix's status code.
	Deliver(code int, e plugin.Event) error
}

// ErrClosed is a call's refusal once the server closes.
var ErrClosed = errors.New("pmix: the server is closing")

// Config is what an Engine needs.
type Config struct {
	Backend plugin.Full
	Lib     Lib
	// Crew runs the engine's calls and timers; its owner (the server)
	// closes it, which ends and waits for them.
	Crew *crew.Crew
	// FenceTimeout bounds a fence whose clients gave no time-out;
	// default plugin.DefaultFenceTimeout.
	FenceTimeout time.Duration
	Logger       zerolog.Logger
}

// base is what every part of the engine works with.
type base struct {
	be           plugin.Full
	lib          Lib
	crew         *crew.Crew
	log          zerolog.Logger
	fenceTimeout time.Duration
	jobs         *jobs
}

// Engine is a PMIx server's decisions. Its methods return at once; what
// the backend answers comes to the function each takes.
type Engine struct {
	*base
	commits *commits
	clients *clients
	failure failure
}

// New is an engine on cfg.
func New(cfg Config) *Engine {
	b := &base{be: cfg.Backend, lib: cfg.Lib, crew: cfg.Crew, log: cfg.Logger,
		fenceTimeout: plugin.TimeoutOr(cfg.FenceTimeout, plugin.DefaultFenceTimeout), jobs: newJobs()}
	return &Engine{base: b, commits: newCommits(b), clients: newClients(b), failure: failure{ch: make(chan struct{})}}
}

// Host records that this server hosts node index ni of job (whose
// registration with libpmix comes next): its ranks there are the ones
// whose finalize ends the server's wait (Finalized), and, when the job
// spans several nodes, whose commits are handed to the backend and to
// whom other nodes' events are given. It returns those ranks.
func (e *Engine) Host(job plugin.Job, ni int) []int32 {
	local := e.jobs.host(job, ni)
	e.clients.expect(job.Nspace, local)
	if len(job.Nodes) > 1 {
		e.commits.watch(job.Nspace, local)
		e.watchEvents(job.Nspace, job.Nodes[ni].Name)
	}
	return local
}

// Finalized is closed once every local rank of job nspace, hosted next,
// finalized.
func (e *Engine) Finalized(nspace string) <-chan struct{} { return e.clients.watch(nspace) }

// Failed is closed once a fence bounded by the run's time-out timed out:
// that ends the job, whatever its clients do next. Err says why.
func (e *Engine) Failed() <-chan struct{} { return e.failure.ch }

// Err is why the job failed (Failed), or nil.
func (e *Engine) Err() error {
	e.failure.mu.Lock()
	defer e.failure.mu.Unlock()
	return e.failure.err
}

// failure is the job's end by a fence that timed out, once.
type failure struct {
	mu  sync.Mutex
	ch  chan struct{} // closed once err is set
	err error         // guarded by mu
}

// fail ends the job for err, once.
func (f *failure) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
		close(f.ch)
	}
}

// run runs f on the crew with a context bounded by d, or reports
// ErrClosed.
func (b *base) run(d time.Duration, f func(ctx context.Context)) error {
	if !b.crew.Spawn(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		f(ctx)
	}) {
		return ErrClosed
	}
	return nil
}

// mustRun runs f on the crew, or here, with a context of its own, once
// the crew has closed: news the backend must hear even then (a client
// lost, the queued reports), which f bounds with news.
func (b *base) mustRun(f func(ctx context.Context)) {
	if !b.crew.Spawn(f) {
		f(context.Background())
	}
}

// newsBound bounds a call that tells the backend something it must hear
// (a finalize, a client lost, the end of a failed spawn's job).
const newsBound = 5 * time.Second

// news is the context of such a call: it outlives ctx (news comes also
// while the server closes), within newsBound.
func news(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), newsBound)
}

// warnUnlessNotFound logs a failed call: a name not found is an answer, a
// failure news.
func (b *base) warnUnlessNotFound(err error, what string, p plugin.Proc) {
	ev := b.log.Warn()
	if errors.Is(err, plugin.ErrNotFound) {
		ev = b.log.Debug()
	}
	ev.Err(err).Str("proc", p.String()).Msg("pmix: " + what)
}
