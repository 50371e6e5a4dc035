//go:build pmix

package pmix

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
	"github.com/gopmi/gopmi/shim/pmix/engine"
)

// The process's one server (libpmix is a server once per process), for
// every test and every -count; its backend records into the current
// test's calls.
var (
	srv     *Server
	srvErr  error
	callsMu sync.Mutex
	now     *calls
	jobSeq  int
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gopmi-pmix-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	be := &plugintest.Fake{
		ClientConnectedF: func(ctx context.Context, req *plugin.ClientRequest) error { return cur().ClientConnected(ctx, req) },
		ClientFinalizedF: func(ctx context.Context, req *plugin.ClientRequest) error { return cur().ClientFinalized(ctx, req) },
		AbortF:           func(ctx context.Context, req *plugin.AbortRequest) error { return cur().Abort(ctx, req) },
		FenceF: func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			return cur().Fence(ctx, req)
		},
	}
	srv, srvErr = Start(Options{Backend: plugin.Complete(be), TmpDir: filepath.Join(dir, "pmix"), ID: "gopmi-test.0", Logger: zerolog.Nop()})
	code := m.Run()
	if srv != nil {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// cur is the current test's backend.
func cur() plugin.Full {
	callsMu.Lock()
	defer callsMu.Unlock()
	return plugin.Complete(now.backend())
}

// server returns the process's server for t, whose calls it records.
func serverFor(t *testing.T) (*Server, *calls, string) {
	t.Helper()
	if srvErr != nil {
		t.Fatal(srvErr)
	}
	callsMu.Lock()
	defer callsMu.Unlock()
	now = &calls{}
	jobSeq++
	return srv, now, fmt.Sprintf("gopmi-test.%d", jobSeq)
}

// calls records what the server asked of its backend.
type calls struct {
	mu        sync.Mutex
	connected []plugin.Proc
	finalized []plugin.Proc
	aborts    []*plugin.AbortRequest
	fences    []*plugin.FenceRequest
	order     []string      // "connect r" and "finalize r", as the backend heard them
	slow      time.Duration // how long a connect report takes
	slowFin   time.Duration // how long a finalize report takes
	finCalls  int           // ClientFinalized calls
}

func (c *calls) backend() *plugintest.Fake {
	return &plugintest.Fake{
		ClientConnectedF: func(_ context.Context, req *plugin.ClientRequest) error {
			time.Sleep(c.slow)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.connected = append(c.connected, req.Procs...)
			for _, p := range req.Procs {
				c.order = append(c.order, fmt.Sprintf("connect %d", p.Rank))
			}
			return nil
		},
		ClientFinalizedF: func(_ context.Context, req *plugin.ClientRequest) error {
			c.mu.Lock()
			slow := c.slowFin
			c.mu.Unlock()
			time.Sleep(slow)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.finCalls++
			c.finalized = append(c.finalized, req.Procs...)
			for _, p := range req.Procs {
				c.order = append(c.order, fmt.Sprintf("finalize %d", p.Rank))
			}
			return nil
		},
		AbortF: func(_ context.Context, req *plugin.AbortRequest) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.aborts = append(c.aborts, req)
			return nil
		},
		// The other node brings nothing: the answer is this node's blob.
		FenceF: func(_ context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.fences = append(c.fences, req)
			return &plugin.FenceResponse{Data: req.Data}, nil
		},
	}
}

// buildOpenMPI compiles one of the integration tests' MPI programs with
// Open MPI's compiler.
func buildOpenMPI(t *testing.T, name string) string {
	t.Helper()
	cc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		t.Fatal("mpicc.openmpi not found: apt-get install openmpi-bin libopenmpi-dev (make deps does)")
	}
	src := filepath.Join("..", "..", "integration", "testdata", "src")
	out := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command(cc, "-O2", "-I", src, "-o", out, filepath.Join(src, name+".c")).CombinedOutput(); err != nil {
		t.Fatalf("mpicc.openmpi %s: %v\n%s", name, err, b)
	}
	return out
}

// buildPMIx compiles a PMIx client of the tests with libpmix.
func buildPMIx(t *testing.T, name string) string {
	t.Helper()
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		t.Fatalf("pkg-config pmix: %v: apt-get install libpmix-dev (make deps does)", err)
	}
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O2", "-o", out, filepath.Join("testdata", name+".c")}, strings.Fields(string(flags))...)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// waitFor polls cond until it holds, at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// oneNode is a job of n ranks on one node.
func oneNode(ns string, n int32, cmd string) plugin.Job {
	var ranks []int32
	for r := range n {
		ranks = append(ranks, r)
	}
	host, _ := os.Hostname()
	return plugin.Job{Nspace: ns, Size: n, UniverseSize: n, Nodes: []plugin.Node{{ID: 0, Name: host, Ranks: ranks}},
		Apps: []plugin.App{{FirstRank: 0, Size: n, Cmd: cmd}}}
}

