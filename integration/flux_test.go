package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/plugin/execpath"
)

// The Flux tests run `flux run -o pmi=gopmi` in real Flux instances this
// machine starts for them (flux start --test-size=N: N brokers on this
// host, each a node of its own), with the job-shell plugin make
// flux-plugin builds (contrib/flux) loaded through a userrc, and finding
// this run's gopmi binaries through GOPMI_BINDIR. Flux is the one on
// PATH, else /opt/flux's (make deps-test builds it there from
// ../shared/vendor/flux when it can); with neither they skip, saying so.
// An instance of each size starts with its first test and stops after
// the last test.

// fluxInstance is a running instance of size brokers.
type fluxInstance struct {
	size int
	dir  string
	uri  string
	cmd  *exec.Cmd
	done chan struct{}
}

var flux struct {
	once      sync.Once
	bin       string // the flux command
	userrc    string // loads the plugin
	err       error  // why the Flux tests cannot run: a skip
	buildErr  error  // the plugin does not build: a failure
	mu        sync.Mutex
	instances map[int]*fluxInstance
}

// fluxCommand finds flux: on PATH, else in /opt/flux.
func fluxCommand() (string, error) {
	if p, _ := execpath.Find("flux", append(execpath.PathDirs(os.Getenv("PATH")), "/opt/flux/bin")...); p != "" {
		return p, nil
	}
	return "", errors.New("no Flux: neither flux on PATH nor /opt/flux/bin/flux (make deps-test builds it from ../shared/vendor/flux, as root)")
}

// fluxReady finds Flux and builds the plugin once; it skips t when there
// is no Flux, and fails it when the plugin does not build.
func fluxReady(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("setup failed: %v", setupErr)
	}
	if shimMode() {
		// Flux's shells start the same node servers in either pass.
		t.Skip("the Flux cases run in make test's first integration pass (GOPMI_IT_SERVE=shim changes only gopmi run's one-node jobs)")
	}
	flux.once.Do(func() {
		flux.bin, flux.err = fluxCommand()
		if flux.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		root, err := moduleRoot(ctx)
		if err != nil {
			flux.buildErr = err
			return
		}
		out := filepath.Join(binDir, "flux")
		prefix := filepath.Dir(filepath.Dir(flux.bin))
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "flux-plugin", "BIN="+out, "FLUX_PREFIX="+prefix)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			flux.buildErr = fmt.Errorf("make flux-plugin: %w\n%s", err, b)
			return
		}
		flux.userrc = filepath.Join(out, "gopmi.lua")
		rc := fmt.Sprintf("plugin.load { file = %q }\n", filepath.Join(out, "gopmi_flux.so"))
		flux.buildErr = os.WriteFile(flux.userrc, []byte(rc), 0o644)
	})
	if flux.err != nil {
		t.Skip(flux.err)
	}
	if flux.buildErr != nil {
		t.Fatal(flux.buildErr)
	}
}

