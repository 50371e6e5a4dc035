package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
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
)

// Fence modes accepted by Config.FenceMode.
const (
	FenceModeCollect = "collect"
	FenceModeLazy    = "lazy"
	FenceModeModex   = "modex"
)

// Config is one `gopmi run`.
type Config struct {
	// Apps are the executables (MPMD: several), each with Procs tasks;
	// Path is what the user typed, resolved against Wdir and PATH.
	Apps []AppSpec
	// PPN splits the ranks into simulated nodes of PPN ranks (block
	// distribution), one shim each; 0 means one node.
	PPN int
	// Env holds KEY=VALUE entries added to every task's environment.
	Env []string
	// PMIPort gives tasks PMI_PORT and PMI_ID instead of PMI_FD.
	PMIPort bool
	// UniverseSize is served as universeSize; default the job's size.
	UniverseSize int32
	// FenceMode is collect (default), lazy or modex.
	FenceMode string
	// FenceTimeout bounds every fence; default DefaultFenceTimeout.
	FenceTimeout time.Duration
	// MaxVal is the PMI value length advertised; default 1024.
	MaxVal int
	// LogLevel is the shim's log level (trace ... error); default warn.
	LogLevel string
	// Wdir is the tasks' working directory; default the current one.
	Wdir string

	// ShimPath is gopmi-shim; default $GOPMI_SHIM, next to this
	// executable, then PATH.
	ShimPath string
	// RMPath is gopmi-rm-local; default $GOPMI_RM_LOCAL, next to this
	// executable, next to the shim, then PATH.
	RMPath string

	// StartTimeout bounds a job's start (shims ready); default 30s.
	StartTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; default 2s.
	KillGrace time.Duration
	// ShimGrace is how long a job's shims may take to exit on their own
	// after its last task exited; default 3s.
	ShimGrace time.Duration

	// Stdin goes to rank 0 of the first job; nil means /dev/null.
	Stdin *os.File
	// Stdout and Stderr are the tasks'; default os.Stdout, os.Stderr.
	// Stderr also receives gopmi run's own messages and the shims' logs.
	Stdout, Stderr io.Writer
	// Hostname names this machine; default os.Hostname().
	Hostname string
	// Version is reported by the backend's GetInfo.
	Version string
	// Logger is for gopmi run's own debug logs.
	Logger zerolog.Logger
}

// Launcher is the step-daemon role of `gopmi run`: it serves the universe
// on a unix socket in a private directory, starts one gopmi-shim per job
// per simulated node and the tasks, waits for every process and decides
// the exit status.
type Launcher struct {
	cfg      Config
	log      zerolog.Logger
	out      io.Writer
	shimPath string
	rmPath   string
	start    *starter
	dir      string
	addr     string
	u        *Universe
	seq      int // notify socket names; guarded by mu

	// Test hooks: onTaskStart is called (without mu) after a task
	// started, onJobEnd (with mu held) when a job's last process was
	// reaped.
	onTaskStart func(p plugin.Proc, pid int)
	onJobEnd    func(nspace string)

	mu          sync.Mutex
	jobs        []*runJob      // guarded by mu
	live        int            // jobs not yet ended; guarded by mu
	finished    bool           // done is closed; guarded by mu
	done        chan struct{}  // closed when every job ended
	terminating bool           // the run is being torn down; guarded by mu
	ending      chan struct{}  // closed when terminating is set
	stopped     bool           // Run is returning: no more timers; guarded by mu
	abort       *AbortEvent    // the first abort; guarded by mu
	signal      syscall.Signal // the signal that ended the run; guarded by mu
	taskStatus  int            // first failing task's status, -1 if none; guarded by mu
	// failedStatus holds each failed task's status and rootCause the task
	// a shim reported gone before finalize: when tasks fail together (one
	// dies, its peers then fail their barrier) the reported one's status
	// is the run's, whichever was reaped first. Guarded by mu.
	failedStatus map[plugin.Proc]int
	rootCause    *plugin.Proc
	failed       bool          // some other failure (shim, launch, proc failed); guarded by mu
	timers       []*time.Timer // guarded by mu
	pending      []pendingLine // failure lines not printed yet; guarded by mu
	// quiet is set while the run ends at the default log levels: the
	// shims' complaints about being stopped are consequences, not news.
	quiet atomic.Bool
}

