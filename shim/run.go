package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
)

// bootstrapTimeout bounds reading stdin: a step daemon writes the
// bootstrap at once and closes the pipe.
const bootstrapTimeout = 30 * time.Second

// RunConfig is what Run takes from its process. The zero value means the
// real process: stdin, stderr, the environment, inherited fds and signals.
// Tests inject each part.
type RunConfig struct {
	// Stdin carries the bootstrap message; nil means os.Stdin.
	Stdin io.Reader
	// Stderr receives the log; nil means os.Stderr.
	Stderr io.Writer
	// Getenv looks up NOTIFY_SOCKET, PATH, GOPMI_LOG_FORMAT and
	// JOURNAL_STREAM. nil means the process environment, from which Run
	// then removes NOTIFY_SOCKET before starting the backend.
	Getenv func(key string) string
	// Files returns the inherited task fds, each named (os.File.Name) as
	// in LISTEN_FDNAMES; Run owns and closes them. nil means the fds
	// described by LISTEN_FDS/LISTEN_FDNAMES (see the package doc).
	Files func() ([]*os.File, error)
	// Executable is the shim's own path, next to which the backend binary
	// is looked up first; "" means os.Executable.
	Executable string
	// Signals delivers SIGTERM, SIGINT and SIGUSR1; nil means Run
	// subscribes to them itself.
	Signals <-chan os.Signal

	// start launches the backend; nil means startPlugin (tests).
	start startFunc
	// backendEnv is passed to grpcplugin as ClientConfig.Env (tests).
	backendEnv []string
}

// Main runs the shim as a process and returns its exit status:
// os.Exit(shim.Main()) is gopmi-shim's whole main.
func Main() int {
	return ExitCode(Run(context.Background(), RunConfig{}))
}

// Run serves one job on this node until every local task has finalized
// and closed its connection, the job fails, ctx ends or a signal stops it.
// The error says why it ended; ExitCode turns it into the exit status.
// Run writes its reason as its last log line.
func Run(ctx context.Context, rc RunConfig) error {
	getenv := rc.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// Capture the readiness address before anything can start a child:
	// the backend inherits the environment and must not see it.
	n := notifier{addr: getenv("NOTIFY_SOCKET")}
	if rc.Getenv == nil {
		_ = os.Unsetenv("NOTIFY_SOCKET")
	}
	if rc.Stdin == nil {
		rc.Stdin = os.Stdin
	}
	if rc.Stderr == nil {
		rc.Stderr = os.Stderr
	}
	logw := newLogWriter(rc.Stderr, getenv)
	log := zerolog.New(logw).With().Timestamp().Logger()

	// Signals are watched from the start, so that SIGTERM during the
	// backend's start-up ends it too.
	sigs := rc.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
		defer signal.Stop(ch)
		sigs = ch
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	logp := &loggerRef{l: log}
	sigDone := make(chan struct{})
	sigExit := make(chan struct{})
	go func() {
		defer close(sigDone)
		for {
			select {
			case <-sigExit:
				return
			case s := <-sigs:
				l := logp.get()
				if s == syscall.SIGUSR1 {
					dumpStacks(l)
					continue
				}
				l.Warn().Str("signal", s.String()).Msg("stopping on signal")
				stop(fmt.Errorf("received %v", s))
			}
		}
	}()
	defer func() {
		close(sigExit)
		<-sigDone
	}()

	s := &server{rc: rc, getenv: getenv, notify: n, logw: logw, logp: logp}
	err := s.run(runCtx)
	if err != nil && !s.ready {
		if nerr := n.failed(err); nerr != nil {
			l := logp.get()
			l.Warn().Err(nerr).Msg("report start-up failure")
		}
	}
	// The step daemon shows the last line: make it say why.
	l := logp.get()
	if err != nil {
		l.Error().Err(err).Int("exit", ExitCode(err)).Msg("gopmi-shim: exiting")
	} else {
		l.Info().Int("exit", ExitOK).Msg("gopmi-shim: every task finished; exiting")
	}
	return err
}

// loggerRef lets the signal goroutine use the job's logger once it
// exists.
type loggerRef struct {
	mu sync.Mutex
	l  zerolog.Logger // guarded by mu
}

func (r *loggerRef) get() zerolog.Logger {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.l
}

func (r *loggerRef) set(l zerolog.Logger) {
	r.mu.Lock()
	r.l = l
	r.mu.Unlock()
}

