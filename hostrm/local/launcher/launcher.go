package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/execpath"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
	"github.com/gopmi/gopmi/shim/sockdir"
)

// Environment variables that point gopmi run at binaries, for tests and
// development trees.
const (
	// EnvShim overrides where gopmi-shim is found.
	EnvShim = "GOPMI_SHIM"
	// EnvRMLocal overrides where gopmi-rm-local is found.
	EnvRMLocal = "GOPMI_RM_LOCAL"
	// EnvPMIxShim overrides where gopmi-pmix is found.
	EnvPMIxShim = "GOPMI_PMIX_SHIM"
)

// Binary names.
const (
	ShimBinary    = "gopmi-shim"
	RMLocalBinary = "gopmi-rm-local"
	// PMIxBinary is the shim with the PMIx face (cgo, libpmix): built
	// only where libpmix is (make build).
	PMIxBinary = "gopmi-pmix"
)

// Defaults of Config.
const (
	DefaultStartTimeout = plugin.DefaultStartTimeout
	DefaultKillGrace    = 2 * time.Second
	DefaultShimGrace    = 3 * time.Second
	DefaultMaxVal       = 1024
	DefaultFenceTimeout = plugin.DefaultFenceTimeout
)

// DefaultFenceMode is the fence mode a Config gets when it names none.
var DefaultFenceMode = serve.DefaultFenceMode

// Launcher is the step-daemon role of `gopmi run`: it starts the tasks of
// every job of the run and serves them PMI, waits for every process and
// decides the exit status. A job on one node is served from this
// process (package serve, with the universe as its in-process backend);
// with PPN every simulated node of a job gets a gopmi-shim process, whose
// gopmi-rm-local backend reaches the universe on a unix socket in a
// private directory.
type Launcher struct {
	cfg      Config
	face     face // how the tasks reach their server (face.go)
	log      zerolog.Logger
	out      io.Writer
	shims    bool // nodes are served by gopmi-shim processes
	fence    shimv1.FenceMode
	shimPath string // with shims
	rmPath   string // with shims
	start    *starter
	addr     string // the universe's address once served; guarded by mu
	// A rendezvous's server (rendezvous.go) needs gopmi-pmix and
	// gopmi-rm-local, and the universe served: univStop stops what
	// ensureUniverse served, guarded by univMu.
	rendezvous bool
	pmixPath   string
	univMu     sync.Mutex
	univStop   func()
	u          *local.Universe
	hints      hints // explains failed tasks by their program
	seq        int   // notify socket names; guarded by mu

	// Test hooks: onTaskStart is called (without mu) after a task
	// started, onJobEnd (with mu held) when a job's last process ended.
	onTaskStart func(p plugin.Proc, pid int)
	onJobEnd    func(nspace string)

	mu       sync.Mutex
	jobs     []*runJob     // guarded by mu
	live     int           // jobs not yet ended; guarded by mu
	finished bool          // done is closed; guarded by mu
	adopted  bool          // the singleton joined its job; guarded by mu
	done     chan struct{} // closed when every job ended
	ending   chan struct{} // closed when the run starts to end
	stopped  bool          // Run is returning: no more timers; guarded by mu
	pol      *policy       // guarded by mu
	tick     *time.Timer   // the policy's next tick; guarded by mu
	timers   []*time.Timer // grace periods; guarded by mu
	// quiet is set while the run ends at the default log levels: the
	// servers' complaints about being stopped are consequences, not news.
	quiet atomic.Bool
}

