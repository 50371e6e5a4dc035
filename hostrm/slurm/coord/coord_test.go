package coord

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startCoordinator serves a coordinator on loopback until the test ends
// and returns its address.
func startCoordinator(t *testing.T, opts Options) (*Coordinator, string) {
	t.Helper()
	opts.Listen = "127.0.0.1:0"
	ports := make(chan int, 1)
	opts.Ready = func(p int) { ports <- p }
	c := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	select {
	case p := <-ports:
		return c, "127.0.0.1:" + strconv.Itoa(p)
	case err := <-done:
		t.Fatalf("coordinator did not start: %v", err)
	}
	return nil, ""
}

// The real gopmi-rm-slurm binary, one process per node of every job as
// the shims start it, passes the conformance suite through the step's
// coordinator.
func TestConformancePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gopmi-rm-slurm")
	}
	bin := filepath.Join(t.TempDir(), "gopmi-rm-slurm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/gopmi/gopmi/hostrm/slurm/cmd/gopmi-rm-slurm").CombinedOutput(); err != nil {
		t.Fatalf("build gopmi-rm-slurm: %v\n%s", err, out)
	}
	secret, err := slurm.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startCoordinator(t, Options{Secret: secret})
	// Width 16: both nodes under the coordinator. Width 1: node n1's
	// fences go up through node n0's subtree server.
	for _, width := range []string{"16", "1"} {
		t.Run("width="+width, func(t *testing.T) {
			p := plugintest.Plugin{Path: bin, Args: []string{"-coordinator", addr, "-tree-width", width}, Env: []string{slurm.EnvSecret + "=" + secret}}
			plugintest.RunConformance(t, p.Harness(500*time.Millisecond, nil))
		})
	}
}

// Step secrets as srun's plugin makes them.
const (
	rightSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	wrongSecret = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
)

// A node that cannot prove the step secret is refused and logged; one
// that can is served.
func TestLinkNeedsTheSecret(t *testing.T) {
	var log plugintest.Buffer
	_, addr := startCoordinator(t, Options{Secret: rightSecret, Logger: zerolog.New(&log)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := direct.Dial(ctx, addr, direct.WithDialer(slurm.AuthDialer(wrongSecret)))
	if err == nil || !errors.Is(err, plugin.ErrUnavailable) {
		t.Fatalf("dial with the wrong secret: %v", err)
	}
	// The coordinator logs the refusal once it answered it.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), "handshake refused") ||
		!strings.Contains(log.String(), "wrong proof: the node does not hold the key"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the refusal was not logged: %q", log.String())
		}
	}

	// A peer that connects and says nothing holds up nobody.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	c, err := direct.Dial(ctx, addr, direct.WithDialer(slurm.AuthDialer(rightSecret)))
	if err != nil {
		t.Fatalf("dial with the right secret: %v", err)
	}
	defer c.Close()
	info, err := c.Backend().GetInfo(ctx)
	if err != nil || info.Name != "local" {
		t.Fatalf("GetInfo: %+v, %v", info, err)
	}
}

// An abort records MPI_Abort's errorcode as srun's status and cancels
// the step once; a later failure does not replace it.
func TestAbortCancelsTheStep(t *testing.T) {
	cancelled := make(chan string, 4)
	c, _ := startCoordinator(t, Options{Secret: rightSecret, Step: "42.0", Cancel: func(_ context.Context, step string) error {
		cancelled <- step
		return nil
	}})
	ctx := context.Background()
	job := plugin.Job{Nspace: "slurm.42.0", Size: 2, Nodes: []plugin.Node{{ID: 0, Name: "n1", Ranks: []int32{0}}, {ID: 1, Name: "n2", Ranks: []int32{1}}}}
	be := c.Backend()
	if _, err := be.Configure(ctx, &plugin.ConfigureRequest{Job: job, NodeID: 0}); err != nil {
		t.Fatal(err)
	}
	if err := be.Abort(ctx, &plugin.AbortRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 1}, Status: 7, Message: "bye"}); err != nil {
		t.Fatal(err)
	}
	if err := be.Abort(ctx, &plugin.AbortRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 0}, Status: 3, Message: "me too"}); err != nil {
		t.Fatal(err)
	}
	select {
	case step := <-cancelled:
		if step != "42.0" {
			t.Fatalf("cancelled %q", step)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the step was not cancelled")
	}
	if status, why := c.Status(); status != 7 || !strings.Contains(why, "rank 1 of job slurm.42.0 called abort with status 7: bye") {
		t.Fatalf("status %d (%s)", status, why)
	}
	for code, want := range map[int32]int{7: 7, 256: 1, -1: 255, 0: 1} {
		if got := exitStatus(code); got != want {
			t.Errorf("exitStatus(%d) = %d, want %d", code, got, want)
		}
	}
}

