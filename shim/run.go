package shim

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

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
	// BackendNames, when set, are the backends Backend serves; any other
	// is started through StartPlugin (gopmi-pmix serves gopmi run's
	// "local" backend in process, and starts a vendor's). Empty: Backend
	// serves every one.
	BackendNames []string

	// StartPlugin starts gopmi-rm-<name> as a process when Backend is
	// nil: gopmi-shim passes shim/goplugin.Start. The package does not
	// link go-plugin itself, so that a binary serving its backend in
	// process (Backend) does not pay for it at every start.
	StartPlugin StartFunc

	// PMIx serves a PMIx job's tasks (bootstrap pmix): gopmi-pmix passes
	// shim/pmix's face. nil in gopmi-shim, which links no libpmix and
	// refuses such a job.
	PMIx PMIxFace
	// backendEnv is added to the backend process's environment (tests).
	backendEnv []string
}

// Main runs the shim as a process and returns its exit status:
// os.Exit(shim.Main(goplugin.Start)) is gopmi-shim's whole main.
func Main(start StartFunc) int {
	return serve.ExitCode(Run(context.Background(), RunConfig{StartPlugin: start}))
}

// MainWith is Main with the rest of RunConfig: gopmi-pmix's main passes
// its PMIx face.
func MainWith(rc RunConfig) int {
	return serve.ExitCode(Run(context.Background(), rc))
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
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGHUP)
		defer func() {
			// A step daemon's "every task ended" may come as the shim
			// ends on its own: it must not kill it. Ignored first, it
			// never has its default action (which ends the process).
			signal.Ignore(syscall.SIGHUP)
			signal.Stop(ch)
		}()
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
				if s == syscall.SIGHUP {
					l.Debug().Msg("the step daemon says every task ended")
					stop(errTasksEnded)
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
	// dir is the backend's private socket directory while it exists;
	// written by the bring-up, read after serve.Hosted.Close waited for
	// it.
	dir *sockdir.Dir
}

// readBootstrapTimed reads the bootstrap within bootstrapTimeout. A
// reader that blocks past it is left behind: the shim exits right after.
func readBootstrapTimed(ctx context.Context, r io.Reader) (*serve.Config, bool, error) {
	type res struct {
		c     *serve.Config
		plain bool
		err   error
	}
	ch := make(chan res, 1)
	go func() {
		c, plain, err := parseBootstrap(r)
		ch <- res{c, plain, err}
	}()
	t := time.NewTimer(bootstrapTimeout)
	defer t.Stop()
	select {
	case v := <-ch:
		return v.c, v.plain, v.err
	case <-t.C:
		return nil, false, fmt.Errorf("%w: stdin: no EOF within %v; the step daemon must close stdin after the bootstrap", serve.ErrUsage, bootstrapTimeout)
	case <-ctx.Done():
		return nil, false, serve.Stopped(ctx, "shim", "read bootstrap")
	}
}

func (s *server) run(ctx context.Context) error {
	c, plain, err := readBootstrapTimed(ctx, s.rc.Stdin)
	if err != nil {
		return err
	}
	s.cfg = c
	logger := zerolog.New(s.logw).Level(c.LogLevel).With().Timestamp().Logger()
	s.log = logger.With().Str("job", c.Job.Nspace).Int32("node", c.NodeID).Logger()
	s.logp.set(s.log)
	s.log.Debug().Int("tasks", len(c.Tasks)).Str("backend", c.Backend.BinaryName()).Msg("bootstrap read")
	if !plain {
		// Every writer of ours writes the plain form (its names are
		// generated from the proto): one that did not is a bug, which
		// costs the start protojson's first use.
		s.log.Warn().Msg(notPlainMsg)
	}
	if c.PMIx {
		return s.runPMIx(ctx)
	}

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
	path, err := s.backendBinary()
	if err != nil {
		fds.close()
		return err
	}

	// The serving loop and its host protocol (serve.Host): tasks served at
	// once, READY, the backend brought up beside the job. What is the
	// shim's own: readiness by sd_notify, the backend as a plugin process
	// (or in process) with its private socket directory, STOPPING.
	h, err := serve.Host(ctx, c, serve.HostOptions{
		Conns:  fds.conns,
		Port:   fds.port,
		Logger: logger,
		Name:   "shim",
		Start: func(ctx context.Context) (*serve.Started, error) {
			return s.startBackend(ctx, path)
		},
		// READY means the tasks are served; the backend's own start-up
		// failures come after it, as a job failure with its STATUS.
		Ready: func() error {
			if err := s.notify.ready(len(c.Tasks)); err != nil {
				// The launcher asked for readiness and will not hear
				// it: it would wait for its own time-out, so fail now
				// and say why.
				return fmt.Errorf("report readiness: %w", err)
			}
			s.ready = true
			return nil
		},
		LogBackend: true,
	})
	if err != nil {
		return err
	}
	defer func() {
		h.Close()
		s.removeSocketDir()
	}()
	err = h.Wait(ctx)
	if nerr := s.notify.stopping(h.Reason()); nerr != nil {
		s.log.Debug().Err(nerr).Msg("report stopping")
	}
	return err
}

// startBackend starts the backend, as serve.Host asks within the backend
// start time-out: a plugin process in its private socket directory, or
// RunConfig.Backend in this process. ctx cut short (a signal, a job that
// no longer needs it) kills a plugin still starting; afterwards the shim
// ends it with Close.
func (s *server) startBackend(ctx context.Context, path string) (*serve.Started, error) {
	c := s.cfg
	start, dir := s.rc.StartPlugin, ""
	var sock *sockdir.Dir
	if s.inProcess() {
		start = inProcess(s.rc.Backend, c.Backend)
	} else {
		// The socket directory is made only for a backend process that
		// starts: most jobs on one node never need theirs.
		var err error
		sockdir.Sweep() // what killed shims left
		if sock, err = sockdir.New(); err != nil {
			return nil, fmt.Errorf("%w: create socket dir: %w", serve.ErrBackend, err)
		}
		s.dir, dir = sock, sock.Path
	}
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
			s.dir = nil
		}
	}
	if err != nil {
		return nil, err
	}
	return &serve.Started{Backend: bp.Backend(), Info: bp.Info(), Exited: bp.Exited(), Close: bp.Close}, nil
}

// inProcess reports whether the job's backend is served in this process
// (RunConfig.Backend, for the names it serves).
func (s *server) inProcess() bool {
	names := s.rc.BackendNames
	return s.rc.Backend != nil && (len(names) == 0 || slices.Contains(names, s.cfg.Backend.Name))
}

// backendBinary is the backend process's executable, "" when the backend
// is served in process (RunConfig.Backend); a shim that can do neither,
// or a binary not found, is an error.
func (s *server) backendBinary() (string, error) {
	if s.inProcess() {
		return "", nil
	}
	if s.rc.StartPlugin == nil {
		return "", fmt.Errorf("%w: this shim can neither start a backend process nor serve %s in process", serve.ErrBackend, s.cfg.Backend.BinaryName())
	}
	return s.backendPath()
}

// removeSocketDir removes what a backend that did not start left of its
// socket directory. serve.Host's Close has waited for the bring-up.
func (s *server) removeSocketDir() {
	if s.dir == nil {
		return
	}
	if err := s.dir.Remove(); err != nil {
		s.log.Warn().Err(err).Str("dir", s.dir.Path).Msg("remove socket dir")
	}
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