// pendingLine is a task failure waiting to be reported.
type pendingLine struct {
	proc     plugin.Proc
	line     string
	signaled bool // the task was killed by a signal
	early    bool // the shim's report of a task gone before finalize
	shim     bool // a shim's exit that reports the job's failure
}

// failureSettle is how long a task's failure waits before it is reported
// and ends the run: an aborting task often exits before its abort request
// reaches the universe, and then the abort, not its echo, is the news.
const failureSettle = 100 * time.Millisecond

// runJob is the launcher's record of one job's processes.
type runJob struct {
	spec      *JobSpec
	launching bool
	nodes     []*runNode
	tasks     []*runTask // by rank; nil until started
	running   int        // tasks started and not reaped
	procs     int        // processes started and not reaped
	graced    bool       // the shims' grace period started
	failure   string
	ended     bool
}

type runNode struct {
	node      plugin.Node
	pid       int
	tail      *tailWriter
	notify    *notifier
	exited    chan struct{} // closed when reaped
	state     *os.ProcessState
	signalled bool
}

type runTask struct {
	proc      plugin.Proc
	pid       int
	exited    bool
	signalled bool
}

// NewLauncher checks the configuration and finds the binaries. Nothing is
// started before Run.
func NewLauncher(cfg Config) (*Launcher, error) {
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
	switch cfg.FenceMode {
	case "":
		cfg.FenceMode = FenceModeCollect
	case FenceModeCollect, FenceModeLazy, FenceModeModex:
	default:
		return nil, fmt.Errorf("fence mode %q: want collect, lazy or modex", cfg.FenceMode)
	}
	if cfg.PPN < 0 {
		return nil, fmt.Errorf("ppn %d is negative", cfg.PPN)
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
	self, _ := os.Executable()
	shim, err := findBinary(ShimBinary, cfg.ShimPath, EnvShim, self, "")
	if err != nil {
		return nil, err
	}
	rm, err := findBinary(RMLocalBinary, cfg.RMPath, EnvRMLocal, self, shim)
	if err != nil {
		return nil, err
	}
	l := &Launcher{
		cfg:        cfg,
		log:        cfg.Logger,
		out:        cfg.Stderr,
		shimPath:   shim,
		rmPath:     rm,
		done:       make(chan struct{}),
		ending:     make(chan struct{}),
		taskStatus: -1,
	}
	l.u = NewUniverse(UniverseOptions{
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
	})
	return l, nil
}

// findBinary locates one of gopmi's binaries: the explicit path, the
// environment override, next to this executable (and its symlink target),
// next to a sibling binary, then PATH.
func findBinary(name, explicit, envVar, self, sibling string) (string, error) {
	if explicit == "" {
		explicit = os.Getenv(envVar)
	}
	if explicit != "" {
		if !isExecutable(explicit) {
			return "", fmt.Errorf("%s: %s is not an executable file", name, explicit)
		}
		return filepath.Abs(explicit)
	}
	var dirs []string
	for _, p := range []string{self, sibling} {
		if p == "" {
			continue
		}
		dirs = append(dirs, filepath.Dir(p))
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
	}
	return "", fmt.Errorf("cannot find %s: not next to %s and not on PATH (install it there or set %s)", name, self, envVar)
}

// Universe returns the run's universe.
func (l *Launcher) Universe() *Universe { return l.u }

// Run starts the job and waits until every task and shim of every job of
// the run has ended. It returns the exit status for gopmi run; an error
// means nothing could be started (the status is then 1). If ctx ends, the
// run is torn down as for SIGTERM.
func (l *Launcher) Run(ctx context.Context) (int, error) {
	apps := make([]AppSpec, len(l.cfg.Apps))
	for i, a := range l.cfg.Apps {
		path, err := findCommand(a.Path, l.cfg.Wdir, "", os.Getenv("PATH"))
		if err != nil {
			return 1, err
		}
		a.Path = path
		if a.Dir == "" {
			a.Dir = l.cfg.Wdir
		}
		apps[i] = a
	}
	// A task connection costs two fds until the shim and the task hold
	// their ends; gopmi run's own needs are small.
	var size uint64
	for _, a := range apps {
		size += uint64(a.Procs)
	}
	if need, have := 2*size+uint64(openFDs())+64, fdLimit(); have > 0 && need > have {
		return 1, fmt.Errorf("a job of %d ranks needs about %d file descriptors, the limit is %d: raise it (ulimit -n)", size, need, have)
	}

	dir, err := privateDir()
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	l.dir = dir
	sock := filepath.Join(dir, "universe.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return 1, fmt.Errorf("listen for the universe: %w", err)
	}
	l.addr = "unix://" + sock
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- direct.Serve(serveCtx, ln, l.u, direct.WithGracePeriod(time.Second), direct.WithLogger(l.log))
	}()
	l.start = newStarter()
	defer func() {
		l.u.Close()
		stopServe()
		if err := <-served; err != nil {
			l.log.Warn().Err(err).Msg("universe server")
		}
		l.start.close()
		l.mu.Lock()
		l.stopped = true
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
		if !l.terminating {
			l.printf("gopmi: %v", err)
		}
		l.failed = true
		l.terminateLocked(syscall.SIGTERM)
		l.mu.Unlock()
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		l.Signal(syscall.SIGTERM)
		<-l.done
	}
	return l.exitStatus(), nil
}

