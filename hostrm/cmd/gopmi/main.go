// Command gopmi is the human side of gopmi: `gopmi run` launches an MPI
// job on this machine (like mpiexec), serving it PMI through gopmi-shim
// and the gopmi-rm-local backend; `gopmi daemon` is the node daemon that
// runs share (names across runs), and `gopmi ps` and `gopmi query` ask it.
//
//	gopmi run [flags] prog [args...] [: [-n N] [-env K=V] [-wdir D] prog2 [args...]]...
//	gopmi daemon [-socket PATH] [-state DIR]
//	gopmi ps [-json] [-a] [-daemon PATH]
//	gopmi query [-json] [-daemon PATH] [key...]
//	gopmi log [-json] [-daemon PATH] [job]
//	gopmi tools [-daemon PATH] [-log-level L] TOOL [ARGS...]
//	gopmi version
//	gopmi help
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/local/launcher"
	"github.com/gopmi/gopmi/plugin"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// envPMIx=1 serves gopmi run's tasks as PMIx clients, as -pmix does; 0
// keeps a program that links Open MPI from being served so.
const envPMIx = "GOPMI_PMIX"

const usage = `usage: gopmi <command> [arguments]

commands:
  run [flags] prog [args...] [: [-n N] [-env K=V] [-wdir D] prog2 [args...]]...
        run an MPI job on this machine; "gopmi run -h" lists the flags
  daemon [-socket PATH] [-state DIR] [-grace D] [-log-level L]
         [-listen HOST:PORT | -upstream HOST:PORT -node NAME] [-key FILE]
        the node daemon: names shared by every run on this node, gopmi ps;
        a cluster's hub (-listen), or a node's relay to it (-upstream)
  ps [-json] [-a] [-daemon PATH]
        the jobs on this node, or the cluster through a hub (yours; root: everyone's)
  query [-json] [-daemon PATH] [-nspace JOB] [-node NAME] [key...]
        ask the node daemon, in PMIx's query vocabulary: the jobs, names and
        logs you may see, and of a job its status, proc table, local peers
        and nodes ("gopmi query -h" lists the keys)
  log [-json] [-daemon PATH] [job]
        how your jobs on this node ended, and what the node daemon noted about them
  tools [-daemon PATH] [-log-level L] TOOL [ARGS...]
        run a PMIx tool (pps) whose queries see, through the node daemon,
        your running jobs on this node (root: everyone's)
  mpiexec [gopmi run's flags] prog [args...]
  mpiexec -pmi_args PORT IFACE KEY PID
        what MPICH runs as "mpiexec": a job as gopmi run does, or the process
        manager a singleton MPICH program asked for (gopmi installed as mpiexec)
  version
        print the version
  help
        print this help
`

func main() {
	launcher.SealInheritedFDs()
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "mpiexec" {
		// Installed as mpiexec (a link to gopmi), for MPICH's singletons.
		args = append([]string{"mpiexec"}, args...)
	}
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}

var logFormat sync.Once

func run(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	// Log lines carry the real sub-second time (zerolog's default field
	// format has whole seconds, which the console shows as .000). Set
	// once, before any goroutine logs.
	logFormat.Do(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stdin, stdout, stderr, nil)
	case "mpiexec":
		return mpiexecCmd(args[1:], stdin, stdout, stderr)
	case "daemon":
		return daemonCmd(args[1:], stderr)
	case "ps":
		return psCmd(args[1:], stdout, stderr)
	case "query":
		return queryCmd(args[1:], stdout, stderr)
	case "log":
		return logCmd(args[1:], stdout, stderr)
	case "tools":
		return toolsCmd(args[1:], stderr)
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "gopmi %s\n", version)
		return 0
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[1] == "run" {
			return runCmd([]string{"-h"}, nil, stdout, stdout, nil)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "gopmi: unknown command %q\n%s", args[0], usage)
	return 2
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*m = append(*m, v)
	return nil
}

// runFlags are the flags of `gopmi run`; the app flags (appFlags) may be
// repeated in every MPMD section after a ":", the others are for the
// whole run and come before the first program.
type runFlags struct {
	n, ppn, usize, maxVal int
	env, genv             multiFlag
	pmiPort               bool
	pmix                  bool
	label                 bool
	fenceMode, logLevel   string
	wdir                  string
	timeout, startTimeout time.Duration
	daemon                string
	maxKVS                byteSize
}

