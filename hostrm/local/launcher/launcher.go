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
)

// Binary names.
const (
	ShimBinary    = "gopmi-shim"
	RMLocalBinary = "gopmi-rm-local"
)

// Defaults of Config.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultKillGrace    = 2 * time.Second
	DefaultShimGrace    = 3 * time.Second
	DefaultMaxVal       = 1024
	DefaultFenceTimeout = plugin.DefaultFenceTimeout
)

// DefaultFenceMode is the fence mode a Config gets when it names none.
var DefaultFenceMode = serve.DefaultFenceMode

// FenceModes lists the names Config.FenceMode accepts, for a usage
// message: "collect, lazy or modex".
func FenceModes() string { return serve.FenceModeNames() }

// Config is one `gopmi run`.
type Config struct {
	// Apps are the executables (MPMD: several), each with Procs tasks;
	// Path is what the user typed, resolved against Wdir and PATH.
	Apps []local.AppSpec
	// PPN splits the ranks into simulated nodes of PPN ranks (block
	// distribution), each served by a gopmi-shim process, as under a
	// resource manager; 0 puts every rank on one node, served by gopmi
	// run itself.
	PPN int
	// Env holds KEY=VALUE entries added to every task's environment.
	Env []string
	// PMIPort gives tasks PMI_PORT and PMI_ID instead of PMI_FD.
	PMIPort bool
	// Singleton, when set, is the run's first job: one rank already
	// running, which asked for a process manager (see Singleton). Apps
	// then holds its one program, which is not started.
	Singleton *Singleton
	// UniverseSize is served as universeSize; default the job's size.
	UniverseSize int32
	// FenceMode names the fence mode: collect (the default), lazy or
	// modex (serve.ParseFenceMode).
	FenceMode string
	// FenceTimeout bounds every fence; default DefaultFenceTimeout.
	FenceTimeout time.Duration
	// MaxVal is the PMI value length advertised; default 1024.
	MaxVal int
	// MaxKVS bounds the bytes of KVS records a node holds for a job; 0:
	// the shim's default (512 MiB).
	MaxKVS int64
	// LogLevel is the PMI servers' log level (trace ... error); default
	// warn.
	LogLevel string
	// Wdir is the tasks' working directory; default the current one.
	Wdir string

	// ShimPath is gopmi-shim, needed only with PPN; default $GOPMI_SHIM,
	// next to this executable, then PATH.
	ShimPath string
	// RMPath is gopmi-rm-local, needed only with PPN; default
	// $GOPMI_RM_LOCAL, next to this executable, next to the shim, then
	// PATH.
	RMPath string

	// StartTimeout bounds a job's start (shims ready); default 30s.
	StartTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; default 2s.
	KillGrace time.Duration
	// ShimGrace is how long a job's servers may take to end on their own
	// after its last task exited; default 3s.
	ShimGrace time.Duration

	// Stdin goes to rank 0 of the first job; nil means /dev/null.
	Stdin *os.File
	// Stdout and Stderr are the tasks'; default os.Stdout, os.Stderr.
	// Stderr also receives gopmi run's own messages and the servers' logs.
	Stdout, Stderr io.Writer
	// Hostname names this machine; default os.Hostname().
	Hostname string
	// Version is reported by the backend's GetInfo.
	Version string
	// Logger is for gopmi run's own debug logs.
	Logger zerolog.Logger

	// Beyond, when set, is the node daemon's client: names wider than one
	// job, and jobs of other runs (local.UniverseOptions.Beyond). The run
	// then serves its universe for the daemon to relay other runs' reads.
	Beyond local.Beyond
	// OnJob, when set, is told of each job before its tasks start (pids
	// nil) and once they all started (their pids by rank), with the
	// address the run serves its universe on when it does (with Names):
	// the node daemon registers it, and relays other runs' connects and
	// reads of its keys there.
	OnJob func(job plugin.Job, cmd string, pids []int, universe string)
	// OnEnd, when set, is told the run's exit status and the lines it
	// printed about how it ended (the node daemon keeps them for gopmi
	// log).
	OnEnd func(status int, lines []string)
}