// privateDir makes the run's 0700 directory for sockets, short enough for
// a unix socket path.
func privateDir() (string, error) {
	dir, err := os.MkdirTemp("", "gopmi-")
	if err == nil && len(dir) > 80 {
		os.Remove(dir)
		dir, err = os.MkdirTemp("/tmp", "gopmi-")
	}
	if err != nil {
		return "", fmt.Errorf("private directory: %w", err)
	}
	return dir, nil
}

// exitStatus applies the policy: an abort's status; else 128+signal if a
// signal ended the run; else the first failing task's status; else 1 for
// any other failure; else 0.
func (l *Launcher) exitStatus() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	switch {
	case l.abort != nil:
		return int(uint8(l.abort.Status))
	case l.signal != 0:
		return 128 + int(l.signal)
	case l.taskStatus >= 0:
		return l.taskStatus
	case l.failed:
		return 1
	}
	return 0
}

// flushLocked prints the pending failure lines, except that of a task
// whose abort was reported already, and tasks killed by a signal when a
// signal ended the run. Called with mu held.
func (l *Launcher) flushLocked() {
	killed := make(map[plugin.Proc]bool)
	tasks := false
	for _, p := range l.pending {
		if p.signaled {
			killed[p.proc] = true
		}
		tasks = tasks || !p.shim
	}
	for _, p := range l.pending {
		if l.abort != nil && l.abort.Proc == p.proc {
			continue
		}
		if p.early && killed[p.proc] {
			// "Killed by signal 9" says more than that it left early.
			continue
		}
		if p.shim && (tasks || l.abort != nil) {
			// The shim only echoes what its tasks did.
			continue
		}
		if l.signal != 0 && p.signaled {
			// The signal that ended the run reached the task too (a
			// terminal's ^C, a process-group kill).
			continue
		}
		l.printf("%s", p.line)
	}
	l.pending = nil
}

