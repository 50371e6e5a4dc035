package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// launcherList is the repeatable -launcher flag.
type launcherList []clients.Launcher

func (l *launcherList) String() string {
	var s []string
	for _, x := range *l {
		s = append(s, x.String())
	}
	return strings.Join(s, ", ")
}

func (l *launcherList) Set(v string) error {
	x, err := clients.ParseLauncher(v)
	if err != nil {
		return err
	}
	for _, have := range *l {
		if have.Name == x.Name {
			return fmt.Errorf("launcher %q given twice", x.Name)
		}
	}
	*l = append(*l, x)
	return nil
}

type config struct {
	launchers  []clients.Launcher
	notes      []string
	trueNs     []int
	helloNs    []int
	pmi2Ns     []int
	floorNs    []int // pmi2Ns below 512: the same job with no keys
	burst      int   // concurrent jobs in (d); 0: none
	burstN     int   // ranks of each
	burstRuns  int
	startRuns  int    // runs per binary in (e); 0: none
	gopmiDir   string // where gopmi's binaries are, for (e)
	runs       int
	runsLarge  int
	warmup     int
	k, g, v, r int
	timeout    time.Duration
	binDir     string
	jsonPath   string
	quick      bool
	perfMode   string // -perf: auto, on or off
	cpuRuns    int
	// perf samples (c)'s runs; nil when perf is not used.
	perf *perfCPU
	// slurm: srun on a cluster the bench starts (-slurm).
	slurm bool
	// perfAll: perf samples every process of the machine, not only the
	// launcher's tree (Slurm's step daemons run under slurmd).
	perfAll bool
	// daemon: measure gopmi run with a node daemon (gopmi+daemon).
	daemon bool
	// floorLauncher runs only the launch floor (/bin/true): srun
	// --mpi=none, whose wall at each size is subtracted from a PMI job's
	// to give its PMI part. "" when there is none.
	floorLauncher string
	// slurmBefore: the directory of earlier gopmi binaries that
	// -slurm-before measures against -gopmi's; slurmLink is the
	// directory mpi/gopmi is built for, a symlink each run points at the
	// binaries it measures.
	slurmBefore, slurmAfter, slurmLink string
}

// cpuRunsFor is how many runs under perf a size gets for (c).
func (c *config) cpuRunsFor(n int) int {
	if c.quick || n >= 512 {
		return 1
	}
	return c.cpuRuns
}

// runsFor is how many timed runs (and warm-up runs) a size gets: fewer for
// big jobs, whose runs take seconds and vary less.
func (c *config) runsFor(n int) (runs, warmup int) {
	switch {
	case c.quick, n >= 512:
		return 1, 0
	case n >= 64:
		return c.runsLarge, c.warmup
	default:
		return c.runs, c.warmup
	}
}

