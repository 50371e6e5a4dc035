package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/integration/clients"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func runBench(t *testing.T, args ...string) (string, *report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var out, errb bytes.Buffer
	code := run(ctx, append(args, "-json", jsonPath), &out, &errb)
	if code != 0 {
		t.Fatalf("bench exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, b)
	}
	t.Logf("bench output:\n%s", out.String())
	return out.String(), &rep
}

// TestQuickHydra is the smoke run `make bench` relies on: hydra only, each
// section present with a measured row per size, and the JSON agrees.
func TestQuickHydra(t *testing.T) {
	out, rep := runBench(t, "-quick", "-launcher", "hydra=mpiexec.hydra -n {n}")
	for _, re := range []string{
		`(?m)^\(a\) launch: /bin/true \(no PMI\), MPICH hello`,
		`(?m)^workload\s+N\s+runs\s+hydra\s*$`,
		`(?m)^/bin/true\s+1\s+1\s+\d+\.\d \(\d+\.\d\)\s*$`,
		`(?m)^hello\s+1\s+1\s+\d+\.\d \(\d+\.\d\)\s*$`,
		`(?m)^hello\s+2\s+1\s+\d+\.\d \(\d+\.\d\)\s*$`,
		`(?m)^\(b\) a PMI-2 job on Slurm's libpmi2, launch included`,
		// fence, get, wall, floor, data
		`(?m)^4\s+hydra\s+1\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\s+-?\d+\.\d\s*$`,
		`(?m)^\(d\) 3 MPICH hello jobs of 2 ranks started at once`,
		`(?m)^3\s+1\s+\d+\.\d \(\d+\.\d\)\s*$`,
		// (c) from perf samples when perf works, else a note saying why.
		`(?m)^\(c\) process-manager CPU by process( \(perf task-clock samples, 1 run\)|: not measured \(perf not used: )`,
		`(?m)^\(c'\) process-manager CPU estimate: launcher's wait4 tree`,
		`(?m)^hello\s+1\s+-?\d+\.\d\s*$`,
		`(?m)^pmi2_bench\s+4\s+-?\d+\.\d\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s", re)
		}
	}
	if strings.Contains(out, "fail") {
		t.Errorf("a hydra cell failed:\n%s", out)
	}
	want := map[string]bool{"true/1": true, "hello/1": true, "hello/2": true, "pmi2/4": true, "pmi2floor/4": true, "burst/3": true}
	for _, c := range rep.Cells {
		key := c.Section + "/" + strconv.Itoa(c.N)
		if !want[key] || c.Launcher != "hydra" {
			t.Errorf("unexpected cell %s %s", key, c.Launcher)
			continue
		}
		delete(want, key)
		if len(c.Samples) != 1 || c.Median.WallMS <= 0 || (c.Median.TreeCPUMS <= 0 && c.Section != "burst") {
			t.Errorf("cell %s: samples=%d median=%+v", key, len(c.Samples), c.Median)
		}
		if c.Section == "pmi2" && (c.Median.TotalUS <= 0 || c.Median.FenceUS <= 0) {
			t.Errorf("cell %s: no PMI-2 phase times: %+v", key, c.Median)
		}
	}
	if len(want) != 0 {
		t.Errorf("cells missing from JSON: %v", want)
	}
	if rep.Reference != "hydra" || rep.Params["k"] != 2 || len(rep.Startup) != 0 {
		t.Errorf("reference=%q params=%v startup=%v", rep.Reference, rep.Params, rep.Startup)
	}
}

// TestFailingLauncherIsReported checks that a launcher that fails is a
// "fail (reason)" cell, is not run at larger sizes, and that the ratio
// columns appear for a second launcher.
func TestFailingLauncherIsReported(t *testing.T) {
	out, rep := runBench(t, "-quick", "-pmi2", "4,8", "-perf", "off",
		"-launcher", "hydra=mpiexec.hydra -n {n}",
		"-launcher", "broken=false -n {n}")
	if !strings.Contains(out, "\n(c) process-manager CPU by process: not measured (perf not used: -perf off)\n") {
		t.Errorf("no note that perf is off:\n%s", out)
	}
	if rep.PerfNote != "-perf off" {
		t.Errorf("perf_note = %q, want -perf off", rep.PerfNote)
	}
	if !regexp.MustCompile(`(?m)^workload\s+N\s+runs\s+hydra\s+broken\s+broken/hydra\s+speedup\s*$`).MatchString(out) {
		t.Errorf("no ratio columns in (a):\n%s", out)
	}
	if !strings.Contains(out, "fail (exit 1: no error output)") {
		t.Errorf("broken launcher not reported as fail (reason):\n%s", out)
	}
	for _, c := range rep.Cells {
		if c.Launcher != "broken" {
			if c.Fail != "" {
				t.Errorf("hydra cell %s N=%d failed: %s", c.Section, c.N, c.Fail)
			}
			continue
		}
		switch {
		case c.Section == "burst":
			if !strings.HasPrefix(c.Fail, "3 of 3 jobs failed: exit code 1, want 0") {
				t.Errorf("broken burst: Fail=%q", c.Fail)
			}
		case c.N == 8 || (c.Section == "hello" && c.N == 2):
			if !strings.HasPrefix(c.Fail, "not run: failed at N=") {
				t.Errorf("broken %s N=%d: Fail=%q, want not run", c.Section, c.N, c.Fail)
			}
		default:
			if !strings.HasPrefix(c.Fail, "exit 1") {
				t.Errorf("broken %s N=%d: Fail=%q, want exit 1", c.Section, c.N, c.Fail)
			}
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"duplicate launcher", []string{"-launcher", "a=true {n}", "-launcher", "a=true {n}"}, "given twice"},
		{"no placeholder", []string{"-launcher", "a=true"}, "no {n}"},
		{"missing command", []string{"-launcher", "a=/no/such/launcher -n {n}"}, "not found"},
		{"bad sizes", []string{"-hello", "1,x"}, "bad size"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"bad perf mode", []string{"-perf", "yes"}, "want auto, on or off"},
		{"no cpu runs", []string{"-cpu-runs", "0"}, "-cpu-runs must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errb bytes.Buffer
			_, err := parseFlags(tt.args, &errb)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	t.Run("default gopmi missing is a note", func(t *testing.T) {
		var errb bytes.Buffer
		cfg, err := parseFlags([]string{"-gopmi", "/no/such/gopmi"}, &errb)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.launchers) != 1 || cfg.launchers[0].Name != "hydra" {
			t.Fatalf("launchers = %v, want hydra only", cfg.launchers)
		}
		if len(cfg.notes) != 1 || !strings.Contains(cfg.notes[0], "/no/such/gopmi not found") {
			t.Fatalf("notes = %v", cfg.notes)
		}
	})
	t.Run("default gopmi present", func(t *testing.T) {
		var errb bytes.Buffer
		fake := filepath.Join(t.TempDir(), "gopmi")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseFlags([]string{"-gopmi", fake}, &errb)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.launchers) != 2 || cfg.launchers[1].String() != "gopmi="+fake+" run -n {n}" {
			t.Fatalf("launchers = %v", cfg.launchers)
		}
	})
}

func TestRunsFor(t *testing.T) {
	cfg := &config{runs: 10, runsLarge: 3, warmup: 1}
	for _, tt := range []struct{ n, runs, warmup int }{{1, 10, 1}, {16, 10, 1}, {64, 3, 1}, {128, 3, 1}, {1024, 1, 0}} {
		if r, w := cfg.runsFor(tt.n); r != tt.runs || w != tt.warmup {
			t.Errorf("runsFor(%d) = %d, %d; want %d, %d", tt.n, r, w, tt.runs, tt.warmup)
		}
	}
	for _, tt := range []struct {
		quick      bool
		n, cpuRuns int
	}{{false, 16, 5}, {false, 128, 5}, {false, 1024, 1}, {true, 16, 1}} {
		cfg := &config{cpuRuns: 5, quick: tt.quick}
		if got := cfg.cpuRunsFor(tt.n); got != tt.cpuRuns {
			t.Errorf("quick=%v: cpuRunsFor(%d) = %d, want %d", tt.quick, tt.n, got, tt.cpuRuns)
		}
	}
	if m := median([]float64{5, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v, want 2.5", m)
	}
}

// perfHydraReport is `perf report --sort comm -n --stdio --no-children -g
// none` of `perf record -e task-clock -c 100000 -- mpiexec.hydra -n 2
// mpi_hello`, with perf's own comms added as they show when perf forks
// the launcher.
const perfHydraReport = `# To display the perf.data header info, please use --header/--header-only options.
#
#
# Total Lost Samples: 0
#
# Samples: 813  of event 'task-clock'
# Event count (approx.): 81300000
#
# Overhead       Samples  Command        
# ........  ............  ...............
#
    88.19%           717  mpi_hello      
     5.90%            48  hydra_pmi_proxy
     4.80%            39  mpiexec.hydra  
     0.49%             4  async          
     0.37%             3  perf-exec      
     0.25%             2  perf           


#
# (Tip: Create an archive with symtabs to analyse on other machine: perf archive)
#
`

func TestParsePerfReport(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]int
		wantErr string
	}{
		{name: "hydra run", in: perfHydraReport, want: map[string]int{
			"mpi_hello": 717, "hydra_pmi_proxy": 48, "mpiexec.hydra": 39, "async": 4, "perf-exec": 3, "perf": 2,
		}},
		{name: "comm with spaces", in: "# Total Lost Samples: 0\n    60.00%   3  Web Content    \n    40.00%   2  gopmi\n",
			want: map[string]int{"Web Content": 3, "gopmi": 2}},
		{name: "lost samples", in: "# Total Lost Samples: 12\n   100.00%   3  gopmi\n", wantErr: "lost samples"},
		{name: "not a row", in: "# header\nError: something went wrong\n", wantErr: "unexpected line"},
		{name: "no count", in: "   100.00%  gopmi\n", wantErr: "unexpected line"},
		{name: "headers only", in: "# Samples: 0\n#\n\n", wantErr: "no samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePerfReport(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPerfRoles checks the role split: which comms each launcher's PM
// proper and launcher are, and that a cell's medians add them up run by
// run, leaving out the tasks (and their helper threads) and perf.
func TestPerfRoles(t *testing.T) {
	hydra := clients.Launcher{Name: "mpich", Template: []string{"/usr/bin/mpiexec.hydra", "-n", "{n}"}}
	gopmi := clients.Launcher{Name: "gopmi", Template: []string{"./bin/gopmi", "run", "-n", "{n}"}}
	custom := clients.Launcher{Name: "mine", Template: []string{"/opt/x/my-process-manager-launcher", "{n}"}}
	for _, tt := range []struct {
		l    clients.Launcher
		want roleSplit
	}{
		{hydra, roleSplit{PM: []string{"mpiexec.hydra", "hydra_pmi_proxy"}}},
		{gopmi, roleSplit{PM: []string{"gopmi", "gopmi-shim", "gopmi-rm-local", "gopmi-pmix"}}},
		{clients.Launcher{Name: "srun", Template: []string{"srun", "--mpi=pmi2", "-n", "{n}"}}, roleSplit{PM: []string{"srun", "slurmstepd", "gopmi-slurm", "gopmi-slurm-pmi"}}},
		{custom, roleSplit{PM: []string{"my-process-mana"}}},
	} {
		if diff := cmp.Diff(tt.want, rolesOf(tt.l)); diff != "" {
			t.Errorf("rolesOf(%s) (-want +got):\n%s", tt.l, diff)
		}
	}

	samples, err := parsePerfReport(perfHydraReport)
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpuMS(samples)
	approx := cmpopts.EquateApprox(0, 1e-9)
	if diff := cmp.Diff(map[string]float64{"mpi_hello": 71.7, "hydra_pmi_proxy": 4.8, "mpiexec.hydra": 3.9, "async": 0.4}, cpu, approx); diff != "" {
		t.Errorf("cpuMS (-want +got):\n%s", diff)
	}
	hc := &cell{PerfRuns: []map[string]float64{cpu}}
	summarizePerf(hc, rolesOf(hydra))
	if !cmp.Equal(hc.PMProperCPUMS, 8.7, approx) {
		t.Errorf("hydra: pm=%v, want 8.7", hc.PMProperCPUMS)
	}

	// Three gopmi runs with shims; the second has no backend (a one-node
	// job starts it on demand). The PM's median is the median of each
	// run's sum.
	gc := &cell{PerfRuns: []map[string]float64{
		{"gopmi": 10, "gopmi-shim": 8, "gopmi-rm-local": 6, "mpi_hello": 70, "async": 1},
		{"gopmi": 12, "gopmi-shim": 9, "mpi_hello": 75},
		{"gopmi": 11, "gopmi-shim": 7, "gopmi-rm-local": 5, "mpi_hello": 72, "async": 2},
	}}
	summarizePerf(gc, rolesOf(gopmi))
	want := map[string]float64{"gopmi": 11, "gopmi-shim": 8, "gopmi-rm-local": 5, "mpi_hello": 72, "async": 1}
	if diff := cmp.Diff(want, gc.PerfCPUMS, approx); diff != "" {
		t.Errorf("gopmi perf_cpu_ms (-want +got):\n%s", diff)
	}
	// pm per run: 24, 21, 23.
	if gc.PMProperCPUMS != 23 {
		t.Errorf("gopmi: pm=%v, want 23", gc.PMProperCPUMS)
	}
}

func TestPerfDecision(t *testing.T) {
	broken := errors.New("perf record: exit status 255: no access")
	for _, tt := range []struct {
		mode    string
		probe   error
		use     bool
		note    string
		wantErr bool
	}{
		{mode: "auto", use: true},
		{mode: "on", use: true},
		{mode: "off", probe: nil, note: "-perf off"},
		{mode: "auto", probe: broken, note: "perf does not work here: perf record: exit status 255: no access"},
		{mode: "on", probe: broken, wantErr: true},
	} {
		use, note, err := perfDecision(tt.mode, tt.probe)
		if use != tt.use || note != tt.note || (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, broken)) {
			t.Errorf("perfDecision(%s, %v) = %v, %q, %v; want %v, %q, error %v", tt.mode, tt.probe, use, note, err, tt.use, tt.note, tt.wantErr)
		}
	}

	p := &perfCPU{bin: "/no/such/perf", dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.probe(ctx); err == nil || !strings.Contains(err.Error(), "install linux-perf") {
		t.Errorf("probe without perf: %v, want an error naming linux-perf", err)
	}
}

// TestPrintWithoutPerf checks the report when perf is not used: the note
// says why, and (c') is the only CPU table.
func TestPrintWithoutPerf(t *testing.T) {
	cfg := &config{launchers: []clients.Launcher{clients.Hydra}, helloNs: []int{1}, runs: 1, runsLarge: 1}
	rep := &report{
		Host: map[string]string{}, Launchers: map[string]string{"hydra": "mpiexec.hydra -n {n}"}, Reference: "hydra",
		PerfNote: "perf does not work here: exec: \"perf\": executable file not found in $PATH (install linux-perf)",
		Roles:    map[string]roleSplit{"hydra": rolesOf(clients.Hydra)},
		Cells: []*cell{{Section: "hello", N: 1, Launcher: "hydra", Samples: []sample{{WallMS: 50, PMCPUMS: 9.5}},
			Median: sample{WallMS: 50, PMCPUMS: 9.5}, MinMS: 50}},
	}
	var out bytes.Buffer
	printReport(&out, cfg, rep)
	for _, re := range []string{
		`(?m)^\(c\) process-manager CPU by process: not measured \(perf not used: perf does not work here: .*install linux-perf\)\)$`,
		`(?m)^\(c'\) process-manager CPU estimate`,
		`(?m)^hello\s+1\s+9\.5\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", re, out.String())
		}
	}
	if strings.Contains(out.String(), "task-clock") {
		t.Errorf("perf table printed without perf:\n%s", out.String())
	}
}

// repoGopmi is the repository's ./bin/gopmi, "" if it is not built.
func repoGopmi(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(d, "bin", "gopmi")
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// TestQuickPerfOn is a smoke run of (c) under perf: the perf table has
// numbers for hydra and, when ./bin/gopmi is built, for gopmi's roles, and
// the JSON holds the per-comm and per-role medians.
func TestQuickPerfOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := (&perfCPU{bin: "perf", dir: t.TempDir()}).probe(ctx); err != nil {
		t.Skipf("perf does not work on this machine (%v); the bench falls back to the rusage estimate", err)
	}
	gopmi := repoGopmi(t)
	args := []string{"-quick", "-perf", "on", "-daemon=false", "-gopmi", "/no/such/gopmi"}
	if gopmi != "" {
		args[len(args)-1] = gopmi
	} else {
		t.Log("./bin/gopmi is not built (make build): measuring hydra only")
	}
	out, rep := runBench(t, args...)

	num := `\d+\.\d`
	ratio := `\d+\.\d\d \(\d+\.\d\dx\)`
	res := []string{`(?m)^\(c\) process-manager CPU by process \(perf task-clock samples, 1 run\): ms, medians$`,
		`(?m)^\(c'\) process-manager CPU estimate`}
	if gopmi != "" {
		res = append(res,
			`(?m)^workload\s+N\s+hydra\s+gopmi\s+gopmi/hydra\s*$`,
			`(?m)^hello\s+2\s+`+num+`\s+`+num+`\s+`+ratio+`\s*$`,
			`(?m)^pmi2_bench\s+4\s+`+num+`\s+`+num+`\s+`+ratio+`\s*$`)
	} else {
		res = append(res, `(?m)^workload\s+N\s+hydra\s*$`, `(?m)^hello\s+2\s+`+num+`\s*$`, `(?m)^pmi2_bench\s+4\s+`+num+`\s*$`)
	}
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s", re)
		}
	}
	if rep.PerfNote != "" || rep.Params["cpu_runs"] != 5 {
		t.Errorf("perf_note = %q, cpu_runs = %d", rep.PerfNote, rep.Params["cpu_runs"])
	}
	launchers := map[string]bool{}
	for _, c := range rep.Cells {
		launchers[c.Launcher] = true
		if c.Section == "pmi2floor" || c.Section == "burst" {
			continue // not measured under perf
		}
		task := map[string]string{"true": "true", "hello": "mpi_hello", "pmi2": "pmi2_bench"}[c.Section]
		if c.Fail != "" || c.PerfFail != "" || len(c.PerfRuns) != 1 {
			t.Errorf("%s N=%d %s: fail=%q perf_fail=%q perf runs=%d", c.Section, c.N, c.Launcher, c.Fail, c.PerfFail, len(c.PerfRuns))
			continue
		}
		if c.PerfCPUMS[task] <= 0 || c.PerfCPUMS["perf"] != 0 || c.PMProperCPUMS <= 0 {
			t.Errorf("%s N=%d %s: perf_cpu_ms=%v pm_proper=%v", c.Section, c.N, c.Launcher, c.PerfCPUMS, c.PMProperCPUMS)
		}
		if pm := sum(c.PerfCPUMS, rep.Roles[c.Launcher].PM); c.PMProperCPUMS != pm {
			t.Errorf("%s N=%d %s: pm_proper=%v, want %v from %v", c.Section, c.N, c.Launcher, c.PMProperCPUMS, pm, c.PerfCPUMS)
		}
		if c.Launcher == "gopmi" && c.PerfCPUMS["gopmi"] <= 0 {
			t.Errorf("%s N=%d gopmi: perf_cpu_ms=%v", c.Section, c.N, c.PerfCPUMS)
		}
	}
	if gopmi != "" {
		// (e): every binary started, with its init traced (not /bin/true's).
		var bins []string
		for _, row := range rep.Startup {
			bins = append(bins, row.Binary)
			if row.Fail != "" || row.Runs != 3 || row.WallMS <= 0 || row.Faults <= 0 || (row.InitMS <= 0) != (row.Binary == "/bin/true") {
				t.Errorf("startup row %+v", row)
			}
		}
		if want := []string{"/bin/true", "gopmi", "gopmi-rm-local", "gopmi-shim"}; !slices.Equal(bins, want) {
			t.Errorf("startup rows for %v, want %v", bins, want)
		}
		if !regexp.MustCompile(`(?m)^gopmi-shim\s+exec to READY=1, one task\s+\d+\.\d\d\s+\d+\.\d\s+\d+\.\d\d\s+\d+\s*$`).MatchString(out) {
			t.Errorf("output lacks the shim's start-up row")
		}
	}
	if !launchers["hydra"] || launchers["gopmi"] != (gopmi != "") {
		t.Errorf("cells of %v, want hydra and gopmi=%v", launchers, gopmi != "")
	}
}

// Under Slurm, (b) also gives each launcher's whole PMI part, its wall
// minus srun --mpi=none's /bin/true at the same N, and (c') is not
// pretended: srun's wait4 tree does not hold the step daemons.
func TestPrintSlurmPMIPart(t *testing.T) {
	ls := []clients.Launcher{
		{Name: "srun-pmi2", Template: []string{"srun", "--mpi=pmi2", "-n", "{n}"}},
		{Name: "srun-gopmi", Template: []string{"srun", "--mpi=gopmi", "-n", "{n}"}},
		{Name: "srun-none", Template: []string{"srun", "--mpi=none", "-n", "{n}"}},
	}
	cfg := &config{launchers: ls, floorLauncher: "srun-none", slurm: true, trueNs: []int{64}, pmi2Ns: []int{64},
		runs: 1, runsLarge: 1}
	cellOf := func(section, l string, wall float64) *cell {
		return &cell{Section: section, N: 64, Launcher: l, Samples: []sample{{WallMS: wall}}, Median: sample{WallMS: wall}, MinMS: wall}
	}
	rep := &report{
		Host: map[string]string{}, Launchers: map[string]string{}, Reference: "srun-pmi2", Roles: map[string]roleSplit{},
		Cells: []*cell{
			cellOf("true", "srun-pmi2", 210), cellOf("true", "srun-gopmi", 220), cellOf("true", "srun-none", 200),
			cellOf("pmi2", "srun-pmi2", 500), cellOf("pmi2", "srun-gopmi", 300),
		},
	}
	var out bytes.Buffer
	printReport(&out, cfg, rep)
	for _, re := range []string{
		`(?m)^64\s+srun-pmi2\s+1\s.*\s300\.0\s*$`,
		`(?m)^64\s+srun-gopmi\s+1\s.*\s100\.0\s+0\.33 \(3\.00x\)\s*$`,
		`(?m)^\(c'\) not measured under Slurm`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", re, out.String())
		}
	}
	if regexp.MustCompile(`(?m)^64\s+srun-none\s`).MatchString(out.String()) {
		t.Errorf("the floor launcher has a (b) row:\n%s", out.String())
	}
	if got := (&perfCPU{bin: "perf", all: true}).record("d", []string{"srun"}); !slices.Contains(got, "-a") {
		t.Errorf("perf record %v: want -a to see the step daemons", got)
	}
}
