package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/serve"
	"github.com/gopmi/gopmi/shim/sockdir"
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
	// Backend, when set, serves the job's backend in this process instead
	// of starting gopmi-rm-<name> through go-plugin: a resource manager's
	// binary that links the shim (gopmi-slurm shim) saves a process and a
	// handshake per node. Run calls it when the job first needs its
	// backend, with the bootstrap's backend spec, and closes the result
	// (when it is an io.Closer) after the job. The backend then shares the
	// shim's fate: there is no backend process to die on its own. ctx
	// carries the shim's logger for the backend (zerolog.Ctx), with the
	// job's fields.
	Backend func(ctx context.Context, spec serve.BackendSpec) (plugin.Full, error)

	// StartPlugin starts gopmi-rm-<name> as a process when Backend is
	// nil: gopmi-shim passes shim/goplugin.Start. The package does not
	// link go-plugin itself, so that a binary serving its backend in
	// process (Backend) does not pay for it at every start.
	StartPlugin StartFunc

	// backendEnv is added to the backend process's environment (tests).
	backendEnv []string
}

// Main runs the shim as a process and returns its exit status:
// os.Exit(shim.Main(goplugin.Start)) is gopmi-shim's whole main.
func Main(start StartFunc) int {
	return serve.ExitCode(Run(context.Background(), RunConfig{StartPlugin: start}))
}

// Run serves one job on this node until every local task has finalized
// and closed its connection, the job fails, ctx ends or a signal stops it.
// The error says why it ended; serve.ExitCode turns it into the exit
// status.
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
		l.Error().Err(err).Int("exit", serve.ExitCode(err)).Msg("gopmi-shim: exiting")
	} else {
		l.Info().Int("exit", serve.ExitOK).Msg("gopmi-shim: every task finished; exiting")
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
	cfg    *serve.Config
	ready  bool
}

// readBootstrapTimed reads the bootstrap within bootstrapTimeout. A
// reader that blocks past it is left behind: the shim exits right after.
func readBootstrapTimed(ctx context.Context, r io.Reader) (*serve.Config, error) {
	type res struct {
		c   *serve.Config
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
		return nil, fmt.Errorf("%w: stdin: no EOF within %v; the step daemon must close stdin after the bootstrap", serve.ErrUsage, bootstrapTimeout)
	case <-ctx.Done():
		return nil, stopped(ctx, "read bootstrap")
	}
}

func (s *server) run(ctx context.Context) error {
	c, err := readBootstrapTimed(ctx, s.rc.Stdin)
	if err != nil {
		return err
	}
	s.cfg = c
	logger := zerolog.New(s.logw).Level(c.LogLevel).With().Timestamp().Logger()
	s.log = logger.With().Str("job", c.Job.Nspace).Int32("node", c.NodeID).Logger()
	s.logp.set(s.log)
	s.log.Debug().Int("tasks", len(c.Tasks)).Str("backend", c.Backend.BinaryName()).Msg("bootstrap read")

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

	// A missing backend binary, the likeliest mistake, fails the start
	// before anything is served.
	path := ""
	if s.rc.Backend == nil {
		if s.rc.StartPlugin == nil {
			fds.close()
			return fmt.Errorf("%w: this shim can neither start a backend process nor serve %s in process", serve.ErrBackend, c.Backend.BinaryName())
		}
		if path, err = s.backendPath(); err != nil {
			fds.close()
			return err
		}
	}

	// The tasks are served from here on, while the backend starts: their
	// local requests need no backend, and those that do wait for it. The
	// backend comes up at once for a job on several nodes (its fences
	// need it), on demand for a job on one node, which may never need it.
	demand := make(chan struct{})
	be := bridge.NewBackend(c.Backend.BinaryName(), func() { close(demand) })
	if len(c.Job.Nodes) > 1 || c.Backend.StartAtOnce {
		be.Need()
	}
	srv, err := serve.Start(ctx, c, serve.Options{Backend: be, Conns: fds.conns, Port: fds.port, Logger: logger})
	if err != nil {
		return err
	}

	// READY means the tasks are served; the backend's own start-up
	// failures come after it, as a job failure with its STATUS.
	if err := s.notify.ready(len(c.Tasks)); err != nil {
		// The launcher asked for readiness and will not hear it: it
		// would wait for its own time-out, so fail now and say why.
		err = fmt.Errorf("report readiness: %w", err)
		be.Fail(err)
		srv.Fail(err)
		_ = srv.Wait(ctx)
		return err
	}
	s.ready = true

	bs := s.startBackendAside(ctx, srv.Job(), be, demand, path)
	defer bs.close(s.log)
	err = srv.Wait(ctx)
	if nerr := s.notify.stopping(srv.Reason()); nerr != nil {
		s.log.Debug().Err(nerr).Msg("report stopping")
	}
	return err
}

// backendStart is the backend's bring-up, run beside the job.
type backendStart struct {
	done chan struct{} // closed when the bring-up ended
	bp   Process       // the running backend; set before done closes
	dir  *sockdir.Dir  // the backend's private socket directory, if made
	stop context.CancelFunc
}