// A spawn of several commands becomes one srun --multi-prog line per
// command, in rank order, its arguments quoted as slurmstepd reads them;
// commands whose working directories or environments differ each get
// theirs on their line, through env; what a line cannot hold is refused
// by name.
func TestSrunArgs(t *testing.T) {
	args, env, conf, err := srunArgs([]local.AppSpec{{Path: "/bin/a", Args: []string{"x y"}, Procs: 2, Dir: "/tmp", Env: []string{"A=1"}}})
	if err != nil || conf != "" || strings.Join(args, " ") != "--mpi=gopmi --overlap -n 2 --chdir=/tmp /bin/a x y" || !slices.Equal(env, []string{"A=1"}) {
		t.Fatalf("one command: %q %q %q %v", args, env, conf, err)
	}
	args, env, conf, err = srunArgs([]local.AppSpec{
		{Path: "/bin/a", Args: []string{"it's", "%t", `a\b`}, Procs: 2, Dir: "/w", Env: []string{"A=1"}},
		{Path: "/bin/b", Procs: 1, Dir: "/w", Env: []string{"A=1"}},
	})
	if err != nil || strings.Join(args, " ") != "--mpi=gopmi --overlap -n 3 --chdir=/w" || !slices.Equal(env, []string{"A=1"}) {
		t.Fatalf("two commands alike: %q %q %v", args, env, err)
	}
	if want := "0-1 /bin/a 'it'\\''s' '%t' 'a\\b'\n2-2 /bin/b\n"; conf != want {
		t.Fatalf("configuration %q, want %q", conf, want)
	}
	// MPICH's spawnminfo1 asks each command for its own wdir, and
	// spawninfo1-like jobs for their own environment.
	args, env, conf, err = srunArgs([]local.AppSpec{
		{Path: "/bin/a", Procs: 1, Dir: "/x", Env: []string{"A=1"}},
		{Path: "/bin/b", Args: []string{"z"}, Procs: 2, Dir: "/y y", Env: []string{"B=it's"}},
	})
	if err != nil || strings.Join(args, " ") != "--mpi=gopmi --overlap -n 3" || env != nil {
		t.Fatalf("two commands apart: %q %q %v", args, env, err)
	}
	if want := "0-0 /usr/bin/env -C '/x' 'A=1' /bin/a\n1-2 /usr/bin/env -C '/y y' 'B=it'\\''s' /bin/b 'z'\n"; conf != want {
		t.Fatalf("configuration %q, want %q", conf, want)
	}
	for _, c := range []struct {
		apps []local.AppSpec
		want string
	}{
		{[]local.AppSpec{{Path: "/a", Procs: 1}, {Path: "/my b", Procs: 1}}, `command 1, "/my b"`},
		{[]local.AppSpec{{Path: "/a", Procs: 1, Args: []string{"x\ny"}}, {Path: "/b", Procs: 1}}, "newline"},
		{[]local.AppSpec{{Path: "/a", Procs: 1, Dir: "/x\ny"}, {Path: "/b", Procs: 1}}, "newline"},
	} {
		if _, _, _, err := srunArgs(c.apps); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, plugin.ErrNotSupported) {
			t.Errorf("%+v: %v, want an ErrNotSupported naming %q", c.apps, err, c.want)
		}
	}
}

