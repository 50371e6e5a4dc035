package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// What TestMain prepares once for every test.
var (
	// binDir holds gopmi, gopmi-shim and gopmi-rm-local, built without
	// -race: they are the subjects, not the test.
	binDir   string
	gopmiBin string
	// progs maps clients program names to their built paths.
	progs map[string]string
	// selfBin is this test binary, started as a task by the failure tests
	// (task_test.go).
	selfBin string
	// setupErr fails every test: a missing compiler or library is a
	// failure with the install hint, never a skip.
	setupErr error
)

// commands are the packages `go build` turns into the three binaries.
var commands = []string{"./hostrm/cmd/gopmi", "./shim/cmd/gopmi-shim", "./hostrm/local/cmd/gopmi-rm-local", "./hostrm/slurm/cmd/gopmi-rm-slurm", "./hostrm/slurm/cmd/gopmi-slurm"}

func TestMain(m *testing.M) {
	if os.Getenv(taskEnv) != "" {
		os.Exit(taskMain(os.Args[1:]))
	}
	if os.Getenv(forgeEnv) != "" {
		os.Exit(forgeMain())
	}
	if os.Getenv(floodEnv) != "" {
		os.Exit(floodMain())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse() // for testing.Verbose
	dir, err := os.MkdirTemp("", "gopmi-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	start := time.Now()
	setupErr = setup(ctx, dir)
	cancel()
	if setupErr == nil && testing.Verbose() {
		mode := "by gopmi run itself"
		if shimMode() {
			mode = "by gopmi-shim processes (GOPMI_IT_SERVE=shim)"
		}
		fmt.Printf("integration: binaries and client programs ready in %s; one-node jobs served %s\n", time.Since(start).Round(time.Millisecond), mode)
	}
	code := m.Run()
	stopFlux()
	if !stopSlurm() && code == 0 {
		code = 1
	}
	printTimings()
	return code
}

func setup(ctx context.Context, dir string) error {
	var errs []error
	binDir = filepath.Join(dir, "bin")
	if err := buildGopmi(ctx, binDir); err != nil {
		errs = append(errs, err)
	}
	gopmiBin = filepath.Join(binDir, "gopmi")

	cdir, err := clients.DefaultDir()
	if err == nil {
		progs, err = clients.Build(ctx, cdir)
	}
	if err != nil {
		if errors.Is(err, clients.ErrMissingTool) {
			err = fmt.Errorf("%w\nthe integration tests need MPICH 4.0.2 and Slurm's libpmi2: %s (.ci/run installs them)", err, clients.InstallHint)
		}
		errs = append(errs, fmt.Errorf("build client programs: %w", err))
	}

	if selfBin, err = os.Executable(); err != nil {
		errs = append(errs, fmt.Errorf("find the test binary: %w", err))
	}
	return errors.Join(errs...)
}

// buildGopmi runs a plain `go build` of the three commands from the module
// root into dir.
func buildGopmi(ctx context.Context, dir string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build gopmi: the go command is not in PATH: %w", err)
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return fmt.Errorf("build gopmi: %w", err)
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, commands...)
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build gopmi: go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// moduleRoot is the gopmi module's directory.
func moduleRoot(ctx context.Context) (string, error) {
	var root bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Stdout = &root
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(root.String())
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the gopmi module")
	}
	return filepath.Dir(mod), nil
}

// begin fails t at once when setup failed and logs the test's wall time
// when it ends; every top-level test calls it first.
func begin(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("integration setup failed: %v", setupErr)
	}
	start := time.Now()
	t.Cleanup(func() {
		d := time.Since(start)
		t.Logf("timing: %s took %s", t.Name(), d.Round(time.Millisecond))
		timings.add(t.Name(), d)
	})
}

// timings collects each test's wall time for the summary -v prints.
var timings timingTable

type timingTable struct {
	mu   sync.Mutex
	rows []timingRow
}

type timingRow struct {
	name string
	d    time.Duration
}

func (tt *timingTable) add(name string, d time.Duration) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.rows = append(tt.rows, timingRow{name, d})
}

func printTimings() {
	if !testing.Verbose() {
		return
	}
	timings.mu.Lock()
	defer timings.mu.Unlock()
	rows := slices.Clone(timings.rows)
	slices.SortFunc(rows, func(a, b timingRow) int { return int(b.d - a.d) })
	var total time.Duration
	for _, r := range rows {
		total += r.d
	}
	fmt.Printf("integration timing: %d tests, %s in tests, slowest first:\n", len(rows), total.Round(time.Millisecond))
	for _, r := range rows {
		fmt.Printf("  %8s  %s\n", r.d.Round(time.Millisecond), r.name)
	}
}

