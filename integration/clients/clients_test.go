package clients_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/proc"
)

// bins is filled once by TestMain; a build failure fails every test that
// needs a program, with the install hint.
var (
	bins     map[string]string
	buildErr error
)

// launcher is the process manager under test: GOPMI_TEST_LAUNCHER
// ("name=template", e.g. "gopmi=/path/gopmi run -n {n}") or hydra.
func launcher(t *testing.T) clients.Launcher {
	t.Helper()
	spec := os.Getenv("GOPMI_TEST_LAUNCHER")
	if spec == "" {
		if _, err := exec.LookPath(clients.Hydra.Template[0]); err != nil {
			t.Fatalf("mpiexec.hydra not found: install with %s (or set GOPMI_TEST_LAUNCHER)", clients.InstallHint)
		}
		return clients.Hydra
	}
	l, err := clients.ParseLauncher(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func needBins(t *testing.T) map[string]string {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("build clients: %v", buildErr)
	}
	return bins
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	dir, err := clients.DefaultDir()
	if err == nil {
		bins, err = clients.Build(ctx, dir)
	}
	buildErr = err
	cancel()
	goleak.VerifyTestMain(m)
}

func TestBuildIsCachedAndComplete(t *testing.T) {
	b := needBins(t)
	before := map[string]time.Time{}
	for _, name := range clients.Names() {
		path, ok := b[name]
		if !ok {
			t.Fatalf("Build returned no %s", name)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode()&0o111 == 0 {
			t.Fatalf("%s: not an executable file: %v", path, err)
		}
		before[name] = st.ModTime()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	again, err := clients.Build(ctx, filepath.Dir(b[clients.MPIHello]))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, again); diff != "" {
		t.Fatalf("second Build returned other paths (-first +second):\n%s", diff)
	}
	for name, path := range again {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !st.ModTime().Equal(before[name]) {
			t.Errorf("%s was rebuilt although its sources did not change", name)
		}
	}
}

func TestBuildIntoFreshDir(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every program again (-short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b, err := clients.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != len(clients.Names()) {
		t.Fatalf("built %d programs, want %d", len(b), len(clients.Names()))
	}
	for _, p := range b {
		if filepath.Dir(p) != dir {
			t.Errorf("%s not in %s", p, dir)
		}
	}
}

// TestBuildNamesMissingCompiler runs Build with an empty PATH: the error
// must say which packages to install, not just "exec: not found".
func TestBuildNamesMissingCompiler(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := clients.Build(ctx, t.TempDir())
	if !errors.Is(err, clients.ErrMissingTool) {
		t.Fatalf("err = %v, want ErrMissingTool", err)
	}
	for _, want := range []string{"mpicc.mpich not found", "gcc not found", "apt-get install mpich libmpich-dev libpmi2-0-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestParseLauncher(t *testing.T) {
	tests := []struct {
		spec    string
		want    clients.Launcher
		wantErr bool
	}{
		{spec: "hydra=mpiexec.hydra -n {n}", want: clients.Hydra},
		{spec: "gopmi= ./bin/gopmi  run -n {n} ", want: clients.Launcher{Name: "gopmi", Template: []string{"./bin/gopmi", "run", "-n", "{n}"}}},
		{spec: "srun=srun --mpi=pmi2 -n {n}", want: clients.Launcher{Name: "srun", Template: []string{"srun", "--mpi=pmi2", "-n", "{n}"}}},
		{spec: "x=prog --ntasks={n}", want: clients.Launcher{Name: "x", Template: []string{"prog", "--ntasks={n}"}}},
		{spec: "mpiexec.hydra -n {n}", wantErr: true},
		{spec: "=mpiexec -n {n}", wantErr: true},
		{spec: "hydra=", wantErr: true},
		{spec: "hydra=mpiexec -n 4", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := clients.ParseLauncher(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLauncherArgv(t *testing.T) {
	l := clients.Launcher{Name: "x", Template: []string{"run", "--ntasks={n}", "-n", "{n}"}}
	got := l.Argv(16, "/bin/prog", "a", "b=1")
	want := []string{"run", "--ntasks=16", "-n", "16", "/bin/prog", "a", "b=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestParsing(t *testing.T) {
	out := "ok hello rank=0 size=2 sum=3\ncpu_us=1500 rank=0\nnoise\ncpu_us=2500 rank=1\ncpu_us=bad\n"
	if diff := cmp.Diff([]string{"ok hello rank=0 size=2 sum=3"}, clients.Lines(out, "ok ")); diff != "" {
		t.Errorf("Lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"rank": "0", "size": "2", "sum": "3"}, clients.Fields("ok hello rank=0 size=2 sum=3")); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
	total, n := clients.TaskCPU(out)
	if total != 4*time.Millisecond || n != 2 {
		t.Errorf("TaskCPU = %v, %d; want 4ms, 2", total, n)
	}
}

// TestChecksCanFail feeds made-up results to the case table: each must be
// rejected, or the table would pass anything.
func TestChecksCanFail(t *testing.T) {
	byName := map[string]clients.Case{}
	for _, c := range clients.Cases() {
		if _, dup := byName[c.Name]; dup {
			t.Fatalf("case %s twice", c.Name)
		}
		byName[c.Name] = c
	}
	tests := []struct {
		name     string
		caseName string
		launcher string
		res      clients.Result
	}{
		{"missing rank", "hello/n=4", "gopmi", clients.Result{Stdout: okHello(4, 3, true)}},
		{"wrong sum", "hello/n=1", "gopmi", clients.Result{Stdout: "ok hello rank=0 size=1 sum=2\ncpu_us=1 rank=0\n"}},
		{"non-zero exit", "hello/n=1", "gopmi", clients.Result{ExitCode: 1, Stdout: okHello(1, 1, true)}},
		{"timed out", "hello/n=1", "gopmi", clients.Result{TimedOut: true, ExitCode: -1, Stdout: okHello(1, 1, true)}},
		{"no cpu lines", "hello/n=4", "gopmi", clients.Result{Stdout: okHello(4, 4, false)}},
		{"abort wrong code", "abort/n=4", "gopmi", clients.Result{ExitCode: 1, Stdout: "aborting rank=1 size=4 code=7\n"}},
		{"hydra known failure absent", "pmi2/ns/n=2", "hydra", clients.Result{Stdout: "ok pmi2 rank=0 step=publish\n"}},
		{"gopmi must not fail ns", "pmi2/ns/n=2", "gopmi", clients.Result{ExitCode: 1, Stdout: "ok pmi2 rank=0 step=publish\nfail pmi2 rank=1 reason=lookup-rc-14\n"}},
		{"abort that hangs", "pmi2/abort/n=2", "gopmi", clients.Result{TimedOut: true, ExitCode: -1, Stdout: "aborting pmi2 rank=1 size=2\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := byName[tt.caseName]
			if !ok {
				t.Fatalf("no case %s", tt.caseName)
			}
			if err := c.Verify(tt.launcher, tt.res); err == nil {
				t.Fatal("Verify accepted a bad result")
			}
		})
	}
	// And the good form passes, so the failures above are for the right reason.
	if err := byName["hello/n=4"].Verify("gopmi", clients.Result{Stdout: okHello(4, 4, true)}); err != nil {
		t.Fatalf("good result rejected: %v", err)
	}
}

// TestPerRank feeds made-up output to the exported per-rank checks: each
// bad form must be rejected and the good one accepted.
func TestPerRank(t *testing.T) {
	mode := func(m string) func(map[string]string) bool {
		return func(f map[string]string) bool { return f["mode"] == m }
	}
	tests := []struct {
		name   string
		check  clients.Check
		stdout string
		ok     bool
	}{
		{"all ranks", clients.PerRank("ok x ", 2, nil), "ok x rank=1 size=2\nok x rank=0 size=2\n", true},
		{"missing rank", clients.PerRank("ok x ", 2, nil), "ok x rank=1 size=2\n", false},
		{"rank twice", clients.PerRank("ok x ", 2, nil), "ok x rank=0\nok x rank=0\nok x rank=1\n", false},
		{"rank out of range", clients.PerRank("ok x ", 2, nil), "ok x rank=0\nok x rank=2\n", false},
		{"no rank", clients.PerRank("ok x ", 1, nil), "ok x size=1\n", false},
		{"wrong size", clients.PerRank("ok x ", 2, nil), "ok x rank=0 size=3\nok x rank=1 size=2\n", false},
		{"fields", clients.PerRank("ok x ", 1, clients.FieldsAre("a", "1", "b", "2")), "ok x rank=0 a=1 b=2\n", true},
		{"field differs", clients.PerRank("ok x ", 1, clients.FieldsAre("a", "1", "b", "2")), "ok x rank=0 a=1 b=3\n", false},
		{"field missing", clients.PerRank("ok x ", 1, clients.FieldsAre("a", "1")), "ok x rank=0\n", false},
		{"where keeps", clients.PerRankWhere("ok x ", 1, mode("m"), nil), "ok x rank=0 step=s\nok x rank=0 mode=m\n", true},
		{"where drops all", clients.PerRankWhere("ok x ", 1, mode("m"), nil), "ok x rank=0 mode=other\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check(clients.Result{Stdout: tt.stdout})
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestTail(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 2, ""},
		{"a\nb", 2, "a\nb\n"},
		{"a\nb\nc\nd\n", 2, "... (2 lines cut)\nc\nd\n"},
		{"a\nb\nc\nd", 2, "... (2 lines cut)\nc\nd\n"},
	} {
		if got := clients.Tail(tt.in, tt.n); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func okHello(n, print int, cpu bool) string {
	var b strings.Builder
	for r := 0; r < print; r++ {
		fmt.Fprintf(&b, "ok hello rank=%d size=%d sum=%d\n", r, n, n*(n+1)/2)
		if cpu {
			fmt.Fprintf(&b, "cpu_us=100 rank=%d\n", r)
		}
	}
	return b.String()
}

// TestRunKillsTreeOnTimeout checks that a run past its deadline returns
// ErrTimeout with the output so far, and that a grandchild in its own
// session (as hydra's proxy is) does not survive.
func TestRunKillsTreeOnTimeout(t *testing.T) {
	// The grandchild's pid goes to a file the shell writes first, not to
	// the output Run may not have read when it kills: the test holds on a
	// loaded machine too (once, stdout was still empty at the deadline).
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := clients.Run(ctx, []string{"sh", "-c", "setsid sleep 30 & echo $! > " + pidFile + "; wait"}, clients.RunOptions{KillGrace: time.Second})
	if !errors.Is(err, clients.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("TimedOut=%v ExitCode=%d, want true -1", res.TimedOut, res.ExitCode)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		// The shell never ran before the deadline: no grandchild to leak.
		t.Logf("the shell did not start its child within the deadline (%v): nothing could leak", err)
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	// Gone, or a zombie waiting for init to reap it: either way dead.
	if err := proc.WaitExited(pid, 5*time.Second); err != nil {
		t.Fatalf("grandchild after the run was killed: %v", err)
	}
}

func TestRunReportsExitAndCPU(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A child that burns a little CPU: TreeCPU must include waited-for
	// descendants, not just the shell.
	res, err := clients.Run(ctx, []string{"sh", "-c", "(i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done); echo $GOPMI_TEST_ALARM; exit 5"}, clients.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 5 {
		t.Errorf("ExitCode = %d, want 5", res.ExitCode)
	}
	if res.TreeCPU <= 0 {
		t.Errorf("TreeCPU = %v, want > 0", res.TreeCPU)
	}
	if alarm, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); alarm < 2 || alarm > 10 {
		t.Errorf("GOPMI_TEST_ALARM = %q, want 80%% of the 10s deadline", res.Stdout)
	}
}

// TestCases runs the conformance table against the launcher under test
// (hydra by default: its known deviations are asserted, not skipped).
func TestCases(t *testing.T) {
	b := needBins(t)
	l := launcher(t)
	heavy := os.Getenv("GOPMI_TEST_HEAVY") == "1"
	for _, c := range clients.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Heavy && !heavy {
				t.Skip("heavy case (minutes on 2 cores): run with GOPMI_TEST_HEAVY=1")
			}
			ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
			defer cancel()
			res, err := clients.Run(ctx, l.Argv(c.N, b[c.Program], c.Args...), clients.RunOptions{})
			if err != nil && !errors.Is(err, clients.ErrTimeout) {
				t.Fatal(err)
			}
			if err := c.Verify(l.Name, res); err != nil {
				t.Fatal(err)
			}
			if l.Name == clients.Hydra.Name && c.Hydra != nil {
				t.Logf("judged by hydra's known-deviation check: %s; this run: %s", c.HydraNote, res.Summary())
			}
			t.Logf("wall %s", res.Wall.Round(time.Millisecond))
		})
	}
}

// TestHydraPMIPort covers pmi1_only's PMI_PORT/PMI_ID path (the initack
// handshake), which only hydra's -pmi-port mode offers here.
func TestHydraPMIPort(t *testing.T) {
	b := needBins(t)
	if _, err := exec.LookPath("mpiexec.hydra"); err != nil {
		t.Fatalf("mpiexec.hydra not found: install with %s", clients.InstallHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := clients.Run(ctx, []string{"mpiexec.hydra", "-pmi-port", "-n", "3", b[clients.PMI1Only]}, clients.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := clients.All(clients.ExitCode(0), clients.NoFail(), clients.PerRank("ok pmi1 ", 3, nil))(res); err != nil {
		t.Fatalf("pmi1_only over PMI_PORT: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
}