// fluxOf returns the instance of size brokers, started on first use.
func fluxOf(t *testing.T, size int) *fluxInstance {
	t.Helper()
	fluxReady(t)
	flux.mu.Lock()
	defer flux.mu.Unlock()
	if in := flux.instances[size]; in != nil {
		return in
	}
	dir, err := os.MkdirTemp("", "gopmi-flux-")
	if err != nil {
		t.Fatal(err)
	}
	// contrib/tools/flux-instance.sh: 32 cores per broker, the URI
	// written to dir/uri.
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "contrib", "tools", "flux-instance.sh")
	log, err := os.Create(filepath.Join(dir, "flux.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(flux.bin, "start", "--test-size="+strconv.Itoa(size), "/bin/sh", script, filepath.Join(dir, "uri"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(flux.bin)+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("flux start: %v", err)
	}
	in := &fluxInstance{size: size, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(in.done) }()
	deadline := time.After(60 * time.Second)
	for in.uri == "" {
		if b, err := os.ReadFile(filepath.Join(dir, "uri")); err == nil {
			in.uri = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-in.done:
			b, _ := os.ReadFile(filepath.Join(dir, "flux.log"))
			t.Fatalf("flux start --test-size=%d ended before it was ready:\n%s", size, b)
		case <-deadline:
			in.stop()
			b, _ := os.ReadFile(filepath.Join(dir, "flux.log"))
			t.Fatalf("flux start --test-size=%d not ready within 60s:\n%s", size, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if flux.instances == nil {
		flux.instances = map[int]*fluxInstance{}
	}
	flux.instances[size] = in
	return in
}

// stop ends the instance: its initial program ends, then the brokers
// (flux start's process group: the brokers, their job shells and what
// those started), which are killed after 10 s.
func (in *fluxInstance) stop() {
	group := -in.cmd.Process.Pid
	_ = syscall.Kill(group, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(group, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(group, syscall.SIGKILL)
	<-in.done
	_ = os.RemoveAll(in.dir)
}

// stopFlux ends the instances after the tests.
func stopFlux() {
	flux.mu.Lock()
	defer flux.mu.Unlock()
	for _, in := range flux.instances {
		in.stop()
	}
	flux.instances = nil
}

// run runs `flux run -N nodes -n n -o pmi=gopmi <flags> prog args` in the
// instance.
func (in *fluxInstance) run(t *testing.T, timeout time.Duration, nodes, n int, flags []string, prog string, args ...string) clients.Result {
	t.Helper()
	argv := []string{flux.bin, "run", "-N", strconv.Itoa(nodes), "-n", strconv.Itoa(n),
		"-o", "cpu-affinity=off", "-o", "pmi=gopmi", "-o", "userrc=" + flux.userrc}
	argv = append(append(append(argv, flags...), prog), args...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := clients.Run(ctx, argv, clients.RunOptions{Env: []string{"FLUX_URI=" + in.uri, "GOPMI_BINDIR=" + binDir}})
	if err != nil && !r.TimedOut {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return r
}

// The case table every launcher is judged by, under flux run -o
// pmi=gopmi on two brokers: MPICH's PMI-1 and Slurm's libpmi2 (Flux's
// pmi-simple serves neither PMI-2 nor names), fences across nodes,
// attributes, the name service, abort's exit status (7, where Flux's own
// PMI makes flux run exit 143).
func TestFluxCases(t *testing.T) {
	in := fluxOf(t, 2)
	for _, cs := range clients.Cases() {
		if cs.Heavy || strings.Contains(cs.Name, "spawn") {
			// Spawn has its own test (TestFluxSpawn): a spawned job's
			// output reaches flux run as the leader shell's lines.
			continue
		}
		t.Run(cs.Name, func(t *testing.T) {
			timeout := cs.Timeout
			if timeout == 0 {
				timeout = 60 * time.Second
			}
			r := in.run(t, timeout, min(cs.N, 2), cs.N, nil, progs[cs.Program], cs.Args...)
			if err := cs.Verify("gopmi", r); err != nil {
				t.Fatalf("%v\n%s", err, r.Summary())
			}
		})
	}
}

// MPICH's hello on 1, 2 and 4 brokers, up to 64 ranks.
func TestFluxMPICHSizes(t *testing.T) {
	for _, tc := range []struct{ brokers, n int }{{1, 1}, {1, 4}, {2, 2}, {2, 16}, {4, 4}, {4, 64}} {
		t.Run(fmt.Sprintf("brokers=%d/n=%d", tc.brokers, tc.n), func(t *testing.T) {
			in := fluxOf(t, tc.brokers)
			r := in.run(t, 2*time.Minute, tc.brokers, tc.n, nil, progs[clients.MPIHello])
			want := fmt.Sprintf("size=%d", tc.n)
			lines := clients.Lines(r.Stdout, "ok hello rank=")
			if r.ExitCode != 0 || len(lines) != tc.n {
				t.Fatalf("want %d hello lines and exit 0, got %d\n%s", tc.n, len(lines), r.Summary())
			}
			for _, l := range lines {
				if !strings.Contains(l, want) {
					t.Fatalf("a rank saw another size than %d: %q\n%s", tc.n, l, r.Summary())
				}
			}
		})
	}
}

// Open MPI 4.1 (PMIx, through gopmi-slurm-pmix, which the plugin picks
// when the program links Open MPI) on two brokers: hello, abort's exit
// status, a rank that leaves before finalize, the name service; and
// spawn; Debian's mpi4py, which nothing on the command line shows, with
// -o gopmi.pmix=yes.
func TestFluxOpenMPI(t *testing.T) {
	in := fluxOf(t, 2)
	if err := pmixShim(); err != nil {
		t.Fatal(err)
	}
	lab := []string{"--env=" + ompiLab[0]}
	hello, abort, early, pub := buildOpenMPI(t, "mpi_hello"), buildOpenMPI(t, "mpi_abort"), buildOpenMPI(t, "mpi_early"), buildOpenMPI(t, "mpi_pubname")
	for _, n := range []int{4, 16} {
		r := in.run(t, 2*time.Minute, 2, n, lab, hello)
		for rank := range n {
			if want := fmt.Sprintf("ok hello rank=%d size=%d sum=%d", rank, n, n*(n+1)/2); r.ExitCode != 0 || !strings.Contains(r.Stdout, want) {
				t.Fatalf("hello at %d ranks lacks %q:\n%s", n, want, r.Summary())
			}
		}
	}
	r := in.run(t, time.Minute, 2, 4, lab, abort, "code=7", "rank=3")
	if r.ExitCode != 7 || !strings.Contains(r.Stderr, "rank 3 of job") {
		t.Errorf("MPI_Abort(7) on rank 3: want exit 7 and the rank named:\n%s", r.Summary())
	}
	start := time.Now()
	r = in.run(t, time.Minute, 2, 4, lab, early, "rank=1")
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "rank 1 of job") {
		t.Errorf("a rank that left before finalize: want a failure naming rank 1:\n%s", r.Summary())
	}
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("the job that lost a rank ended after %v: a time-out, not the loss, ended it", d)
	}
	r = in.run(t, time.Minute, 2, 2, lab, pub)
	for _, want := range pubnameLines {
		if r.ExitCode != 0 || !strings.Contains(r.Stdout, want) {
			t.Fatalf("names: lacks %q:\n%s", want, r.Summary())
		}
	}
	// MPI_Comm_spawn, which flux-pmix cannot do: a child job of the
	// instance, which joins its parent's coordinator.
	spawn := buildOpenMPI(t, "mpi_spawn")
	r = in.run(t, 2*time.Minute, 2, 2, lab, spawn, "n=3")
	for _, want := range spawnLines {
		if r.ExitCode != 0 || !strings.Contains(r.Stdout+r.Stderr, want) {
			t.Fatalf("spawn: lacks %q:\n%s", want, r.Summary())
		}
	}
	py, script := mpi4pyHello(t)
	r = in.run(t, time.Minute, 2, 4, append(lab, "-o", "gopmi.pmix=yes"), py, script)
	for rank := range 4 {
		if want := fmt.Sprintf("ok mpi4py rank=%d size=4 sum=10", rank); r.ExitCode != 0 || !strings.Contains(r.Stdout, want) {
			t.Fatalf("mpi4py with -o gopmi.pmix=yes lacks %q:\n%s", want, r.Summary())
		}
	}
}

// The fault cases that make sense under Flux, on two brokers: a rank
// killed in a fence, and a rank that never comes to a fence (stopped),
// with the fence's time-out set to 3 s. Each job ends at once (not after
// Flux's 30 s exit-timeout), non-zero, with an exception that names the
// rank (and, for the time-out, its node).
func TestFluxFaults(t *testing.T) {
	in := fluxOf(t, 2)
	for _, tc := range []struct {
		name  string
		flags []string
		die   string
		want  []string
	}{
		{"killed in a fence", nil, "kill", []string{"rank 1 of job", "closed its PMI connection before finalize"}},
		{"fence time-out", []string{"-o", "gopmi.timeout=3"}, "stop", []string{"job.exception", "rank 1 (node ", "did not arrive within 3s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := in.run(t, time.Minute, 2, 4, tc.flags, progs[clients.PMI2Fault], "phase=fence", "dir="+t.TempDir(), "die="+tc.die)
			if r.ExitCode == 0 || r.TimedOut {
				t.Fatalf("want the job to fail:\n%s", r.Summary())
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.Summary())
				}
			}
			if d := time.Since(start); d > 25*time.Second {
				t.Errorf("the job ended after %v: Flux's exit-timeout, not gopmi, ended it", d)
			}
		})
	}
}

// A job whose tasks never speak PMI starts no gopmi process (no node
// server, no coordinator), as under srun; one whose tasks do starts them
// when the first task speaks. The shell's debug log (-o verbose=1) says
// when each starts.
func TestFluxOnDemand(t *testing.T) {
	in := fluxOf(t, 2)
	verbose := []string{"-o", "verbose=1"}
	r := in.run(t, time.Minute, 2, 4, verbose, "/bin/true")
	if r.ExitCode != 0 || strings.Contains(r.Stderr, "gopmi: coordinator pid") || strings.Contains(r.Stderr, "gopmi: node server pid") {
		t.Errorf("a job that speaks no PMI: want exit 0 and no gopmi process started:\n%s", r.Summary())
	}
	r = in.run(t, time.Minute, 2, 4, verbose, progs[clients.MPIHello])
	if r.ExitCode != 0 || strings.Count(r.Stderr, "gopmi: coordinator pid") != 1 || strings.Count(r.Stderr, "gopmi: node server pid") != 2 {
		t.Errorf("MPICH's hello: want one coordinator and a server on each of 2 brokers:\n%s", r.Summary())
	}
}

// PMI-2's spawn under Flux, which Flux's own PMI cannot do: the child is
// a job of the instance that joins its parent's coordinator, with the
// spawn's preput, PMI_SPAWNED and the namespace its parent was told. Its
// output reaches the parent's flux run as the leader shell's lines (on
// stderr, "flux-shell[0]: stdout: ..."), not as the job's own stdout.
func TestFluxSpawn(t *testing.T) {
	in := fluxOf(t, 2)
	r := in.run(t, time.Minute, 2, 2, nil, progs[clients.PMI2Test], "spawn")
	out := r.Stdout + r.Stderr
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "ok pmi2 rank=0 step=spawn jobid=flux.") {
		t.Fatalf("the parent's spawn:\n%s", r.Summary())
	}
	for rank := range 2 {
		if want := fmt.Sprintf("ok pmi2-child rank=%d size=2 spawned=1 appnum=0 preput=preput-val jobid=flux.", rank); !strings.Contains(out, want) {
			t.Errorf("the child lacks %q:\n%s", want, r.Summary())
		}
	}
}

// The processes gopmi's plugin starts inherit none of the shell's fds:
// libsubprocess makes its ends of the tasks' stdio sockets inheritable,
// and a coordinator or server holding one would keep a task from the end
// of its input. Here the ranks speak PMI across two brokers (the
// coordinator starts) and wait a moment; meanwhile no gopmi process may
// share a socket with the shell that started it, but for its stdout and
// stderr, which are the shell's.
func TestFluxChildrenInheritNoShellFD(t *testing.T) {
	in := fluxOf(t, 2)
	task := progs[clients.MPIHello] + " && echo ok waiting && sleep 3"
	cmd := exec.Command(flux.bin, "run", "-N2", "-n2", "-o", "cpu-affinity=off", "-o", "pmi=gopmi", "-o", "userrc="+flux.userrc, "/bin/sh", "-c", task)
	cmd.Env = append(os.Environ(), "FLUX_URI="+in.uri, "GOPMI_BINDIR="+binDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	defer func() {
		// The job ends by itself (its ranks wait 3 s); its output is
		// read to its end.
		for sc.Scan() {
		}
		_ = cmd.Wait()
	}()
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "ok waiting") {
	}
	// Its stdout and stderr are the shell's on purpose.
	sockets := func(pid string, stdio bool) map[string]bool {
		m := map[string]bool{}
		fds, _ := filepath.Glob(filepath.Join("/proc", pid, "fd", "*"))
		for _, fd := range fds {
			if n := filepath.Base(fd); !stdio && (n == "0" || n == "1" || n == "2") {
				continue
			}
			if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, "socket:") {
				m[target] = true
			}
		}
		return m
	}
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	seen := 0
	for _, exe := range exes {
		if target, err := os.Readlink(exe); err != nil || !strings.HasPrefix(target, binDir+"/gopmi-slurm") {
			continue
		}
		pid := filepath.Base(filepath.Dir(exe))
		stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if err != nil || len(f) < 2 {
			continue
		}
		seen++
		parent := sockets(f[1], true)
		for s := range sockets(pid, false) {
			if parent[s] {
				t.Errorf("gopmi process %s shares %s with the shell that started it (pid %s)", pid, s, f[1])
			}
		}
	}
	if seen == 0 {
		t.Error("found no gopmi process of this job while its ranks waited")
	}
}