// defaultTimeout bounds one gopmi run unless a test says otherwise.
const defaultTimeout = 60 * time.Second

// runOpts tunes gopmiRun.
type runOpts struct {
	timeout time.Duration
	env     []string
}

// gopmiRun runs `gopmi run args...` with runArgv.
func gopmiRun(t *testing.T, o runOpts, args ...string) clients.Result {
	t.Helper()
	return runArgv(t, o, gopmiArgv(args...))
}

// shimMode says how `gopmi run` serves a job on one node in this run of
// the tests: by itself (the default), or, with GOPMI_IT_SERVE=shim, by a
// gopmi-shim process with its gopmi-rm-local backend, as a step daemon
// serves it. `make test` runs the suite both ways, so every test holds in
// both. It is read where a test runs, so that go test's cache knows the
// results depend on it.
func shimMode() bool { return os.Getenv("GOPMI_IT_SERVE") == "shim" }

// oneNodePPN is a -ppn that puts any job of these tests on one node.
const oneNodePPN = "1048576"

// gopmiArgv is the command line of `gopmi run args...` in this run's
// serve mode: in shim mode a run on one node (no -ppn, or -ppn 0) gets a
// -ppn that keeps it on one node but serves it with a shim.
func gopmiArgv(args ...string) []string {
	argv := []string{gopmiBin, "run"}
	if !shimMode() {
		return append(argv, args...)
	}
	out, given := slices.Clone(args), false
	for i := 0; i < len(out) && out[i] != ":"; i++ {
		switch {
		case (out[i] == "-ppn" || out[i] == "--ppn") && i+1 < len(out):
			given = true
			if out[i+1] == "0" {
				out[i+1] = oneNodePPN
			}
		case out[i] == "-ppn=0" || out[i] == "--ppn=0":
			given, out[i] = true, "-ppn="+oneNodePPN
		case strings.HasPrefix(out[i], "-ppn=") || strings.HasPrefix(out[i], "--ppn="):
			given = true
		}
	}
	if !given {
		argv = append(argv, "-ppn", oneNodePPN)
	}
	return append(argv, out...)
}

// runArgv runs argv and returns its result; a run that has to be killed at
// its deadline fails the test with the output so far.
func runArgv(t *testing.T, o runOpts, argv []string) clients.Result {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	r, err := clients.Run(ctx, argv, clients.RunOptions{Env: o.env})
	logRun(t, r)
	if err != nil {
		t.Fatalf("%v\n%s", err, output(r))
	}
	return r
}

// logRun is the one line per run that shows what it cost.
func logRun(t *testing.T, r clients.Result) {
	t.Helper()
	t.Logf("run %s: exit %d in %s", shortArgv(r.Argv), r.ExitCode, r.Wall.Round(time.Millisecond))
}