func (c *config) timeoutFor(n int) time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	// hydra needs ~10 s for pmi2_bench at N=232 on 2 cores; this leaves
	// room for a slower PM without waiting long on a hung one.
	return 30*time.Second + time.Duration(n)*100*time.Millisecond
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		ls        launcherList
		before    = fs.String("slurm-before", "", "with -slurm: measure srun --mpi=gopmi with the gopmi binaries in this directory (an earlier build) against -gopmi's, taking turns run by run, instead of against srun --mpi=pmi2")
		slurm     = fs.Bool("slurm", false, "measure `srun --mpi=gopmi -N 2` against `srun --mpi=pmi2 -N 2` on a two-node Slurm cluster the bench starts (root, slurm-wlm, munge) instead of gopmi run against hydra")
		gopmi     = fs.String("gopmi", "./bin/gopmi", "gopmi binary used when no -launcher is given")
		trueNs    = fs.String("true", "1", "task counts for the launch floor (/bin/true) in (a)")
		hello     = fs.String("hello", "1,4,16,64", "task counts for the MPICH hello section")
		pmi2      = fs.String("pmi2", "16,64,128,1024", "task counts for the PMI-2 job (b); below 512 also its floor, the same job with no keys")
		burst     = fs.Int("burst", 30, "(d): this many MPICH hello jobs at once, a parameter sweep; 0: skip")
		burstN    = fs.Int("burst-n", 2, "(d): ranks of each job")
		burstRuns = fs.Int("burst-runs", 5, "(d): timed runs per launcher")
		startRuns = fs.Int("start-runs", 21, "(e): runs per gopmi binary for its start-up; 0: skip")
		runs      = fs.Int("runs", 10, "timed runs per launcher for N < 64")
		runsLarge = fs.Int("runs-large", 3, "timed runs per launcher for 64 <= N < 512 (N >= 512: 1)")
		warmup    = fs.Int("warmup", 1, "untimed runs per launcher before each size (N < 512)")
		k         = fs.Int("k", 8, "pmi2_bench: keys each rank puts per round")
		g         = fs.Int("g", 16, "pmi2_bench: peers whose keys each rank reads")
		v         = fs.Int("v", 200, "pmi2_bench: value size in bytes")
		rounds    = fs.Int("rounds", 1, "pmi2_bench: rounds")
		timeout   = fs.Duration("timeout", 0, "per-run time-out (0: 30s + 100ms per task)")
		binDir    = fs.String("bin", "", "where to build the client programs (default integration/testdata/bin)")
		jsonPath  = fs.String("json", "", "also write the results as JSON to this file")
		quick     = fs.Bool("quick", false, "smoke mode: one run each at small N (seconds)")
		perfMode  = fs.String("perf", "auto", "(c) per process with `perf record`: auto (when perf works), on (fail without it), off")
		withDmn   = fs.Bool("daemon", true, "also measure `gopmi run` registered with a node daemon the bench starts (gopmi+daemon), to show what registering costs")
		cpuRuns   = fs.Int("cpu-runs", 5, "runs per launcher under perf for (c), after the timed runs (N >= 512 and -quick: 1)")
	)
	fs.Var(&ls, "launcher", "`name=command template` with {n} for the task count; repeatable (default: hydra, and gopmi if -gopmi exists)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	c := &config{
		burst: *burst, burstN: *burstN, burstRuns: *burstRuns, startRuns: *startRuns,
		runs: *runs, runsLarge: *runsLarge, warmup: *warmup,
		k: *k, g: *g, v: *v, r: *rounds,
		timeout: *timeout, binDir: *binDir, jsonPath: *jsonPath, quick: *quick,
		perfMode: *perfMode, cpuRuns: *cpuRuns,
	}
	if *quick {
		// Small unless the caller asked for something else.
		if !set["hello"] {
			*hello = "1,2"
		}
		if !set["pmi2"] {
			*pmi2 = "4"
		}
		if !set["k"] {
			c.k = 2
		}
		if !set["g"] {
			c.g = 2
		}
		if !set["rounds"] {
			c.r = 1
		}
		if !set["burst"] {
			c.burst = 3
		}
		if !set["burst-runs"] {
			c.burstRuns = 1
		}
		if !set["start-runs"] {
			c.startRuns = 3
		}
	}
	var err error
	if c.trueNs, err = parseInts(*trueNs); err != nil {
		return nil, fmt.Errorf("-true: %w", err)
	}
	if c.helloNs, err = parseInts(*hello); err != nil {
		return nil, fmt.Errorf("-hello: %w", err)
	}
	if c.pmi2Ns, err = parseInts(*pmi2); err != nil {
		return nil, fmt.Errorf("-pmi2: %w", err)
	}
	for _, n := range c.pmi2Ns {
		if n < 512 {
			c.floorNs = append(c.floorNs, n)
		}
	}
	if c.runs < 1 || c.runsLarge < 1 || c.warmup < 0 || c.cpuRuns < 1 {
		return nil, errors.New("-runs, -runs-large and -cpu-runs must be >= 1, -warmup >= 0")
	}
	if c.burst < 0 || c.burstN < 1 || c.burstRuns < 1 || c.startRuns < 0 {
		return nil, errors.New("-burst and -start-runs must be >= 0, -burst-n and -burst-runs >= 1")
	}
	switch c.perfMode {
	case "auto", "on", "off":
	default:
		return nil, fmt.Errorf("-perf %q: want auto, on or off", c.perfMode)
	}

	if len(ls) == 0 {
		ls = append(ls, clients.Hydra)
		if st, err := os.Stat(*gopmi); err == nil && st.Mode().IsRegular() {
			ls = append(ls, clients.Launcher{Name: "gopmi", Template: []string{*gopmi, "run", "-n", "{n}"}})
			c.gopmiDir = filepath.Dir(*gopmi)
			c.daemon = *withDmn
		} else {
			c.notes = append(c.notes, fmt.Sprintf("gopmi not measured: %s not found (build it, or pass -launcher 'gopmi=<path> run -n {n}')", *gopmi))
		}
	}
	if *slurm {
		if c.gopmiDir == "" {
			return nil, fmt.Errorf("-slurm: gopmi's binaries not found (-gopmi %s)", *gopmi)
		}
		c.slurm = true
		// Slurm's own first: the ratios are against it.
		ls = []clients.Launcher{
			{Name: "srun-pmi2", Template: []string{"srun", "--mpi=pmi2", "-N", "2", "-n", "{n}"}},
			{Name: "srun-gopmi", Template: []string{"srun", "--mpi=gopmi", "-N", "2", "-n", "{n}"}},
			{Name: "srun-none", Template: []string{"srun", "--mpi=none", "-N", "2", "-n", "{n}"}},
		}
		if *before != "" {
			// One cluster, one mpi/gopmi, built for a directory that is
			// a symlink: each run points it at the binaries it measures
			// (srun's side and every stepd's start them from there).
			if c.slurmBefore, err = filepath.Abs(*before); err != nil {
				return nil, err
			}
			if c.slurmAfter, err = filepath.Abs(c.gopmiDir); err != nil {
				return nil, err
			}
			c.slurmLink = filepath.Join(os.TempDir(), "gopmi-bench-bin-"+strconv.Itoa(os.Getpid()))
			const swap = `ln -sfn "$0" "$1" && shift && exec srun "$@"`
			ls = []clients.Launcher{
				{Name: "srun-gopmi-before", Template: []string{"sh", "-c", swap, c.slurmBefore, c.slurmLink, "--mpi=gopmi", "-N", "2", "-n", "{n}"}},
				{Name: "srun-gopmi", Template: []string{"sh", "-c", swap, c.slurmAfter, c.slurmLink, "--mpi=gopmi", "-N", "2", "-n", "{n}"}},
				ls[2],
			}
			c.gopmiDir = c.slurmLink
		}
		c.floorLauncher = "srun-none"
		c.daemon = false
		// srun's step daemons run under slurmd, outside the launcher's
		// process tree: perf samples the whole machine instead (the
		// cluster is on this one), and the burst is left out.
		c.perfAll, c.burst, c.startRuns = true, 0, 0
		if !set["true"] {
			// The floor at each PMI job's size too, for its PMI part.
			c.trueNs = []int{2}
			for _, n := range c.pmi2Ns {
				if !slices.Contains(c.trueNs, n) {
					c.trueNs = append(c.trueNs, n)
				}
			}
		}
	}
	for _, l := range ls {
		if _, err := exec.LookPath(l.Template[0]); err != nil {
			hint := ""
			if l.Template[0] == "mpiexec.hydra" {
				hint = " (install: " + clients.InstallHint + ")"
			}
			return nil, fmt.Errorf("launcher %s: %s not found%s", l.Name, l.Template[0], hint)
		}
	}
	c.launchers = ls
	return c, nil
}