// startBackendAside brings the backend up on its own goroutine once the
// job asks for it (demand closes), and fails the job when the bring-up
// fails or the backend dies. A job that ends cleanly meanwhile cuts the
// start short; one that fails or aborts lets it finish, since the RM must
// hear of that.
func (s *server) startBackendAside(ctx context.Context, job *bridge.Job, be *bridge.Backend, demand <-chan struct{}, path string) *backendStart {
	c := s.cfg
	name := c.Backend.BinaryName()
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
		select {
		case <-demand:
		case <-startCtx.Done():
		}
		if startCtx.Err() != nil {
			be.Fail(errors.New("the job ended before it needed its backend"))
			return
		}
		bp, err := s.bringUpBackend(startCtx, path, be, bs)
		if err != nil {
			be.Fail(err)
			if !endedCleanly(job) {
				s.log.Error().Err(err).Msg("failing the job: its backend did not start")
				job.Fail(err)
			}
			return
		}
		bs.bp = bp
		go func() {
			select {
			case <-bp.Exited():
				err := fmt.Errorf("%w: backend %s exited during the job: %w", serve.ErrBackend, name, plugin.ErrBackendGone)
				s.log.Error().Err(err).Msg("failing the job")
				job.Fail(err)
			case <-job.Done():
			}
		}()
	}()
	return bs
}

// close ends the bring-up (or waits for it, within the backend start
// time-out it runs under) and closes the backend.
func (bs *backendStart) close(log zerolog.Logger) {
	// The job is over and its news delivered (Wait waited for that): a
	// bring-up still waiting or running is no longer needed.
	bs.stop()
	<-bs.done
	if bs.bp != nil {
		if err := bs.bp.Close(); err != nil {
			log.Warn().Err(err).Msg("close backend")
		}
	}
	if bs.dir != nil {
		if err := bs.dir.Remove(); err != nil {
			log.Warn().Err(err).Str("dir", bs.dir.Path).Msg("remove socket dir")
		}
	}
}

// bringUpBackend makes the backend's private socket directory, starts and
// configures the backend, both within the backend start time-out, and
// hands it to be. startCtx cuts it short: the shim stopping (a signal) or
// a job that no longer needs the backend.
func (s *server) bringUpBackend(startCtx context.Context, path string, be *bridge.Backend, bs *backendStart) (Process, error) {
	c := s.cfg
	start, dir := s.rc.StartPlugin, ""
	var sock *sockdir.Dir
	if s.rc.Backend != nil {
		start = inProcess(s.rc.Backend, c.Backend)
	} else {
		// The socket directory is made only for a backend process that
		// starts: most jobs on one node never need theirs.
		var err error
		sockdir.Sweep() // what killed shims left
		if sock, err = sockdir.New(); err != nil {
			return nil, fmt.Errorf("%w: create socket dir: %w", serve.ErrBackend, err)
		}
		bs.dir, dir = sock, sock.Path
	}
	ctx, cancel := context.WithTimeout(startCtx, c.BackendStart)
	defer cancel()
	// Start honours ctx only while it runs (a signal during start-up
	// kills the plugin); afterwards the shim ends the plugin with Close.
	s.log.Debug().Str("path", path).Strs("args", c.Backend.Args).Msg("starting backend")
	bp, err := start(ctx, Launch{
		Path:      path,
		Args:      c.Backend.Args,
		SocketDir: dir,
		Log:       s.log.With().Str("backend", c.Backend.BinaryName()).Logger(),
		Env:       s.rc.backendEnv,
		Timeout:   c.BackendStart,
	})
	if sock != nil && err == nil {
		// The backend is connected and nothing dials its socket again:
		// a shim killed from now on (SIGKILL ends it and its backend at
		// once) leaves no socket or directory behind.
		if rerr := sock.Remove(); rerr == nil {
			bs.dir = nil
		}
	}
	if err != nil {
		switch {
		case startCtx.Err() != nil:
			err = stopped(startCtx, "start "+c.Backend.BinaryName())
		case !errors.Is(err, serve.ErrBackend):
			err = fmt.Errorf("%w: %w", serve.ErrBackend, err)
		}
		return nil, err
	}
	info, attrs, err := serve.Configure(ctx, bp.Backend(), bp.Info(), c)
	if err != nil {
		if cerr := bp.Close(); cerr != nil {
			s.log.Warn().Err(cerr).Msg("close backend")
		}
		if startCtx.Err() != nil {
			err = stopped(startCtx, "configure "+c.Backend.BinaryName())
		}
		return nil, err
	}
	be.Up(bp.Backend(), info, attrs)
	s.log.Info().Int("tasks", len(c.Tasks)).Str("backend", c.Backend.BinaryName()).Str("backend_version", info.Version).
		Msg("backend serving")
	return bp, nil
}

// endedCleanly reports whether the job has ended with every task done.
func endedCleanly(job *bridge.Job) bool {
	select {
	case <-job.Done():
	default:
		return false
	}
	res := job.Result()
	return res.Err == nil && !res.Aborted
}

// stopped is the error for a start-up cut short by a signal or the end of
// Run's context: the job failed before it began.
func stopped(ctx context.Context, step string) error {
	return fmt.Errorf("%w: %s: shim stopped: %w", serve.ErrJobFailed, step, context.Cause(ctx))
}

// backendPath resolves the backend binary.
func (s *server) backendPath() (string, error) {
	self := s.rc.Executable
	if self == "" {
		if p, err := os.Executable(); err == nil {
			self = p
		}
	}
	return resolveBackend(s.cfg.Backend, self, s.getenv)
}