// server is one Run's state.
type server struct {
	rc     RunConfig
	getenv func(string) string
	notify notifier
	logw   io.Writer
	logp   *loggerRef
	log    zerolog.Logger
	cfg    *config
	job    *bridge.Job
	port   net.Listener // the PMI_PORT listener, or nil
	ready  bool

	// readers counts the goroutines that feed the job: connection readers
	// and the accept loop. writers counts the connection writers.
	readers sync.WaitGroup
	writers sync.WaitGroup

	mu       sync.Mutex
	conns    []*taskConn         // guarded by mu; every connection ever attached
	byRank   map[int32]*taskConn // guarded by mu; PMI_FD connections
	portLive int                 // guarded by mu; open PMI_PORT connections
	portSeen int                 // guarded by mu; PMI_PORT connections accepted
	closing  bool                // guarded by mu; no new connections
}

// readBootstrapTimed reads the bootstrap within bootstrapTimeout. A
// reader that blocks past it is left behind: the shim exits right after.
func readBootstrapTimed(ctx context.Context, r io.Reader) (*config, error) {
	type res struct {
		c   *config
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := parseBootstrap(r)
		ch <- res{c, err}
	}()
	t := time.NewTimer(bootstrapTimeout)
	defer t.Stop()
	select {
	case v := <-ch:
		return v.c, v.err
	case <-t.C:
		return nil, fmt.Errorf("%w: stdin: no EOF within %v; the step daemon must close stdin after the bootstrap", ErrUsage, bootstrapTimeout)
	case <-ctx.Done():
		return nil, stopped(ctx, "read bootstrap")
	}
}

func (s *server) run(ctx context.Context) (retErr error) {
	c, err := readBootstrapTimed(ctx, s.rc.Stdin)
	if err != nil {
		return err
	}
	s.cfg = c
	s.log = zerolog.New(s.logw).Level(c.logLevel).With().Timestamp().
		Str("job", c.job.Nspace).Int32("node", c.nodeID).Logger()
	s.logp.set(s.log)
	s.log.Debug().Int("tasks", len(c.tasks)).Str("backend", c.backend.binaryName()).Msg("bootstrap read")

	// The fds come first: they must be close-on-exec before any child
	// starts, and a launcher mistake is cheaper to report before the
	// backend runs.
	var files []*os.File
	if s.rc.Files != nil {
		files, err = s.rc.Files()
	} else {
		files, err = inheritedFiles()
	}
	if err != nil {
		return err
	}
	fds, err := sortFiles(files, c, s.log)
	if err != nil {
		return err
	}
	defer fds.close()

	// A missing backend binary, the likeliest mistake, fails the start
	// before anything is served.
	path, err := s.backendPath()
	if err != nil {
		return err
	}

	name := c.backend.binaryName()
	// The tasks are served from here on, while the backend starts: their
	// local requests need no backend, and those that do wait for it.
	lazy := newLazyBackend()
	job, err := bridge.NewJob(ctx, bridge.Config{
		Job:         c.job,
		NodeID:      c.nodeID,
		Preput:      c.preput,
		Attrs:       c.attrs,
		Limits:      c.limits,
		Timeouts:    c.bridgeTimeouts(),
		FenceMode:   c.fenceMode,
		PMIDebug:    c.pmiDebug,
		BackendName: name,
		WaitBackend: lazy.wait,
		// The bridge adds the job and node fields itself.
		Logger: zerolog.New(s.logw).Level(c.logLevel).With().Timestamp().Logger(),
	}, lazy)
	if err != nil {
		return fmt.Errorf("%w: build the PMI engine: %w", ErrUsage, err)
	}
	s.job = job
	// startFailed ends a job that failed before READY; its backend never
	// started.
	startFailed := func(err error) error {
		lazy.fail(err)
		job.Fail(err)
		s.shutdown()
		return err
	}

	s.byRank = map[int32]*taskConn{}
	for _, t := range c.tasks {
		conn, ok := fds.conns[t.rank]
		if !ok {
			continue // a PMI_PORT task
		}
		delete(fds.conns, t.rank)
		if err := s.attach(t.rank, conn); err != nil {
			return startFailed(fmt.Errorf("attach rank %d: %w", t.rank, err))
		}
	}
	if fds.port != nil {
		s.port = fds.port
		fds.port = nil
		s.readers.Add(1)
		go s.acceptLoop(s.port)
	}

	// READY means the tasks are served; the backend's own start-up
	// failures come after it, as a job failure with its STATUS.
	if err := s.notify.ready(len(c.tasks)); err != nil {
		// The launcher asked for readiness and will not hear it: it
		// would wait for its own time-out, so fail now and say why.
		return startFailed(fmt.Errorf("report readiness: %w", err))
	}
	s.ready = true

	// The backend comes up beside the tasks: at once for a job on several
	// nodes (its fences need it), on demand for a job on one node, which
	// may never need it. A job that ends cleanly first does not wait for
	// it.
	eager := len(c.job.Nodes) > 1
	bs := s.startBackendAside(ctx, job, lazy, path, eager)
	defer bs.close(s.log)

	backendDied := s.wait(ctx, name, bs)
	res := job.Result()
	s.shutdown()

	switch {
	case backendDied:
		return fmt.Errorf("%w: %s exited during the job: %w", ErrBackend, name, plugin.ErrBackendGone)
	case res.Aborted:
		if res.Err != nil {
			return fmt.Errorf("%w: %w", ErrJobAborted, res.Err)
		}
		return fmt.Errorf("%w with status %d", ErrJobAborted, res.Status)
	case res.Err != nil && errors.Is(res.Err, ErrBackend):
		return res.Err
	case res.Err != nil && errors.Is(res.Err, plugin.ErrBackendGone):
		return fmt.Errorf("%w: %w", ErrBackend, res.Err)
	case res.Err != nil:
		return fmt.Errorf("%w: %w", ErrJobFailed, res.Err)
	}
	return nil
}