// sample is one timed run.
type sample struct {
	WallMS    float64 `json:"wall_ms"`
	TreeCPUMS float64 `json:"tree_cpu_ms"`
	TaskCPUMS float64 `json:"task_cpu_ms"`
	PMCPUMS   float64 `json:"pm_cpu_ms"`
	// pmi2_bench only: rank 0's phase times.
	InitUS  int64 `json:"init_us,omitempty"`
	PutUS   int64 `json:"put_us,omitempty"`
	FenceUS int64 `json:"fence_us,omitempty"`
	GetUS   int64 `json:"get_us,omitempty"`
	TotalUS int64 `json:"total_us,omitempty"`
}

// cell is one launcher at one size of one section.
type cell struct {
	Section  string   `json:"section"`
	N        int      `json:"n"`
	Launcher string   `json:"launcher"`
	Argv     []string `json:"argv"`
	Samples  []sample `json:"samples"`
	// Fail is why the launcher failed at this size ("" if it did not).
	Fail string `json:"fail,omitempty"`
	// Median over Samples of each measure.
	Median sample  `json:"median"`
	MinMS  float64 `json:"min_wall_ms"`

	// The runs under perf, for (c): CPU ms by comm, one map per run.
	PerfRuns []map[string]float64 `json:"perf_runs_cpu_ms,omitempty"`
	// PerfFail is why a run under perf failed ("" if none did); the
	// launcher is not run under perf again at this size.
	PerfFail string `json:"perf_fail,omitempty"`
	// Medians over PerfRuns: by comm (0 in a run without the comm), and
	// of each run's sum over the process manager's comms (see roles), so
	// the medians need not add up exactly.
	PerfCPUMS     map[string]float64 `json:"perf_cpu_ms,omitempty"`
	PMProperCPUMS float64            `json:"pm_proper_cpu_ms,omitempty"`
}