func newRunFlagSet(f *runFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gopmi run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.n, "n", 1, "number of processes")
	fs.IntVar(&f.n, "np", 1, "alias of -n")
	fs.IntVar(&f.ppn, "ppn", 0, "ranks per simulated node (block distribution), each served by a gopmi-shim process; 0 = one node, served by gopmi run itself")
	fs.Var(&f.env, "env", "add KEY=VALUE to this section's tasks' environment (repeatable; \"-env KEY VALUE\" works too)")
	fs.Var(&f.genv, "genv", "add KEY=VALUE to every task's environment, of every section (repeatable)")
	fs.BoolVar(&f.pmiPort, "pmi-port", false, "give tasks PMI_PORT=127.0.0.1:<port> and PMI_ID=<rank> instead of PMI_FD. "+
		"The port listens on loopback only; a process of the job's user may claim each PMI_ID once, "+
		"any other process must authenticate (PMI-2 fullinit authtype=challenge-sha256 with the tasks' PMI_AUTH_SECRET)")
	fs.BoolVar(&f.pmix, "pmix", os.Getenv(envPMIx) == "1", "serve the tasks as PMIx clients (Open MPI) through gopmi-pmix and libpmix (default $"+envPMIx+"=1; "+
		"a program that links Open MPI is served so anyway, unless $"+envPMIx+"=0)")
	fs.BoolVar(&f.label, "l", false, "begin each line of the tasks' output with its rank, \"[rank] \" (as mpiexec -l)")
	fs.IntVar(&f.usize, "usize", 0, "universe size (default: -n)")
	fs.StringVar(&f.fenceMode, "fence-mode", launcher.DefaultFenceMode, launcher.FenceModes())
	fs.DurationVar(&f.timeout, "timeout", launcher.DefaultFenceTimeout, "fence time-out")
	fs.DurationVar(&f.startTimeout, "start-timeout", launcher.DefaultStartTimeout, "how long each job's shims may take to get ready")
	fs.IntVar(&f.maxVal, "max-val", launcher.DefaultMaxVal, "PMI value length limit advertised to clients, bytes")
	fs.Var(&f.maxKVS, "max-kvs", "bytes of KVS records a node may hold for a job (its puts and what fences bring), with an optional K, M or G; "+
		"a put past it is refused, a fence past it fails (default 512M)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of gopmi run and its shims: trace, debug, info, warn, error")
	fs.StringVar(&f.wdir, "wdir", "", "working directory of the tasks (default: the current one); in the first section, also of the later ones")
	fs.StringVar(&f.daemon, "daemon", "", "the node daemon's socket, which shares names with other runs (default $"+envDaemon+", else "+daemon.DefaultSocket+" when it is there; none: run alone)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: gopmi run [flags] prog [args...] [: [-n N] [-env K=V] [-wdir D] prog2 [args...]]...\n\n"+
			"-n, -np, -env and -wdir are for their section (after ':', for that program); the other flags are\n"+
			"for the whole run and come before the first program.\n\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// appFlags may be given in every section; the others only in the first.
var appFlags = map[string]bool{"n": true, "np": true, "env": true, "wdir": true}

// hydraEnv rewrites mpiexec.hydra's two-word "-env NAME VALUE" into
// "-env=NAME=VALUE" within one section. It stops at the program name.
func hydraEnv(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			// The program and its arguments: leave them alone.
			return append(out, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		switch {
		case strings.Contains(name, "="), name == "pmi-port", name == "pmix", name == "l", name == "h", name == "help":
			out = append(out, a)
		case (name == "env" || name == "genv") && i+2 < len(args) && !strings.Contains(args[i+1], "="):
			out = append(out, "-"+name+"="+args[i+1]+"="+args[i+2])
			i += 2
		case i+1 < len(args):
			out = append(out, a, args[i+1])
			i++
		default:
			out = append(out, a)
		}
	}
	return out
}

// sections splits MPMD arguments at ":" tokens.
func sections(args []string) [][]string {
	var out [][]string
	cur := []string{}
	for _, a := range args {
		if a == ":" {
			out = append(out, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, a)
	}
	return append(out, cur)
}

// parseRun turns `gopmi run` arguments into a launcher configuration.
func parseRun(args []string, stderr io.Writer) (launcher.Config, runFlags, error) {
	var cfg launcher.Config
	var global runFlags
	for i, sec := range sections(args) {
		var f runFlags
		fs := newRunFlagSet(&f, stderr)
		if err := fs.Parse(hydraEnv(sec)); err != nil {
			return cfg, global, err
		}
		if fs.NArg() == 0 {
			if i == 0 {
				return cfg, global, errors.New("no program to run")
			}
			return cfg, global, fmt.Errorf("section %d after ':' names no program", i)
		}
		if f.n < 1 {
			return cfg, global, fmt.Errorf("-n %d: need at least one process", f.n)
		}
		var misplaced error
		fs.Visit(func(fl *flag.Flag) {
			if i > 0 && !appFlags[fl.Name] && misplaced == nil {
				misplaced = fmt.Errorf("-%s is for the whole run: give it before the first program, not in section %d after ':'", fl.Name, i)
			}
		})
		if misplaced != nil {
			return cfg, global, misplaced
		}
		// As under hydra, -env is for its section, -genv for all.
		app := local.AppSpec{Path: fs.Arg(0), Args: fs.Args()[1:], Procs: int32(f.n), Dir: f.wdir, Env: f.env}
		if i == 0 {
			global = f
			cfg.Env = f.genv
			// The first section's -wdir is the run's (Config.Wdir).
			app.Dir = ""
		}
		cfg.Apps = append(cfg.Apps, app)
	}
	switch {
	case global.ppn < 0:
		return cfg, global, fmt.Errorf("-ppn %d: want 0 (one node) or more", global.ppn)
	case global.usize < 0:
		return cfg, global, fmt.Errorf("-usize %d: want 0 (the job's size) or more", global.usize)
	case global.timeout < 0 || global.startTimeout < 0:
		return cfg, global, errors.New("-timeout and -start-timeout cannot be negative")
	case global.maxVal < 0:
		return cfg, global, fmt.Errorf("-max-val %d: cannot be negative", global.maxVal)
	}
	if global.pmix && global.pmiPort {
		return cfg, global, errors.New("-pmix and -pmi-port: PMIx clients connect to their PMIx server, not to PMI_PORT; choose one")
	}
	cfg.PPN = global.ppn
	cfg.PMIPort = global.pmiPort
	cfg.PMIx = global.pmix
	cfg.Label = global.label
	cfg.PMIxAuto = os.Getenv(envPMIx) != "0"
	cfg.UniverseSize = int32(global.usize)
	cfg.FenceMode = global.fenceMode
	cfg.FenceTimeout = global.timeout
	cfg.StartTimeout = global.startTimeout
	cfg.MaxVal = global.maxVal
	cfg.MaxKVS = int64(global.maxKVS)
	cfg.LogLevel = global.logLevel
	cfg.Wdir = global.wdir
	return cfg, global, nil
}

// nodeDaemon is the run's client of the node daemon, nil to run alone:
// when the socket is not there (said only when -daemon named it), or
// -daemon none.
func nodeDaemon(flagged string, stderr io.Writer, log zerolog.Logger) *daemon.Client {
	c, why := daemon.DialNode(flagged, log)
	if why != "" {
		fmt.Fprintf(stderr, "gopmi run: %s: names stay within this run\n", why)
	}
	return c
}

// runCmd is gopmi run; adjust, when set, completes the parsed config
// (gopmi mpiexec's singleton).
func runCmd(args []string, stdin *os.File, stdout, stderr io.Writer, adjust func(*launcher.Config)) int {
	cfg, f, err := parseRun(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gopmi run: %v\n", err)
		return 2
	}
	level, err := zerolog.ParseLevel(f.logLevel)
	if err != nil || level == zerolog.NoLevel {
		fmt.Fprintf(stderr, "gopmi run: -log-level %q: want trace, debug, info, warn or error\n", f.logLevel)
		return 2
	}
	cfg.Logger = zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true, TimeFormat: "15:04:05.000"}).
		Level(level).With().Timestamp().Str("component", "gopmi run").Logger()
	cfg.Stdin = stdin
	cfg.Stdout = stdout
	cfg.Stderr = stderr
	cfg.Version = version
	if c := nodeDaemon(f.daemon, stderr, cfg.Logger); c != nil {
		defer c.Close()
		cfg.Beyond = c
		var mu sync.Mutex
		first := ""
		cfg.OnJob = func(job plugin.Job, cmd string, pids []int, universe string) {
			mu.Lock()
			if first == "" {
				first = job.Nspace
			}
			mu.Unlock()
			c.Register(job, daemon.RunConfig{PID: os.Getpid(), Cmd: cmd, Pids: pids, Universe: universe})
		}
		// How the run ended goes to the daemon's log of its first job.
		cfg.OnEnd = func(status int, lines []string) {
			mu.Lock()
			job := first
			mu.Unlock()
			if job == "" {
				return
			}
			data := []plugin.Info{{Key: "status", Value: fmt.Sprintf("gopmi run exited with status %d", status)}}
			for _, l := range lines {
				data = append(data, plugin.Info{Key: "line", Value: l})
			}
			c.Log(job, data)
		}
	}

	if adjust != nil {
		adjust(&cfg)
	}
	l, err := launcher.New(cfg)
	var bad *launcher.SettingError
	switch {
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "gopmi run: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "gopmi: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case s := <-sigs:
				l.Signal(s)
			case <-ctx.Done():
				return
			}
		}
	}()
	code, err := l.Run(ctx)
	cancel()
	<-forwarded
	if err != nil {
		fmt.Fprintf(stderr, "gopmi: %v\n", err)
	}
	return code
}

// byteSize is a flag of bytes with an optional K, M or G (powers of 1024).
type byteSize int64

func (b *byteSize) String() string {
	if b == nil || *b == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	num, mult := s, int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			num, mult = s[:n-1], 1<<10
		case 'm', 'M':
			num, mult = s[:n-1], 1<<20
		case 'g', 'G':
			num, mult = s[:n-1], 1<<30
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return fmt.Errorf("%q: want a positive number of bytes, with an optional K, M or G", s)
	}
	*b = byteSize(v * mult)
	return nil
}