// backendStart is the backend's bring-up, run beside the job.
type backendStart struct {
	done chan struct{} // closed when the bring-up ended
	bp   backendProc   // the running backend; set before done closes
	dir  string        // the backend's private socket directory, if made
	err  error         // why it failed, when that fails the job
	stop context.CancelFunc
}

// startBackendAside brings the backend up on its own goroutine: at once
// when eager, else when the job first needs it. A job that ends cleanly
// meanwhile cuts the start short; one that fails or aborts lets it finish,
// since the RM must hear of that.
func (s *server) startBackendAside(ctx context.Context, job *bridge.Job, lazy *lazyBackend, path string, eager bool) *backendStart {
	c := s.cfg
	startCtx, stop := context.WithCancel(ctx)
	bs := &backendStart{done: make(chan struct{}), stop: stop}
	go func() {
		<-job.Done()
		if endedCleanly(job) {
			stop()
		}
	}()
	go func() {
		defer close(bs.done)
		if !eager {
			select {
			case <-lazy.demand:
			case <-startCtx.Done():
			}
		}
		if startCtx.Err() != nil {
			lazy.fail(errors.New("the job ended before it needed its backend"))
			return
		}
		// The socket directory is made only for a backend that starts:
		// most jobs on one node never need theirs.
		dir, err := os.MkdirTemp("", "gopmi-shim-")
		if err != nil {
			err = fmt.Errorf("%w: create socket dir: %w", ErrBackend, err)
		} else {
			bs.dir = dir
		}
		var (
			bp    backendProc
			info  *plugin.BackendInfo
			attrs []plugin.Info
		)
		if err == nil {
			bp, info, attrs, err = s.bringUpBackend(startCtx, path, dir)
		}
		if err != nil {
			lazy.fail(err)
			if !endedCleanly(job) {
				bs.err = err
			}
			return
		}
		bs.bp = bp
		lazy.set(bp.Backend(), &bridge.BackendReady{Info: info, Attrs: attrs})
		s.log.Info().Int("tasks", len(c.tasks)).Str("backend", c.backend.binaryName()).Str("backend_version", info.Version).
			Msg("backend serving")
	}()
	return bs
}

// close ends the bring-up (or waits for it, within the backend start
// time-out it runs under) and closes the backend.
func (bs *backendStart) close(log zerolog.Logger) {
	// The job is over and its news delivered (Shutdown waited for that):
	// a bring-up still waiting or running is no longer needed.
	bs.stop()
	<-bs.done
	if bs.bp != nil {
		if err := bs.bp.Close(); err != nil {
			log.Warn().Err(err).Msg("close backend")
		}
	}
	if bs.dir != "" {
		if err := os.RemoveAll(bs.dir); err != nil {
			log.Warn().Err(err).Str("dir", bs.dir).Msg("remove socket dir")
		}
	}
}