type report struct {
	Started   time.Time         `json:"started"`
	Host      map[string]string `json:"host"`
	Launchers map[string]string `json:"launchers"`
	Reference string            `json:"reference"`
	Notes     []string          `json:"notes,omitempty"`
	Params    map[string]int    `json:"params"`
	// PerfNote is why (c) was not measured with perf ("" if it was).
	PerfNote string `json:"perf_note,omitempty"`
	// Roles is each launcher's role split for the perf measures.
	Roles map[string]roleSplit `json:"roles"`
	Cells []*cell              `json:"cells"`
	// Startup is (e): gopmi's binaries' start-up.
	Startup []startupRow `json:"startup,omitempty"`
}

// section is one workload measured at several sizes.
type section struct {
	name    string // "hello" or "pmi2"
	title   string
	program string
	args    []string
	ns      []int
	// parse checks a run and turns it into a sample.
	parse func(res clients.Result, n int) (sample, error)
	// noPerf skips (c)'s runs under perf.
	noPerf bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	dir := cfg.binDir
	if dir == "" {
		if dir, err = clients.DefaultDir(); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	bins, err := clients.Build(bctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if cfg.daemon {
		stop, l, err := startDaemon(filepath.Join(cfg.gopmiDir, "gopmi"))
		if err != nil {
			fmt.Fprintln(stderr, "bench: -daemon:", err)
			return 1
		}
		defer stop()
		cfg.launchers = append(cfg.launchers, l)
	}
	if cfg.slurmLink != "" {
		if err := os.Symlink(cfg.slurmAfter, cfg.slurmLink); err != nil {
			fmt.Fprintln(stderr, "bench: -slurm-before:", err)
			return 1
		}
		defer os.Remove(cfg.slurmLink)
	}
	if cfg.slurm {
		stop, err := startSlurm(ctx, cfg.gopmiDir, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "bench: -slurm:", err)
			return 1
		}
		defer stop()
	}
	var (
		p        *perfCPU
		probeErr error
	)
	if cfg.perfMode != "off" {
		pdir, err := os.MkdirTemp("", "gopmi-bench-perf-")
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer os.RemoveAll(pdir)
		p = &perfCPU{bin: "perf", dir: pdir, all: cfg.perfAll}
		probeErr = p.probe(ctx)
	}
	use, perfNote, err := perfDecision(cfg.perfMode, probeErr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if use {
		cfg.perf = p
	}

	rep := &report{
		Started:   time.Now(),
		Host:      hostInfo(ctx),
		Launchers: map[string]string{},
		Reference: cfg.launchers[0].Name,
		Notes:     cfg.notes,
		Params: map[string]int{"k": cfg.k, "g": cfg.g, "v": cfg.v, "rounds": cfg.r, "runs": cfg.runs,
			"runs_large": cfg.runsLarge, "warmup": cfg.warmup, "cpu_runs": cfg.cpuRuns},
		PerfNote: perfNote,
		Roles:    map[string]roleSplit{},
	}
	for _, l := range cfg.launchers {
		rep.Launchers[l.Name] = strings.Join(l.Template, " ")
		rep.Roles[l.Name] = rolesOf(l)
	}
	bins[trueProgram] = "/bin/true"
	pmi2Args := func(k int) []string {
		return []string{"k=" + strconv.Itoa(k), "g=" + strconv.Itoa(cfg.g), "v=" + strconv.Itoa(cfg.v), "rounds=" + strconv.Itoa(cfg.r)}
	}
	sections := []section{
		{name: "true", title: "launch floor", program: trueProgram, ns: cfg.trueNs, parse: parseTrue},
		{
			name: "hello", title: "MPICH hello", program: clients.MPIHello, args: []string{"cpu"}, ns: cfg.helloNs,
			parse: parseHello,
		},
		{name: "pmi2", title: "PMI-2 job", program: clients.PMI2Bench, ns: cfg.pmi2Ns, args: pmi2Args(cfg.k), parse: parsePMI2},
		{name: "pmi2floor", title: "PMI-2 job with no keys", program: clients.PMI2Bench, ns: cfg.floorNs, args: pmi2Args(0),
			parse: parsePMI2, noPerf: true},
	}
	for _, s := range sections {
		if err := measure(ctx, cfg, s, bins[s.program], rep, stderr); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if cfg.burst > 0 {
		if err := measureBurst(ctx, cfg, bins[clients.MPIHello], rep, stderr); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if cfg.startRuns > 0 && cfg.gopmiDir != "" {
		rep.Startup = measureStartup(ctx, cfg, stderr)
	}
	printReport(stdout, cfg, rep)
	if cfg.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(stderr, "bench: write json:", err)
			return 1
		}
	}
	return 0
}

// measure runs one section: for each size, warm-up runs, then timed runs
// with the launchers taking turns (ABAB...). A launcher that fails at a size
// stops there and is not run at larger sizes of the section.
func measure(ctx context.Context, cfg *config, s section, prog string, rep *report, progress io.Writer) error {
	failedAt := map[string]int{}
	for _, n := range s.ns {
		runs, warmup := cfg.runsFor(n)
		cells := map[string]*cell{}
		var active []clients.Launcher
		for _, l := range cfg.launchers {
			if l.Name == cfg.floorLauncher && s.name != "true" {
				continue
			}
			c := &cell{Section: s.name, N: n, Launcher: l.Name, Argv: l.Argv(n, prog, s.args...)}
			rep.Cells = append(rep.Cells, c)
			cells[l.Name] = c
			if at, ok := failedAt[l.Name]; ok {
				c.Fail = fmt.Sprintf("not run: failed at N=%d", at)
				continue
			}
			active = append(active, l)
		}
		one := func(l clients.Launcher, timed bool, i int) {
			c := cells[l.Name]
			if c.Fail != "" {
				return
			}
			rctx, cancel := context.WithTimeout(ctx, cfg.timeoutFor(n))
			res, err := clients.Run(rctx, c.Argv, clients.RunOptions{})
			cancel()
			var smp sample
			if err == nil {
				smp, err = s.parse(res, n)
			} else if res.TimedOut {
				err = errors.New(res.Summary())
			}
			what := "warm-up"
			if timed {
				what = fmt.Sprintf("run %d/%d", i+1, runs)
			}
			if err != nil {
				c.Fail = err.Error()
				failedAt[l.Name] = n
				fmt.Fprintf(progress, "%s n=%d %s %s: fail (%s)\n", s.name, n, l.Name, what, c.Fail)
				return
			}
			fmt.Fprintf(progress, "%s n=%d %s %s: %.1f ms\n", s.name, n, l.Name, what, smp.WallMS)
			if timed {
				c.Samples = append(c.Samples, smp)
			}
		}
		for i := 0; i < warmup; i++ {
			for _, l := range active {
				one(l, false, i)
			}
		}
		for i := 0; i < runs; i++ {
			for _, l := range active {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: %w", ctx.Err())
				}
				one(l, true, i)
			}
		}
		// (c) under perf after the timed runs, which perf would slow down.
		if cfg.perf != nil && !s.noPerf {
			cpuRuns := cfg.cpuRunsFor(n)
			for i := 0; i < cpuRuns; i++ {
				for _, l := range active {
					if ctx.Err() != nil {
						return fmt.Errorf("interrupted: %w", ctx.Err())
					}
					perfOne(ctx, cfg, s, n, l, cells[l.Name], i, cpuRuns, progress)
				}
			}
		}
		for _, l := range active {
			summarize(cells[l.Name])
			summarizePerf(cells[l.Name], rolesOf(l))
		}
	}
	return nil
}

// perfOne is one run of a launcher under perf for (c), checked like a
// timed run.
func perfOne(ctx context.Context, cfg *config, s section, n int, l clients.Launcher, c *cell, i, runs int, progress io.Writer) {
	if c.Fail != "" || c.PerfFail != "" {
		return
	}
	res, cpu, err := cfg.perf.run(ctx, c.Argv, cfg.timeoutFor(n))
	if err == nil && res.Signal != 0 {
		// perf record itself now and then dies of SIGPIPE on a loaded
		// machine, before the workload runs (seen 1 in 600 runs of
		// `perf record -- mpiexec.hydra -n 1 true` beside go test -race):
		// one more try, said on the progress output.
		fmt.Fprintf(progress, "%s n=%d %s perf run %d/%d: perf %s; once more\n", s.name, n, l.Name, i+1, runs, res.Summary())
		res, cpu, err = cfg.perf.run(ctx, c.Argv, cfg.timeoutFor(n))
	}
	if err == nil {
		_, err = s.parse(res, n)
	} else if res.TimedOut {
		err = errors.New(res.Summary())
	}
	if err == nil && cpu == nil {
		err = errors.New("no perf samples")
	}
	what := fmt.Sprintf("perf run %d/%d", i+1, runs)
	if err != nil {
		c.PerfFail = err.Error()
		fmt.Fprintf(progress, "%s n=%d %s %s: fail (%s)\n", s.name, n, l.Name, what, c.PerfFail)
		return
	}
	c.PerfRuns = append(c.PerfRuns, cpu)
	r := rolesOf(l)
	fmt.Fprintf(progress, "%s n=%d %s %s: CPU of the process manager %.1f ms\n", s.name, n, l.Name, what, sum(cpu, r.PM))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// common checks what every run must show and fills the CPU accounting.
func common(res clients.Result, n int) (sample, error) {
	if res.ExitCode != 0 {
		return sample{}, errors.New(res.Summary())
	}
	if err := clients.NoFail()(res); err != nil {
		return sample{}, fmt.Errorf("task failed: %w", err)
	}
	task, count := clients.TaskCPU(res.Stdout)
	if count != n {
		return sample{}, fmt.Errorf("%d of %d tasks reported cpu_us", count, n)
	}
	return sample{
		WallMS:    ms(res.Wall),
		TreeCPUMS: ms(res.TreeCPU),
		TaskCPUMS: ms(task),
		PMCPUMS:   ms(res.TreeCPU - task),
	}, nil
}

// trueProgram is the launch floor's program: a task that does nothing.
const trueProgram = "true"

// parseTrue checks a run of /bin/true: it speaks no PMI and reports no CPU
// of its own, so the whole tree's CPU is the launcher's.
func parseTrue(res clients.Result, n int) (sample, error) {
	if res.ExitCode != 0 {
		return sample{}, errors.New(res.Summary())
	}
	return sample{WallMS: ms(res.Wall), TreeCPUMS: ms(res.TreeCPU), PMCPUMS: ms(res.TreeCPU)}, nil
}

func parseHello(res clients.Result, n int) (sample, error) {
	smp, err := common(res, n)
	if err != nil {
		return smp, err
	}
	return smp, clients.PerRank("ok hello ", n, nil)(res)
}

func parsePMI2(res clients.Result, n int) (sample, error) {
	smp, err := common(res, n)
	if err != nil {
		return smp, err
	}
	lines := clients.Lines(res.Stdout, "bench ")
	if len(lines) != 1 {
		return smp, fmt.Errorf("%d bench lines, want 1", len(lines))
	}
	f := clients.Fields(lines[0])
	if f["n"] != strconv.Itoa(n) {
		return smp, fmt.Errorf("bench line for n=%s, want %d", f["n"], n)
	}
	get := func(k string) (int64, error) {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench line: bad %s in %q", k, lines[0])
		}
		return v, nil
	}
	for _, p := range []struct {
		key string
		dst *int64
	}{{"init_us", &smp.InitUS}, {"put_us", &smp.PutUS}, {"fence_us", &smp.FenceUS}, {"get_us", &smp.GetUS}, {"total_us", &smp.TotalUS}} {
		if *p.dst, err = get(p.key); err != nil {
			return smp, err
		}
	}
	return smp, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarize(c *cell) {
	if len(c.Samples) == 0 {
		return
	}
	col := func(f func(sample) float64) []float64 {
		out := make([]float64, len(c.Samples))
		for i, s := range c.Samples {
			out[i] = f(s)
		}
		return out
	}
	walls := col(func(s sample) float64 { return s.WallMS })
	c.MinMS = slices.Min(walls)
	c.Median = sample{
		WallMS:    median(walls),
		TreeCPUMS: median(col(func(s sample) float64 { return s.TreeCPUMS })),
		TaskCPUMS: median(col(func(s sample) float64 { return s.TaskCPUMS })),
		PMCPUMS:   median(col(func(s sample) float64 { return s.PMCPUMS })),
		InitUS:    int64(median(col(func(s sample) float64 { return float64(s.InitUS) }))),
		PutUS:     int64(median(col(func(s sample) float64 { return float64(s.PutUS) }))),
		FenceUS:   int64(median(col(func(s sample) float64 { return float64(s.FenceUS) }))),
		GetUS:     int64(median(col(func(s sample) float64 { return float64(s.GetUS) }))),
		TotalUS:   int64(median(col(func(s sample) float64 { return float64(s.TotalUS) }))),
	}
}

// summarizePerf fills the perf medians of a cell from its runs.
func summarizePerf(c *cell, r roleSplit) {
	if len(c.PerfRuns) == 0 {
		return
	}
	col := func(f func(map[string]float64) float64) float64 {
		xs := make([]float64, len(c.PerfRuns))
		for i, run := range c.PerfRuns {
			xs[i] = f(run)
		}
		return median(xs)
	}
	c.PerfCPUMS = map[string]float64{}
	for _, run := range c.PerfRuns {
		for name := range run {
			if _, done := c.PerfCPUMS[name]; !done {
				c.PerfCPUMS[name] = col(func(m map[string]float64) float64 { return m[name] })
			}
		}
	}
	c.PMProperCPUMS = col(func(m map[string]float64) float64 { return sum(m, r.PM) })
}

func hostInfo(ctx context.Context) map[string]string {
	h := map[string]string{
		"cpus": strconv.Itoa(runtime.NumCPU()),
		"go":   runtime.Version(),
	}
	if name, err := os.Hostname(); err == nil {
		h["hostname"] = name
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h["kernel"] = strings.TrimSpace(string(b))
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(vctx, "mpiexec.hydra", "--version").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Version:"); ok {
				h["mpich"] = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}