// New checks the configuration and finds the binaries it needs.
// Nothing is started before Run.
func New(cfg Config) (*Launcher, error) {
	if len(cfg.Apps) == 0 {
		return nil, errors.New("no program to run")
	}
	for i, a := range cfg.Apps {
		if a.Procs < 1 {
			return nil, fmt.Errorf("app %d (%s): %d processes", i, a.Path, a.Procs)
		}
		if a.Path == "" {
			return nil, fmt.Errorf("app %d: no program", i)
		}
	}
	fenceMode, err := serve.ParseFenceMode(cfg.FenceMode)
	if err != nil {
		return nil, &SettingError{Setting: "-fence-mode", Msg: err.Error()}
	}
	if cfg.PPN < 0 {
		return nil, fmt.Errorf("ppn %d is negative", cfg.PPN)
	}
	if s := cfg.Singleton; s != nil && (cfg.PPN > 0 || cfg.PMIPort || len(cfg.Apps) != 1 || cfg.Apps[0].Procs != 1 || s.Conn == nil || s.Pid <= 0) {
		return nil, errors.New("a singleton is one rank, served here: no -ppn, no -pmi-port, one program of one process, its connection and its pid")
	}
	setDefaults(&cfg)
	if cfg.Wdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		cfg.Wdir = wd
	} else if abs, err := filepath.Abs(cfg.Wdir); err == nil {
		cfg.Wdir = abs
	}
	if st, err := os.Stat(cfg.Wdir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("working directory %s is not a directory", cfg.Wdir)
	}
	for i, e := range cfg.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return nil, fmt.Errorf("environment entry %d %q is not KEY=VALUE", i, e)
		}
	}
	if cfg.Singleton != nil {
		// A singleton asked for PMI (MPICH's mpiexec -pmi_args).
		cfg.PMIx, cfg.PMIxAuto = false, false
	}
	if cfg.PMIxAuto && !cfg.PMIx && !cfg.PMIPort && openMPIApps(cfg.Apps, cfg.Wdir) {
		self, _ := os.Executable()
		if _, err := FindBinary(PMIxBinary, cfg.PMIxPath, EnvPMIxShim, self, ""); err == nil {
			cfg.PMIx = true
			cfg.Logger.Debug().Msg("an Open MPI program: serving PMIx")
		} else {
			cfg.Logger.Debug().Err(err).Msg("an Open MPI program, and no gopmi-pmix to serve it")
		}
	}
	l := &Launcher{
		cfg:    cfg,
		face:   faceOf(cfg),
		log:    cfg.Logger,
		out:    cfg.Stderr,
		done:   make(chan struct{}),
		ending: make(chan struct{}),
		pol:    newPolicy(),
		fence:  fenceMode,
	}
	l.shims = l.face.needsShims(cfg.PPN)
	// What a shim would refuse in its bootstrap is refused here, in
	// either mode, before anything starts.
	if _, err := serve.NewConfig(l.bootstrap(&local.JobSpec{Job: local.Layout("check", cfg.Apps, 0, cfg.Hostname, cfg.UniverseSize)}, 0, "")); err != nil {
		return nil, settingError(err)
	}
	if l.shims {
		self, _ := os.Executable()
		var err error
		if l.face.pmix() {
			if l.shimPath, err = FindBinary(PMIxBinary, cfg.PMIxPath, EnvPMIxShim, self, ""); err != nil {
				return nil, fmt.Errorf("%w: gopmi-pmix serves PMIx and is built where libpmix is (apt-get install libpmix-dev, then make install)", err)
			}
		} else if l.shimPath, err = FindBinary(ShimBinary, cfg.ShimPath, EnvShim, self, ""); err != nil {
			return nil, err
		}
		if l.rmPath, err = FindBinary(RMLocalBinary, cfg.RMPath, EnvRMLocal, self, l.shimPath); err != nil {
			return nil, err
		}
	}
	l.rendezvous = l.rendezvousOn()
	l.u = local.NewUniverse(local.UniverseOptions{
		Hostname:     cfg.Hostname,
		PPN:          cfg.PPN,
		UniverseSize: cfg.UniverseSize,
		Wdir:         cfg.Wdir,
		FenceTimeout: cfg.FenceTimeout,
		Launch:       l.launch,
		OnAbort:      l.onAbort,
		OnProcFailed: l.onProcFailed,
		Stderr:       cfg.Stderr,
		Logger:       cfg.Logger,
		Version:      cfg.Version,
		Beyond:       cfg.Beyond,
	})
	return l, nil
}

// Universe returns the run's universe.
func (l *Launcher) Universe() *local.Universe { return l.u }