// bringUpBackend starts and configures the backend, both within the
// backend start time-out. startCtx cuts it short: the shim stopping (a
// signal) or a job that no longer needs the backend.
func (s *server) bringUpBackend(startCtx context.Context, path, dir string) (backendProc, *plugin.BackendInfo, []plugin.Info, error) {
	c := s.cfg
	start := s.rc.start
	if start == nil {
		start = startPlugin
	}
	ctx, cancel := context.WithTimeout(startCtx, c.backendStart)
	defer cancel()
	// Start honours ctx only while it runs (a signal during start-up
	// kills the plugin); afterwards the shim ends the plugin with Close.
	s.log.Debug().Str("path", path).Strs("args", c.backend.args).Msg("starting backend")
	bp, err := start(ctx, launch{
		path:      path,
		spec:      c.backend,
		socketDir: dir,
		log:       s.log.With().Str("backend", c.backend.binaryName()).Logger(),
		env:       s.rc.backendEnv,
		timeout:   c.backendStart,
	})
	if err != nil {
		switch {
		case startCtx.Err() != nil:
			err = stopped(startCtx, "start "+path)
		case !errors.Is(err, ErrBackend):
			err = fmt.Errorf("%w: %w", ErrBackend, err)
		}
		return nil, nil, nil, err
	}
	attrs, info, err := configureBackend(ctx, bp, c)
	if err != nil {
		if cerr := bp.Close(); cerr != nil {
			s.log.Warn().Err(cerr).Msg("close backend")
		}
		if startCtx.Err() != nil {
			err = stopped(startCtx, "configure "+c.backend.binaryName())
		}
		return nil, nil, nil, err
	}
	return bp, info, attrs, nil
}

// endedCleanly reports whether the job has ended with every task done.
func endedCleanly(job *bridge.Job) bool {
	if !isDone(job.Done()) {
		return false
	}
	res := job.Result()
	return res.Err == nil && !res.Aborted
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopped is the error for a start-up cut short by a signal or the end of
// Run's context: the job failed before it began.
func stopped(ctx context.Context, step string) error {
	return fmt.Errorf("%w: %s: shim stopped: %w", ErrJobFailed, step, context.Cause(ctx))
}

// backendPath resolves the backend binary.
func (s *server) backendPath() (string, error) {
	self := s.rc.Executable
	if self == "" {
		if p, err := os.Executable(); err == nil {
			self = p
		}
	}
	return resolveBackend(s.cfg.backend, self, s.getenv)
}

// attach hands one PMI_FD connection to the bridge and starts its
// goroutines.
func (s *server) attach(rank int32, conn net.Conn) error {
	tc := newTaskConn(conn, s.queueBytes(), s.log.With().Int32("rank", rank).Logger())
	sess, err := s.job.Attach(rank, tc)
	if err != nil {
		_ = conn.Close()
		return err
	}
	s.mu.Lock()
	s.conns = append(s.conns, tc)
	s.byRank[rank] = tc
	s.mu.Unlock()
	s.serveConn(tc, sess, nil)
	return nil
}

// queueBytes bounds one connection's unsent replies: a few of the longest
// lines the job allows.
func (s *server) queueBytes() int {
	return max(minQueueBytes, 4*s.cfg.limits.LineMax)
}

func (s *server) serveConn(tc *taskConn, sess *bridge.Session, onExit func()) {
	s.writers.Add(1)
	go func() {
		defer s.writers.Done()
		tc.writeLoop()
	}()
	s.readers.Add(1)
	go func() {
		defer s.readers.Done()
		tc.readLoop(sess)
		if onExit != nil {
			onExit()
		}
	}()
}

// portTasks is the number of tasks that connect through PMI_PORT.
func (s *server) portTasks() int {
	n := 0
	for _, t := range s.cfg.tasks {
		if t.fdName == "" {
			n++
		}
	}
	return n
}

// acceptLoop serves the PMI_PORT listener until the shim shuts down.
func (s *server) acceptLoop(l net.Listener) {
	defer s.readers.Done()
	// Live connections are bounded: a task retrying a failed handshake
	// is fine, a flood is not.
	limit := 2*s.portTasks() + 8
	var backoff *time.Timer
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends pass; retry soon unless shutting down.
			s.log.Warn().Err(err).Msg("pmi_port: accept")
			if backoff == nil {
				backoff = time.NewTimer(100 * time.Millisecond)
			} else {
				backoff.Reset(100 * time.Millisecond)
			}
			<-backoff.C
			continue
		}
		s.mu.Lock()
		switch {
		case s.closing:
			s.mu.Unlock()
			_ = conn.Close()
			return
		case s.portLive >= limit:
			s.mu.Unlock()
			s.log.Warn().Int("open", limit).Msg("pmi_port: too many open connections; refusing one")
			_ = conn.Close()
			continue
		}
		s.portLive++
		s.portSeen++
		// Attached under mu so that shutdown, which takes the list of
		// connections under mu, cannot miss this one. The bridge calls
		// only the taskConn's own methods, which never take s.mu.
		tc := newTaskConn(conn, s.queueBytes(), s.log.With().Str("conn", "pmi_port").Logger())
		sess := s.job.AttachPort(tc)
		s.conns = append(s.conns, tc)
		s.mu.Unlock()
		s.serveConn(tc, sess, func() {
			s.mu.Lock()
			s.portLive--
			s.mu.Unlock()
		})
	}
}

