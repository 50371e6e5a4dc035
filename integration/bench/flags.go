package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

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
	launchers []clients.Launcher
	notes     []string
	trueNs    []int
	helloNs   []int
	// openmpi: Open MPI's hello under gopmi run against mpirun.openmpi
	// instead of the MPICH sections.
	openmpi    bool
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
	// slurmNodes and treeWidth shape the -slurm cluster and its steps.
	slurmNodes, treeWidth int
	// slurmPrefix is the Slurm install the -slurm cluster runs (empty:
	// Debian's); its srun measures its own --mpi=pmi2 and --mpi=pmix.
	slurmPrefix string
	// env is set for every launcher's runs.
	env []string
	// floorLauncher runs only the launch floor (/bin/true): srun
	// --mpi=none, whose wall at each size is subtracted from a PMI job's
	// to give its PMI part. "" when there is none.
	floorLauncher string
	// slurmBefore: the directory of earlier gopmi binaries that
	// -slurm-before measures against -gopmi's; slurmLink is the
	// directory mpi/gopmi is built for, a symlink each run points at the
	// binaries it measures.
	slurmBefore, slurmAfter, slurmLink string
	// scaleNs and scaleWidths: -scale, the Slurm backend simulated at
	// these sizes and widths instead of every other section.
	scaleNs, scaleWidths []int
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
		ls         launcherList
		before     = fs.String("slurm-before", "", "with -slurm: measure srun --mpi=gopmi with the gopmi binaries in this directory (an earlier build) against -gopmi's, taking turns run by run, instead of against srun --mpi=pmi2")
		openmpi    = fs.Bool("openmpi", false, "measure an Open MPI hello (mpicc.openmpi) under gopmi run, which serves it through gopmi-pmix, against mpirun.openmpi, with the launch floor of each")
		slurmNodes = fs.Int("nodes", 2, "with -slurm: slurmd in the cluster, and srun's -N")
		prefix     = fs.String("slurm-prefix", "", "with -slurm: run the Slurm installed there (e.g. /opt/slurm-25.11, with its configured source in PREFIX/src) instead of Debian's, its srun's --mpi=pmi2 and --mpi=pmix the peers")
		treeWidth  = fs.Int("tree-width", 0, "with -slurm: mpi/gopmi's fence tree width (GopmiTreeWidth; 0: its default, 16)")
		slurm      = fs.Bool("slurm", false, "measure `srun --mpi=gopmi -N 2` against `srun --mpi=pmi2 -N 2` on a two-node Slurm cluster the bench starts (root, slurm-wlm, munge) instead of gopmi run against hydra")
		gopmi      = fs.String("gopmi", "./bin/gopmi", "gopmi binary used when no -launcher is given")
		trueNs     = fs.String("true", "1", "task counts for the launch floor (/bin/true) in (a)")
		hello      = fs.String("hello", "1,4,16,64", "task counts for the MPICH hello section")
		pmi2       = fs.String("pmi2", "16,64,128,1024", "task counts for the PMI-2 job (b); below 512 also its floor, the same job with no keys")
		burst      = fs.Int("burst", 30, "(d): this many MPICH hello jobs at once, a parameter sweep; 0: skip")
		burstN     = fs.Int("burst-n", 2, "(d): ranks of each job")
		burstRuns  = fs.Int("burst-runs", 5, "(d): timed runs per launcher")
		startRuns  = fs.Int("start-runs", 21, "(e): runs per gopmi binary for its start-up; 0: skip")
		runs       = fs.Int("runs", 10, "timed runs per launcher for N < 64")
		runsLarge  = fs.Int("runs-large", 3, "timed runs per launcher for 64 <= N < 512 (N >= 512: 1)")
		warmup     = fs.Int("warmup", 1, "untimed runs per launcher before each size (N < 512)")
		k          = fs.Int("k", 8, "pmi2_bench: keys each rank puts per round")
		g          = fs.Int("g", 16, "pmi2_bench: peers whose keys each rank reads")
		v          = fs.Int("v", 200, "pmi2_bench: value size in bytes")
		rounds     = fs.Int("rounds", 1, "pmi2_bench: rounds")
		timeout    = fs.Duration("timeout", 0, "per-run time-out (0: 30s + 100ms per task)")
		binDir     = fs.String("bin", "", "where to build the client programs (default integration/testdata/bin)")
		jsonPath   = fs.String("json", "", "also write the results as JSON to this file")
		quick      = fs.Bool("quick", false, "smoke mode: one run each at small N (seconds)")
		perfMode   = fs.String("perf", "auto", "(c) per process with `perf record`: auto (when perf works), on (fail without it), off")
		withDmn    = fs.Bool("daemon", true, "also measure `gopmi run` registered with a node daemon the bench starts (gopmi+daemon), to show what registering costs")
		cpuRuns    = fs.Int("cpu-runs", 5, "runs per launcher under perf for (c), after the timed runs (N >= 512 and -quick: 1)")
		scaleNs    = fs.String("scale", "", "instead of every other section: simulate srun --mpi=gopmi's backend (coordinator, nodes, fence tree, links) at these node counts in this process, e.g. 16,128,1024,4096, and print a `scale ...` line each")
		scaleW     = fs.String("scale-width", "16,4", "with -scale: the fence tree widths")
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
	if *scaleNs != "" {
		c := &config{quick: *quick}
		var err error
		if c.scaleNs, err = parseInts(*scaleNs); err != nil {
			return nil, fmt.Errorf("-scale: %w", err)
		}
		if c.scaleWidths, err = parseInts(*scaleW); err != nil {
			return nil, fmt.Errorf("-scale-width: %w", err)
		}
		for _, n := range c.scaleNs {
			if n < 2 {
				return nil, fmt.Errorf("-scale: %d nodes: a step of one node has no tree", n)
			}
		}
		return c, nil
	}

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
	if *openmpi {
		if c.gopmiDir == "" {
			return nil, fmt.Errorf("-openmpi: gopmi's binaries not found (-gopmi %s)", *gopmi)
		}
		c.openmpi = true
		// Open MPI's own first: the ratios are against it. As root it
		// wants to be told; on 2 cores, 64 ranks oversubscribe.
		mpirun := []string{"mpirun.openmpi", "--oversubscribe", "-n", "{n}"}
		if os.Geteuid() == 0 {
			mpirun = []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "{n}"}
		}
		ls = []clients.Launcher{{Name: "mpirun-openmpi", Template: mpirun}, {Name: "gopmi", Template: []string{*gopmi, "run", "-n", "{n}"}}}
		c.floorLauncher = ""
		c.burst, c.startRuns, c.daemon = 0, 0, false
		if !set["hello"] {
			c.helloNs = []int{1, 4, 16, 64}
			if *slurm {
				c.helloNs = []int{4, 16, 64}
			}
		}
		if !set["pmi2"] && !*quick {
			// The PMIx job: pmix_bench, the twin of pmi2_bench.
			c.pmi2Ns, c.floorNs = []int{16, 64, 128}, []int{16, 64, 128}
		}
		// pmix_bench is a PMIx client that does not link Open MPI:
		// gopmi is told (gopmi run and mpi/gopmi read it), as a user of
		// such a program would.
		c.env = append(c.env, "GOPMI_PMIX=1")
		c.notes = append(c.notes, "GOPMI_PMIX=1 for every launcher: pmix_bench speaks PMIx without linking Open MPI")
	}
	if *slurm {
		if c.gopmiDir == "" {
			return nil, fmt.Errorf("-slurm: gopmi's binaries not found (-gopmi %s)", *gopmi)
		}
		c.slurm = true
		c.slurmNodes, c.treeWidth, c.slurmPrefix = *slurmNodes, *treeWidth, *prefix
		nodes := strconv.Itoa(c.slurmNodes)
		// Slurm's own first: the ratios are against it.
		peer := "pmi2"
		if c.openmpi {
			// Open MPI's peer is Slurm's mpi/pmix. The lab's nodes share
			// one host, where Open MPI's shared-memory transport between
			// ranks of different nodes crashes (under either): TCP.
			peer = "pmix"
			c.env = append(c.env, "OMPI_MCA_btl=self,tcp")
			c.notes = append(c.notes, "OMPI_MCA_btl=self,tcp for every launcher: the lab's two nodes share one host, where vader between them crashes")
		}
		ls = []clients.Launcher{
			{Name: "srun-" + peer, Template: []string{"srun", "--mpi=" + peer, "-N", nodes, "-n", "{n}"}},
			{Name: "srun-gopmi", Template: []string{"srun", "--mpi=gopmi", "-N", nodes, "-n", "{n}"}},
			{Name: "srun-none", Template: []string{"srun", "--mpi=none", "-N", nodes, "-n", "{n}"}},
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
				{Name: "srun-gopmi-before", Template: []string{"sh", "-c", swap, c.slurmBefore, c.slurmLink, "--mpi=gopmi", "-N", nodes, "-n", "{n}"}},
				{Name: "srun-gopmi", Template: []string{"sh", "-c", swap, c.slurmAfter, c.slurmLink, "--mpi=gopmi", "-N", nodes, "-n", "{n}"}},
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
			c.trueNs = []int{c.slurmNodes}
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