// printf writes one user-facing line to stderr.
func (l *Launcher) printf(format string, args ...any) {
	fmt.Fprintf(l.out, format+"\n", args...)
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
	if l.terminating {
		if l.signal != 0 || s == syscall.SIGINT {
			l.printf("gopmi: %s again, killing every process", signalName(s))
			l.killAllLocked(syscall.SIGKILL)
		}
		return
	}
	l.signal = s
	l.printf("gopmi: got SIG%s, ending the run", signalName(s))
	l.terminateLocked(s)
}

// terminateLocked ends the run: every task gets SIGTERM (SIGINT first
// when the run was interrupted), every shim SIGTERM, and whatever is left
// after the grace period SIGKILL. Called with mu held.
func (l *Launcher) terminateLocked(sig syscall.Signal) {
	if l.terminating {
		return
	}
	l.terminating = true
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
	l.signalShimsLocked(nil, syscall.SIGTERM)
	l.after(grace, func() { l.killAllLocked(syscall.SIGKILL) })
}

func (l *Launcher) killAllLocked(sig syscall.Signal) {
	l.signalTasksLocked(nil, sig)
	l.signalShimsLocked(nil, sig)
}

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

// signalShimsLocked signals the live shims of job (every job when nil).
func (l *Launcher) signalShimsLocked(only *runJob, sig syscall.Signal) {
	for _, rj := range l.jobs {
		if only != nil && rj != only {
			continue
		}
		for _, n := range rj.nodes {
			if n.pid > 0 && n.state == nil && !isZombie(n.pid) {
				n.signalled = true
				_ = syscall.Kill(n.pid, sig)
			}
		}
	}
}

// onAbort is the universe's OnAbort: the first abort decides the exit
// status; the targets get SIGTERM first, then the whole run ends.
func (l *Launcher) onAbort(ev AbortEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.abort != nil {
		return
	}
	l.abort = &ev
	if ev.Message != "" {
		l.printf("gopmi: job %s rank %d aborted: %s (exit %d)", ev.Proc.Nspace, ev.Proc.Rank, ev.Message, uint8(ev.Status))
	} else {
		l.printf("gopmi: job %s rank %d aborted (exit %d)", ev.Proc.Nspace, ev.Proc.Rank, uint8(ev.Status))
	}
	targets := ev.Targets
	if len(targets) == 0 {
		targets = []plugin.Proc{{Nspace: ev.Proc.Nspace, Rank: plugin.RankWildcard}}
	}
	for _, p := range targets {
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
	l.terminateLocked(syscall.SIGTERM)
}

// onProcFailed is the universe's OnProcFailed: a task ended before
// finalize, which fails the run.
func (l *Launcher) onProcFailed(p plugin.Proc, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.terminating {
		l.log.Debug().Str("proc", p.String()).Str("reason", reason).Msg("proc failed while ending")
		return
	}
	// The task is exiting or has exited: wait failureSettle, as for any
	// task failure, so that its own exit status (a signal, say) or an
	// abort is what the run reports.
	l.failed = true
	if l.rootCause == nil {
		l.rootCause = &p
		if st, ok := l.failedStatus[p]; ok {
			l.taskStatus = st
		}
	}
	l.pending = append(l.pending, pendingLine{proc: p, line: fmt.Sprintf("gopmi: rank %d (job %s) failed: %s", p.Rank, p.Nspace, reason), early: true})
	l.settleLocked()
}

// Dump writes the universe's and the launcher's state (SIGUSR1).
func (l *Launcher) Dump(w io.Writer) {
	if l.u != nil {
		l.u.Dump(w)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rj := range l.jobs {
		var shims []string
		for _, n := range rj.nodes {
			st := "running"
			if n.state != nil {
				_, st, _ = exitInfo(n.state)
			}
			shims = append(shims, fmt.Sprintf("node %d pid %d %s", n.node.ID, n.pid, st))
		}
		fmt.Fprintf(w, "  launcher job %s: %d tasks running, shims: %s\n", rj.spec.Job.Nspace, rj.running, strings.Join(shims, "; "))
	}
}