// Run starts the job and waits until every task and server of every job
// of the run has ended. It returns the exit status for gopmi run; an
// error means nothing could be started (the status is then 1). If ctx
// ends, the run is torn down as for SIGTERM.
func (l *Launcher) Run(ctx context.Context) (int, error) {
	apps := make([]local.AppSpec, len(l.cfg.Apps))
	for i, a := range l.cfg.Apps {
		path, err := execpath.Command(a.Path, l.cfg.Wdir, "", os.Getenv("PATH"))
		if err != nil {
			return 1, err
		}
		a.Path = path
		if a.Dir == "" {
			a.Dir = l.cfg.Wdir
		}
		apps[i] = a
	}
	// A task connection costs two fds until the server and the task hold
	// their ends; gopmi run's own needs are small.
	var size uint64
	for _, a := range apps {
		size += uint64(a.Procs)
	}
	if need, have := 2*size+uint64(openFDs())+64, fdLimit(); have > 0 && need > have {
		return 1, fmt.Errorf("a job of %d ranks needs about %d file descriptors, the limit is %d: raise it (ulimit -n)", size, need, have)
	}

	if l.shims {
		sockdir.Sweep() // what shims killed with an earlier run left
	}
	if l.shims || l.cfg.Beyond != nil {
		stop, err := l.serveUniverse()
		if err != nil {
			return 1, err
		}
		defer stop()
	}
	l.start = newStarter()
	defer func() {
		l.univMu.Lock()
		if l.univStop != nil {
			l.univStop()
		}
		l.univMu.Unlock()
		l.u.Close()
		l.start.close()
		l.mu.Lock()
		l.stopped = true
		if l.tick != nil {
			l.tick.Stop()
		}
		for _, t := range l.timers {
			t.Stop()
		}
		l.mu.Unlock()
	}()

	spec, err := l.u.NewJob(apps, "", false, nil)
	if err != nil {
		return 1, err
	}
	if err := l.launch(ctx, spec); err != nil {
		l.mu.Lock()
		l.applyLocked(l.pol.startFailed(err))
		l.mu.Unlock()
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		l.Signal(syscall.SIGTERM)
		<-l.done
	}
	l.mu.Lock()
	lines, status := l.pol.status()
	l.printLocked(lines)
	l.mu.Unlock()
	if l.cfg.OnEnd != nil {
		l.cfg.OnEnd(status, lines)
	}
	return status, nil
}

// universeAddr is where the universe is served, "" before it is.
func (l *Launcher) universeAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

// ensureUniverse serves the universe, unless it is served already: a
// rendezvous's PMIx server (a process of its own) needs it, in a run
// that did not.
func (l *Launcher) ensureUniverse() error {
	l.univMu.Lock()
	defer l.univMu.Unlock()
	if l.universeAddr() != "" {
		return nil
	}
	stop, err := l.serveUniverse()
	if err != nil {
		return err
	}
	l.univStop = stop
	return nil
}

// serveUniverse serves the universe to the shims' backends (and the node
// daemon) on an abstract unix socket, and returns what stops it.
func (l *Launcher) serveUniverse() (stop func(), err error) {
	ln, addr, err := link.ListenPrivate("universe", l.log)
	if err != nil {
		return nil, fmt.Errorf("listen for the universe: %w", err)
	}
	l.mu.Lock()
	l.addr = addr
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- link.Serve(ctx, ln, l.u)
	}()
	return func() {
		l.u.Close()
		cancel()
		if err := <-served; err != nil {
			l.log.Warn().Err(err).Msg("universe server")
		}
	}, nil
}

// applyLocked carries out what the policy decided. Called with mu held.
func (l *Launcher) applyLocked(fx effects) {
	l.printLocked(fx.print)
	for _, p := range fx.sigterm {
		for _, rj := range l.jobs {
			if rj.spec.Job.Nspace != p.Nspace {
				continue
			}
			for _, t := range rj.tasks {
				if t != nil && !t.exited && (p.Rank == plugin.RankWildcard || p.Rank == t.proc.Rank) {
					l.signalTask(t, syscall.SIGTERM)
				}
			}
		}
	}
	if fx.end != 0 {
		l.terminateLocked(fx.end)
	}
	if fx.kill {
		l.killAllLocked(syscall.SIGKILL)
	}
	if at, ok := l.pol.nextTick(); ok && !l.stopped {
		d := time.Until(at)
		if l.tick == nil {
			l.tick = time.AfterFunc(d, l.onTick)
		} else {
			l.tick.Reset(d)
		}
	}
}