// wait blocks until the job ends, failing it on a signal, ctx's end, the
// backend's exit or a connect time-out. It reports whether the backend
// died.
func (s *server) wait(ctx context.Context, name string, bs *backendStart) (backendDied bool) {
	var exited <-chan struct{} // nil, never ready, until a backend runs
	started := bs.done
	var connectC <-chan time.Time
	if s.cfg.connect > 0 {
		t := time.NewTimer(s.cfg.connect)
		defer t.Stop()
		connectC = t.C
	}
	for {
		select {
		case <-s.job.Done():
			return false
		case <-started:
			started = nil
			switch {
			case bs.err != nil:
				s.log.Error().Err(bs.err).Msg("failing the job: its backend did not start")
				s.job.Fail(bs.err)
			case bs.bp != nil:
				exited = bs.bp.Exited()
			}
		case <-exited:
			err := fmt.Errorf("backend %s exited: %w", name, plugin.ErrBackendGone)
			s.log.Error().Err(err).Msg("failing the job")
			s.job.Fail(err)
			return true
		case <-ctx.Done():
			err := fmt.Errorf("shim stopped: %w", context.Cause(ctx))
			s.job.Fail(err)
			return false
		case <-connectC:
			connectC = nil
			if err := s.checkConnected(); err != nil {
				s.log.Error().Err(err).Msg("failing the job")
				s.job.Fail(err)
				return false
			}
		}
	}
}

// checkConnected fails when a task has not spoken PMI within the connect
// time-out: a PMI_FD task that sent nothing, or fewer PMI_PORT
// connections than PMI_PORT tasks.
func (s *server) checkConnected() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var silent []int32
	for r, tc := range s.byRank {
		if !tc.spoke.Load() {
			silent = append(silent, r)
		}
	}
	want := s.portTasks()
	switch {
	case len(silent) > 0:
		return fmt.Errorf("connect: %s sent nothing within %v", plugin.RankList(silent), s.cfg.connect)
	case s.portSeen < want:
		return fmt.Errorf("connect: %d of %d PMI_PORT tasks connected within %v", s.portSeen, want, s.cfg.connect)
	}
	return nil
}

// shutdown ends everything within the shutdown time-out, in an order
// that loses no answer. The job has ended already (every caller fails it
// first), but answers may still be on their way: from a connection reader
// (a task's EOF failed the job and answers its peers) and from the job's
// backend calls (a fence the backend failed). So: stop feeding the job
// (readers and the accept loop end; sockets stay open for writing), then
// wait for the job's backend calls, then let each connection drain its
// queued answers and close.
func (s *server) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.shutdown)
	defer cancel()
	// A no-op when the job has ended; it answers anything pending if not.
	s.job.Fail(fmt.Errorf("%w: shim shutting down", plugin.ErrAborted))
	res := s.job.Result()
	reason := "job finished"
	switch {
	case res.Aborted:
		reason = fmt.Sprintf("job aborted with status %d", res.Status)
	case res.Err != nil:
		reason = res.Err.Error()
	}
	if s.ready {
		if err := s.notify.stopping(reason); err != nil {
			s.log.Debug().Err(err).Msg("report stopping")
		}
	}

	s.mu.Lock()
	s.closing = true
	conns := append([]*taskConn(nil), s.conns...)
	s.mu.Unlock()
	if s.port != nil {
		_ = s.port.Close()
	}
	for _, tc := range conns {
		tc.stopReading()
	}
	// Readers return at once: their reads hit a past deadline.
	s.readers.Wait()

	if err := s.job.Shutdown(ctx); err != nil {
		s.log.Warn().Err(err).Msg("PMI engine did not stop in time")
	}

	for _, tc := range conns {
		if tc.unclosed != nil {
			tc.unclosed.Close(errStopped)
		}
		_ = tc.Close()
	}
	drained := make(chan struct{})
	go func() {
		s.writers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.log.Warn().Dur("timeout", s.cfg.shutdown).Msg("task connections did not drain in time; closing them")
		for _, tc := range conns {
			tc.abort(net.ErrClosed)
		}
		<-drained
	}
}

// bridgeTimeouts are the engine's time-outs. A call to the backend may wait
// for the backend to come up, which the bootstrap allows backend_start
// for: no backend call gives up sooner than that.
func (c *config) bridgeTimeouts() bridge.Timeouts {
	t := c.timeouts
	t.Backend = max(t.Backend, bridge.DefaultBackendTimeout, c.backendStart)
	return t
}