// Launcher is the step-daemon role of `gopmi run`: it starts the tasks of
// every job of the run and serves them PMI, waits for every process and
// decides the exit status. A job on one node is served from this
// process (package serve, with the universe as its in-process backend);
// with PPN every simulated node of a job gets a gopmi-shim process, whose
// gopmi-rm-local backend reaches the universe on a unix socket in a
// private directory.
type Launcher struct {
	cfg      Config
	log      zerolog.Logger
	out      io.Writer
	shims    bool // nodes are served by gopmi-shim processes
	fence    shimv1.FenceMode
	shimPath string // with shims
	rmPath   string // with shims
	start    *starter
	addr     string // the universe's address, with shims
	u        *local.Universe
	hints    hints // explains failed tasks by their program
	seq      int   // notify socket names; guarded by mu

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
	l := &Launcher{
		cfg:    cfg,
		log:    cfg.Logger,
		out:    cfg.Stderr,
		shims:  cfg.PPN > 0,
		done:   make(chan struct{}),
		ending: make(chan struct{}),
		pol:    newPolicy(),
		fence:  fenceMode,
	}
	// What a shim would refuse in its bootstrap is refused here, in
	// either mode, before anything starts.
	if _, err := serve.NewConfig(l.bootstrap(&local.JobSpec{Job: local.Layout("check", cfg.Apps, 0, cfg.Hostname, cfg.UniverseSize)}, 0, "")); err != nil {
		return nil, settingError(err)
	}
	if l.shims {
		self, _ := os.Executable()
		var err error
		if l.shimPath, err = findBinary(ShimBinary, cfg.ShimPath, EnvShim, self, ""); err != nil {
			return nil, err
		}
		if l.rmPath, err = findBinary(RMLocalBinary, cfg.RMPath, EnvRMLocal, self, l.shimPath); err != nil {
			return nil, err
		}
	}
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

// SettingError is a setting of Config that gopmi run cannot serve a job
// with, named by the gopmi run flag that sets it.
type SettingError struct {
	Setting string // "-max-val"
	Msg     string // "10 is below the minimum 64"
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Msg }

// settingFlags name a bootstrap field by the flag that sets it.
var settingFlags = map[string]string{
	"limits.val_max":    "-max-val",
	"limits.kvs_max":    "-max-kvs",
	"timeouts.fence":    "-timeout",
	"timeouts.shutdown": "the kill grace period",
	"job.universe_size": "-usize",
	"log_level":         "-log-level",
	"fence_mode":        "-fence-mode",
}

// settingError turns a bootstrap's refusal into the setting's.
func settingError(err error) error {
	var fe *serve.FieldError
	if errors.As(err, &fe) {
		if name, ok := settingFlags[fe.Field]; ok {
			return &SettingError{Setting: name, Msg: fe.Msg}
		}
	}
	return &SettingError{Setting: "settings", Msg: err.Error()}
}

// setDefaults fills in what cfg leaves at zero.
func setDefaults(cfg *Config) {
	if cfg.FenceMode == "" {
		cfg.FenceMode = DefaultFenceMode
	}
	if cfg.FenceTimeout <= 0 {
		cfg.FenceTimeout = DefaultFenceTimeout
	}
	if cfg.MaxVal <= 0 {
		cfg.MaxVal = DefaultMaxVal
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.ShimGrace <= 0 {
		cfg.ShimGrace = DefaultShimGrace
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
		if cfg.Hostname == "" {
			cfg.Hostname = "localhost"
		}
	}
}

// findBinary locates one of gopmi's binaries: the explicit path, the
// environment override, next to this executable or a sibling binary (and
// their symlink targets), then PATH.
func findBinary(name, explicit, envVar, self, sibling string) (string, error) {
	if explicit == "" {
		explicit = os.Getenv(envVar)
	}
	if explicit != "" {
		if err := execpath.Check(explicit); err != nil {
			return "", fmt.Errorf("%s: %s is not an executable file: %w", name, explicit, err)
		}
		return filepath.Abs(explicit)
	}
	dirs := append(execpath.Beside(self), execpath.Beside(sibling)...)
	p, searched := execpath.Find(name, append(dirs, execpath.PathDirs(os.Getenv("PATH"))...)...)
	if p == "" {
		return "", fmt.Errorf("cannot find %s in %s (next to gopmi, then PATH); install it there or set %s", name, strings.Join(searched, ":"), envVar)
	}
	return p, nil
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

// serveUniverse serves the universe to the shims' backends (and the node
// daemon) on an abstract unix socket, and returns what stops it.
func (l *Launcher) serveUniverse() (stop func(), err error) {
	ln, addr, err := link.ListenPrivate("universe", l.log)
	if err != nil {
		return nil, fmt.Errorf("listen for the universe: %w", err)
	}
	l.addr = addr
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