// onTick gives the policy its time.
func (l *Launcher) onTick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.applyLocked(l.pol.tick(time.Now()))
	}
}

// printLocked writes user-facing lines to stderr.
func (l *Launcher) printLocked(lines []string) {
	for _, s := range lines {
		fmt.Fprintln(l.out, s)
	}
}

// after runs f (with mu held) after d, unless the run ended.
// Called with mu held.
func (l *Launcher) after(d time.Duration, f func()) {
	if l.stopped {
		return
	}
	l.timers = append(l.timers, time.AfterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.stopped {
			f()
		}
	}))
}

// Signal handles a signal sent to gopmi run: SIGUSR1 dumps the state;
// SIGINT, SIGTERM and SIGHUP end the run (the first one decides the exit
// status, 128+signal); a second one while the run is ending kills every
// process at once.
func (l *Launcher) Signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if s == syscall.SIGUSR1 {
		l.Dump(l.out)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyLocked(l.pol.signalled(s))
}

// terminateLocked ends the run: every task gets SIGTERM (SIGINT first
// when the run was interrupted), every server SIGTERM, and whatever is
// left after the grace period SIGKILL. Called with mu held.
func (l *Launcher) terminateLocked(sig syscall.Signal) {
	if isClosed(l.ending) {
		return
	}
	close(l.ending)
	switch l.cfg.LogLevel {
	case "warn", "error", "fatal", "panic", "disabled":
		l.quiet.Store(true)
	}
	grace := l.cfg.KillGrace
	if sig == syscall.SIGINT {
		l.signalTasksLocked(nil, syscall.SIGINT)
		l.after(grace/2, func() { l.signalTasksLocked(nil, syscall.SIGTERM) })
	} else {
		l.signalTasksLocked(nil, syscall.SIGTERM)
	}
	l.signalServersLocked(nil, syscall.SIGTERM)
	l.after(grace, func() { l.killAllLocked(syscall.SIGKILL) })
}

func (l *Launcher) killAllLocked(sig syscall.Signal) {
	l.signalTasksLocked(nil, sig)
	l.signalServersLocked(nil, sig)
}

// terminating reports whether the run is being torn down. Called with mu
// held.
func (l *Launcher) terminating() bool { return isClosed(l.ending) }

// signalTasksLocked signals the live tasks of job (every job when nil).
func (l *Launcher) signalTasksLocked(only *runJob, sig syscall.Signal) {
	for _, rj := range l.jobs {
		if only != nil && rj != only {
			continue
		}
		for _, t := range rj.tasks {
			if t != nil && !t.exited {
				l.signalTask(t, sig)
			}
		}
	}
}

func (l *Launcher) signalTask(t *runTask, sig syscall.Signal) {
	if isZombie(t.pid) {
		return
	}
	t.signalled = true
	_ = syscall.Kill(t.pid, sig)
}

// signalServersLocked stops the live servers of job (every job when
// nil): a shim gets sig, a node served here is stopped whatever sig is.
func (l *Launcher) signalServersLocked(only *runJob, sig syscall.Signal) {
	for _, rj := range l.jobs {
		if only != nil && rj != only {
			continue
		}
		for _, n := range rj.nodes {
			n.stop(sig)
		}
	}
}

// onAbort is the universe's OnAbort.
func (l *Launcher) onAbort(ev local.AbortEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyLocked(l.pol.aborted(time.Now(), ev))
}

// onProcFailed is the universe's OnProcFailed: a task ended before
// finalize, which fails the run.
func (l *Launcher) onProcFailed(p plugin.Proc, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.terminating() {
		l.log.Debug().Str("proc", p.String()).Str("reason", reason).Msg("proc failed while ending")
	}
	l.applyLocked(l.pol.procFailed(time.Now(), p, reason))
}

// Dump writes the universe's and the launcher's state (SIGUSR1).
func (l *Launcher) Dump(w io.Writer) {
	if l.u != nil {
		l.u.Dump(w)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rj := range l.jobs {
		var servers []string
		for _, n := range rj.nodes {
			servers = append(servers, n.describe())
		}
		fmt.Fprintf(w, "  launcher job %s: %d tasks running, servers: %s\n", rj.spec.Job.Nspace, rj.running, strings.Join(servers, "; "))
	}
}