// shortArgv names binaries by their base name so log lines stay short.
func shortArgv(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if filepath.IsAbs(a) {
			a = filepath.Base(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// output is a run's output for failure messages, cut to its last lines.
func output(r clients.Result) string {
	return fmt.Sprintf("--- %s (exit %d, %s)\n--- stdout\n%s--- stderr\n%s", shortArgv(r.Argv), r.ExitCode,
		r.Wall.Round(time.Millisecond), clients.Tail(r.Stdout, 40), clients.Tail(r.Stderr, 30))
}

// verify applies every check and reports all that fail, with the output.
func verify(t *testing.T, r clients.Result, checks ...clients.Check) {
	t.Helper()
	if err := clients.All(checks...)(r); err != nil {
		t.Errorf("%v\n%s", err, output(r))
	}
}

// failed wants a non-zero exit (gopmi's own, not a kill by the test).
func failed() clients.Check {
	return func(r clients.Result) error {
		if r.ExitCode <= 0 {
			return fmt.Errorf("exit code %d, want a non-zero exit status", r.ExitCode)
		}
		return nil
	}
}

// within wants the run to have ended in less than d.
func within(d time.Duration) clients.Check {
	return func(r clients.Result) error {
		if r.Wall >= d {
			return fmt.Errorf("took %s, want less than %s", r.Wall.Round(time.Millisecond), d)
		}
		return nil
	}
}

// gopmiLine wants every sub (any case) on one "gopmi:" line of stderr, so
// a message is judged as a whole rather than word by word across lines.
func gopmiLine(subs ...string) clients.Check {
	return func(r clients.Result) error {
		if !someLineHasAll(clients.Lines(r.Stderr, "gopmi: "), subs) {
			return fmt.Errorf("no \"gopmi:\" line on stderr contains all of %q", subs)
		}
		return nil
	}
}

// stderrLine wants every sub (any case) on one line of stderr, gopmi's
// summary or a log line.
func stderrLine(subs ...string) clients.Check {
	return func(r clients.Result) error {
		if !someLineHasAll(strings.Split(r.Stderr, "\n"), subs) {
			return fmt.Errorf("no line on stderr contains all of %q", subs)
		}
		return nil
	}
}

// someLineHasAll reports whether one of lines holds every sub, in any case.
func someLineHasAll(lines, subs []string) bool {
	for _, l := range lines {
		if containsAll(l, subs...) {
			return true
		}
	}
	return false
}

// anyGopmiLine wants at least one "gopmi:" line saying the job failed.
func anyGopmiLine() clients.Check {
	return func(r clients.Result) error {
		if len(clients.Lines(r.Stderr, "gopmi: ")) == 0 {
			return fmt.Errorf("no \"gopmi:\" line on stderr says why the job failed")
		}
		return nil
	}
}

// containsAll reports whether s holds every sub, in any case.
func containsAll(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if !strings.Contains(s, strings.ToLower(sub)) {
			return false
		}
	}
	return true
}

// quiet wants no "gopmi:" failure line on stderr (a clean run says nothing).
func quiet() clients.Check {
	return func(r clients.Result) error {
		if l := clients.Lines(r.Stderr, "gopmi: "); len(l) > 0 {
			return fmt.Errorf("a clean run printed %d \"gopmi:\" lines, first: %s", len(l), l[0])
		}
		return nil
	}
}

// ownedCases are the conformance-table cases that a topical test runs
// (with extra checks or flags) instead of TestConformanceTable, so no case
// runs twice; the value names the owner.
var ownedCases = map[string]string{
	"hello/n=1":               "TestMPICHHello",
	"hello/n=4":               "TestMPICHHello",
	"hello/n=16":              "TestMPICHHello",
	"abort/n=4":               "TestMPICHAbort",
	"abort/code=3/rank=0/n=2": "TestMPICHAbort",
	"attrs/n=2":               "TestMPICHAttrs",
	"pubname/n=2":             "TestMPICHPubname",
	"pmi2/default/n=4":        "TestPMI2SingleNode",
	"pmi2/ns/n=4":             "TestPMI2SingleNode",
	"pmi2/spawn/n=2":          "TestPMI2SingleNode",
	"pmi2/abort/n=2":          "TestPMI2SingleNode",
	"pmi2/ring/n=4":           "TestPMI2SingleNode",
	"pmi2/long/n=4":           "TestPMI2SingleNode",
	"pmi1/n=4":                "TestPMIPort",
	"pmi1/n=1024":             "TestScale1024",
	"pmi2_bench/n=1024":       "TestScale1024",
}

// tableCase returns the conformance-table case named name, which must be
// listed in ownedCases.
func tableCase(t *testing.T, name string) clients.Case {
	t.Helper()
	if _, ok := ownedCases[name]; !ok {
		t.Fatalf("case %s is not in ownedCases: TestConformanceTable would run it again", name)
	}
	for _, c := range clients.Cases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the conformance table has no case %s", name)
	return clients.Case{}
}

// runCase runs c under `gopmi run flags... -n N`, judges it with the
// table's own expectations (Verify as "gopmi") and the extra checks, and
// returns the result.
func runCase(t *testing.T, c clients.Case, flags []string, extra ...clients.Check) clients.Result {
	t.Helper()
	l := gopmiLauncher(flags...)
	r := runArgv(t, runOpts{timeout: c.Timeout}, l.Argv(c.N, prog(t, c.Program), c.Args...))
	if err := c.Verify(l.Name, r); err != nil {
		t.Error(err)
	}
	verify(t, r, extra...)
	return r
}

// gopmiLauncher is `gopmi run flags... -n {n}` as a clients.Launcher.
func gopmiLauncher(flags ...string) clients.Launcher {
	return clients.Launcher{Name: "gopmi", Template: gopmiArgv(append(flags, "-n", "{n}")...)}
}

// prog is the path of a built client program.
func prog(t *testing.T, name string) string {
	t.Helper()
	p, ok := progs[name]
	if !ok {
		t.Fatalf("no built program %s", name)
	}
	return p
}