// A spawn that Slurm delays rather than refuses fails when the spawn's
// time-out passes, with srun's last line as the reason, and the waiting
// srun is killed: never a hang.
func TestSpawnDelayedBySlurm(t *testing.T) {
	dir := t.TempDir()
	srun := filepath.Join(dir, "srun")
	pidFile := filepath.Join(dir, "pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + "\necho 'srun: Job 7 step creation temporarily disabled, retrying (Requested nodes are busy)' >&2\nexec sleep 60\n"
	if err := os.WriteFile(srun, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr plugintest.Buffer
	c, _ := startCoordinator(t, Options{Secret: rightSecret, Srun: srun, Stderr: &stderr})
	c.mu.Lock()
	c.addr = "127.0.0.1:1"
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.launch(ctx, &local.JobSpec{Job: plugin.Job{Nspace: "slurm.7.0.s1", Parent: "slurm.7.0"},
		Apps: []local.AppSpec{{Path: "/bin/true", Procs: 1}}})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Requested nodes are busy") {
		t.Fatalf("launch: %v, want the deadline with srun's last line", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("launch returned after %s", time.Since(start))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the waiting srun (pid %d) is still alive", pid)
	}
}

// A spawn's preput that is not UTF-8 is refused before srun runs: the
// child's bootstrap carries it as JSON, which would replace it.
func TestSpawnPreputNotUTF8(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	srun := filepath.Join(dir, "srun")
	if err := os.WriteFile(srun, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, _ := startCoordinator(t, Options{Secret: rightSecret, Srun: srun})
	c.mu.Lock()
	c.addr = "127.0.0.1:1"
	c.mu.Unlock()
	err := c.launch(context.Background(), &local.JobSpec{Job: plugin.Job{Nspace: "slurm.7.0.s1", Parent: "slurm.7.0"},
		Apps: []local.AppSpec{{Path: "/bin/true", Procs: 1}}, Preput: []plugin.Info{{Key: "k", Value: "\xff"}}})
	if !errors.Is(err, plugin.ErrInvalidArgument) || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("launch: %v, want a refusal", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("srun ran")
	}
}

// No node's Configure of a job returns before OnJob was told of it: a
// node whose ranks publish at once finds the job registered with the
// node daemon, whichever node configured first (CI saw a publish refused
// as of an unregistered job when the other node's OnJob came late).
func TestOnJobBeforeAnyConfigureReturns(t *testing.T) {
	var told atomic.Int64 // when OnJob returned, in ns since start
	start := time.Now()
	c, _ := startCoordinator(t, Options{Secret: rightSecret, Step: "43.0", OnJob: func(plugin.Job, string) {
		time.Sleep(200 * time.Millisecond)
		told.Store(int64(time.Since(start)))
	}})
	job := plugin.Job{Nspace: "slurm.43.0", Size: 2, Nodes: []plugin.Node{{ID: 0, Name: "n1", Ranks: []int32{0}}, {ID: 1, Name: "n2", Ranks: []int32{1}}}}
	returned := make(chan time.Duration, 2)
	for node := range 2 {
		go func() {
			if _, err := c.Backend().Configure(context.Background(), &plugin.ConfigureRequest{Job: job, NodeID: int32(node)}); err != nil {
				t.Error(err)
			}
			returned <- time.Since(start)
		}()
	}
	for range 2 {
		if at, done := <-returned, time.Duration(told.Load()); done == 0 || at < done {
			t.Fatalf("a node's Configure returned at %v, OnJob returned at %v (0: not yet)", at, done)
		}
	}
}

// The end line a host that ends the job itself reads: the status (1 when
// the coordinator has none, so that the job fails), the reason on one
// line.
func TestWriteEnd(t *testing.T) {
	for _, tc := range []struct {
		status int
		why    string
		want   string
	}{
		{7, "rank 1 of job f2 called abort with status 7", "end 7 rank 1 of job f2 called abort with status 7\n"},
		{0, "", "end 1 \n"},
		{1, "a\nb", "end 1 a b\n"},
	} {
		var b strings.Builder
		if err := WriteEnd(&b, func() (int, string) { return tc.status, tc.why }); err != nil || b.String() != tc.want {
			t.Errorf("WriteEnd(%d, %q) = %q, %v; want %q", tc.status, tc.why, b.String(), err, tc.want)
		}
	}
}

// A spawn under Flux is one flux run of one command, with the prefix of
// arguments the job shell gave; several commands at once are refused by
// name.
func TestFluxRunArgs(t *testing.T) {
	run := []string{"run", "-o", "pmi=gopmi"}
	args, env, err := fluxRunArgs(run, []local.AppSpec{{Path: "/bin/prog", Args: []string{"a", "b c"}, Procs: 3, Dir: "/w", Env: []string{"K=V"}}})
	want := []string{"run", "-o", "pmi=gopmi", "-n", "3", "--cwd=/w", "/bin/prog", "a", "b c"}
	if err != nil || !slices.Equal(args, want) || !slices.Equal(env, []string{"K=V"}) {
		t.Errorf("fluxRunArgs = %q, %q, %v; want %q", args, env, err, want)
	}
	if _, _, err := fluxRunArgs(run, []local.AppSpec{{Path: "a", Procs: 1}, {Path: "b", Procs: 1}}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("two commands: %v, want ErrNotSupported", err)
	}
	if _, _, err := fluxRunArgs(run, []local.AppSpec{{Path: "a"}}); !errors.Is(err, plugin.ErrInvalidArgument) {
		t.Errorf("no processes: %v, want ErrInvalidArgument", err)
	}
}