// task is a started rank.
type task struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startTasks starts a job's ranks as a launcher does: the environment
// PMIx's setup_fork gave each, and Open MPI's direct-launch variable.
func startTasks(t *testing.T, prog string, envs map[int32][]string, args ...string) []*task {
	t.Helper()
	var base []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PMIX_") && !strings.HasPrefix(e, "OMPI_") {
			base = append(base, e)
		}
	}
	tasks := make([]*task, len(envs))
	for r := range int32(len(envs)) {
		tk := &task{cmd: exec.Command(prog, args...)}
		tk.cmd.Env = append(append(append([]string(nil), base...), envs[r]...), "JSM_JSRUN_PORT=1", "OMPI_MCA_btl=self,vader")
		tk.cmd.Stdout, tk.cmd.Stderr = &tk.out, &tk.out
		if err := tk.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tasks[r] = tk
		t.Cleanup(func() { _ = tk.cmd.Process.Kill(); _ = tk.cmd.Wait() })
	}
	return tasks
}

// wait waits for a task, at most d.
func (tk *task) wait(d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- tk.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = tk.cmd.Process.Kill()
		return fmt.Errorf("still running after %s: %s", d, tk.out.String())
	}
}

// Open MPI 4.1 programs, served by this process through libpmix, with a
// backend that sees what crosses the node: a hello's ranks find each
// other (one job of 4, an allreduce), each connects and finalizes through
// the backend, and MPI_Abort's status reaches the backend's Abort.
func TestOpenMPIServed(t *testing.T) {
	hello, abort := buildOpenMPI(t, "mpi_hello"), buildOpenMPI(t, "mpi_abort")
	s, c, ns := serverFor(t)
	if _, err := Start(Options{Backend: plugin.Complete(&plugintest.Fake{}), TmpDir: t.TempDir(), ID: "again"}); err == nil {
		t.Error("a second Start in one process succeeded")
	}

	t.Run("hello", func(t *testing.T) {
		job := oneNode(ns+".hello", 4, hello)
		envs, err := s.RegisterJob(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"PMIX_NAMESPACE=" + job.Nspace, "PMIX_RANK=3"} {
			if !strings.Contains(strings.Join(envs[3], "\n"), want) {
				t.Fatalf("rank 3's environment lacks %s: %q", want, envs[3])
			}
		}
		tasks := startTasks(t, hello, envs)
		for r, tk := range tasks {
			if err := tk.wait(60 * time.Second); err != nil {
				t.Fatalf("rank %d: %v\n%s", r, err, tk.out.String())
			}
			if want := fmt.Sprintf("ok hello rank=%d size=4 sum=10", r); !strings.Contains(tk.out.String(), want) {
				t.Errorf("rank %d printed %q; want %q", r, tk.out.String(), want)
			}
		}
		// The backend hears of connects and finalizes from goroutines of
		// the server's, after libpmix answered the clients.
		waitFor(t, "4 connects and 4 finalizes at the backend", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.connected) == 4 && len(c.finalized) == 4
		})
	})

	t.Run("a connect heard late", func(t *testing.T) {
		// The backend takes its time over each connect; a finalize must
		// still reach it after that rank's connect, and before the
		// client's PMIx_Finalize returns.
		c.mu.Lock()
		c.slow, c.order = 300*time.Millisecond, nil
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.slow = 0; c.mu.Unlock() }()
		prog := buildPMIx(t, "pmix_fence")
		job := oneNode(ns+".late", 2, prog)
		envs, err := s.RegisterJob(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		var tasks []*task
		for r := range int32(2) {
			tasks = append(tasks, startTasks(t, prog, map[int32][]string{0: envs[r]}, strconv.Itoa(int(1-r)))...)
		}
		for r, tk := range tasks {
			if err := tk.wait(60 * time.Second); err != nil {
				t.Fatalf("rank %d: %v\n%s", r, err, tk.out.String())
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for r := range 2 {
			ci, fi := slices.Index(c.order, fmt.Sprintf("connect %d", r)), slices.Index(c.order, fmt.Sprintf("finalize %d", r))
			if ci < 0 || fi < 0 || fi < ci {
				t.Errorf("rank %d: the backend heard %q; want its connect, then its finalize, before the task ended", r, c.order)
			}
		}
	})

	t.Run("finalizes go together", func(t *testing.T) {
		// While the backend takes its time over one finalize report, the
		// other clients' queue and go in one call: a node's clients that
		// finalize together cost a few calls, not one each. Each still
		// returns from PMIx_Finalize only once the backend heard it.
		c.mu.Lock()
		c.slowFin, c.finCalls, c.finalized = 300*time.Millisecond, 0, nil
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.slowFin = 0; c.mu.Unlock() }()
		const n = 6
		job := oneNode(ns+".batch", n, hello)
		envs, err := s.RegisterJob(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		for r, tk := range startTasks(t, hello, envs) {
			if err := tk.wait(60 * time.Second); err != nil {
				t.Fatalf("rank %d: %v\n%s", r, err, tk.out.String())
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		var heard []int32
		for _, p := range c.finalized {
			heard = append(heard, p.Rank)
		}
		slices.Sort(heard)
		if want := []int32{0, 1, 2, 3, 4, 5}; !slices.Equal(heard, want) {
			t.Errorf("the backend heard the finalizes of ranks %v before the tasks ended; want %v", heard, want)
		}
		if c.finCalls > n/2 {
			t.Errorf("%d ranks finalizing together made %d ClientFinalized calls; want them batched", n, c.finCalls)
		}
	})

	t.Run("fence across nodes", func(t *testing.T) {
		prog := buildPMIx(t, "pmix_fence")
		host, _ := os.Hostname()
		job := plugin.Job{Nspace: ns + ".fence", Size: 4, UniverseSize: 4,
			Nodes: []plugin.Node{{ID: 0, Name: host, Ranks: []int32{0, 1}}, {ID: 1, Name: "elsewhere", Ranks: []int32{2, 3}}},
			Apps:  []plugin.App{{FirstRank: 0, Size: 4, Cmd: prog}}}
		envs, err := s.RegisterJob(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		var tasks []*task
		for r, peer := range []string{"1", "0"} {
			tasks = append(tasks, startTasks(t, prog, map[int32][]string{0: envs[int32(r)]}, peer)...)
		}
		for r, tk := range tasks {
			if err := tk.wait(60 * time.Second); err != nil {
				t.Fatalf("rank %d: %v\n%s", r, err, tk.out.String())
			}
			if want := fmt.Sprintf("ok fence rank=%d got=value-of-%d", r, 1-r); !strings.Contains(tk.out.String(), want) {
				t.Errorf("rank %d printed %q; want %q", r, tk.out.String(), want)
			}
		}
		// Besides the job's two fences, the server hands each client's
		// first commit to the backend, for readers on the other node
		// that do not fence first: fences of its own clients alone.
		handed := map[uint32]bool{}
		var fences []*plugin.FenceRequest
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			c.mu.Lock()
			fences = fences[:0]
			for _, f := range c.fences {
				if !strings.HasPrefix(f.ID, "pmix:modex:") {
					fences = append(fences, f)
					continue
				}
				if !slices.Equal(f.Procs, f.LocalProcs) || f.Collect || !f.HandOver {
					t.Errorf("a hand-over of committed data: %+v", f)
				}
				for _, p := range f.LocalProcs {
					data, err := engine.DataOf(f.Data, p)
					if err != nil {
						t.Errorf("a hand-over of committed data: %v", err)
					}
					if data != nil {
						handed[uint32(p.Rank)] = true
					}
				}
			}
			c.mu.Unlock()
			if (handed[0] && handed[1]) || time.Now().After(deadline) {
				break
			}
		}
		if !handed[0] || !handed[1] {
			t.Errorf("the clients' first commits were not handed over: %v", handed)
		}
		if len(fences) != 2 {
			t.Fatalf("the backend saw %d fences; want 2 (one collecting, one not)", len(fences))
		}
		world := []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}}
		local := []plugin.Proc{{Nspace: job.Nspace, Rank: 0}, {Nspace: job.Nspace, Rank: 1}}
		for i, f := range fences {
			collect := i == 0
			if !slices.Equal(f.Procs, world) || !slices.Equal(f.LocalProcs, local) || f.Node != host || f.Collect != collect ||
				(collect && len(f.Data) == 0) || !strings.HasPrefix(f.ID, "pmix:") || !strings.HasSuffix(f.ID, "/"+strconv.Itoa(i)) {
				t.Errorf("fence %d: %+v; want the world, ranks 0-1 on %s, collect %v, the set's fence %d", i, f, host, collect, i)
			}
		}
		// The fence that collects nothing carries what each client
		// committed since it was handed over: nothing (it committed
		// once), and any data it carries must be framed.
		if _, err := engine.DataOf(fences[1].Data, local[0]); err != nil {
			t.Errorf("the fence that collects nothing: %v", err)
		}
	})

	t.Run("abort", func(t *testing.T) {
		job := oneNode(ns+".abort", 2, abort)
		envs, err := s.RegisterJob(job, 0)
		if err != nil {
			t.Fatal(err)
		}
		tasks := startTasks(t, abort, envs, "code=7", "rank=1")
		_ = tasks[1].wait(60 * time.Second)
		c.mu.Lock()
		aborts := append([]*plugin.AbortRequest(nil), c.aborts...)
		c.mu.Unlock()
		if len(aborts) != 1 || aborts[0].Status != 7 || aborts[0].Proc != (plugin.Proc{Nspace: job.Nspace, Rank: 1}) {
			t.Fatalf("the backend's aborts: %+v; want one, of rank 1, status 7\n%s", aborts, tasks[1].out.String())
		}
		// The launcher ends the others, as gopmi run does on an abort.
		_ = tasks[0].cmd.Process.Kill()
	})
}
