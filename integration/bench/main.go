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
	if len(cfg.scaleNs) > 0 {
		return runScale(ctx, cfg, stdout, stderr)
	}
	// Every launcher's runs inherit it (srun passes it to the tasks).
	setenv(cfg.env)
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
		stop, err := startSlurm(ctx, cfg.gopmiDir, cfg.slurmPrefix, cfg.slurmNodes, cfg.treeWidth, stderr)
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
	if cfg.openmpi {
		bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		path, err := buildOpenMPIHello(bctx, dir)
		if err == nil {
			bins[openMPIHello] = path
			path, err = buildPMIxBench(bctx, dir)
		}
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "bench: -openmpi:", err)
			return 1
		}
		bins[pmixBench] = path
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
	if cfg.openmpi {
		// The PMIx job takes the PMI-2 job's place (and its report).
		sections = []section{
			sections[0],
			{name: "hello", title: "Open MPI hello", program: openMPIHello, args: []string{"cpu"}, ns: cfg.helloNs, parse: parseHello},
			{name: "pmi2", title: "PMIx job", program: pmixBench, ns: cfg.pmi2Ns, args: pmi2Args(cfg.k), parse: parsePMI2},
			{name: "pmi2floor", title: "PMIx job with no keys", program: pmixBench, ns: cfg.floorNs, args: pmi2Args(0),
				parse: parsePMI2, noPerf: true},
		}
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

// pmixBench names pmix_bench, the PMIx twin of pmi2_bench.
const pmixBench = "pmix_bench"

// buildPMIxBench compiles pmix_bench against libpmix into dir.
func buildPMIxBench(ctx context.Context, dir string) (string, error) {
	flags, err := exec.CommandContext(ctx, "pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		return "", fmt.Errorf("pkg-config pmix: %w: apt-get install libpmix-dev (make deps does)", err)
	}
	src, err := clients.SourceDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, pmixBench)
	args := append([]string{"-O2", "-I", src, "-o", out, filepath.Join(src, pmixBench+".c")}, strings.Fields(string(flags))...)
	if b, err := exec.CommandContext(ctx, "cc", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cc %s: %w\n%s", pmixBench, err, b)
	}
	return out, nil
}

// openMPIHello names the MPICH hello's source built with Open MPI.
const openMPIHello = "mpi_hello_openmpi"

// buildOpenMPIHello compiles the tests' hello with mpicc.openmpi into dir.
func buildOpenMPIHello(ctx context.Context, dir string) (string, error) {
	cc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		return "", fmt.Errorf("mpicc.openmpi not found: apt-get install openmpi-bin libopenmpi-dev (make deps does)")
	}
	src, err := clients.SourceDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, openMPIHello)
	if b, err := exec.CommandContext(ctx, cc, "-O2", "-I", src, "-o", out, filepath.Join(src, clients.MPIHello+".c")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mpicc.openmpi: %w\n%s", err, b)
	}
	return out, nil
}
