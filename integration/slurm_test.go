package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/proc"
	"github.com/gopmi/gopmi/integration/internal/slurmlab"
	"github.com/gopmi/gopmi/plugin"
)

// The Slurm tests run `srun --mpi=gopmi` on a real cluster this machine
// runs for them (package slurmlab: munged, slurmctld, two slurmd), with
// mpi/gopmi built by contrib/slurm/build.sh against the installed Slurm
// and finding the gopmi binaries of this run. The cluster starts with the
// first Slurm test and stops after the last test.
//
// GOPMI_IT_SLURM_PREFIX runs them on the Slurm installed there instead of
// Debian's (make test's pass of Slurm 25.11, /opt/slurm-25.11), and
// GOPMI_IT_SLURM_PLUGIN loads the mpi_gopmi.so given there (the one make
// slurm-plugin built for it), which finds this run's binaries through
// mpi.conf's GopmiBinDir.

// lab is a Slurm cluster the tests start on first use and stop after
// the last test.
type lab struct {
	name         string
	nodes        int
	mpiConf      string // mpi.conf's text
	ownHostnames bool   // slurmlab.Options.OwnHostnames
	once         sync.Once
	c            *slurmlab.Cluster
	err          error
}

var (
	// twoNodes is the cluster most Slurm tests use.
	// twoNodes' slurmd each have a hostname of their own (n1, n2), as
	// a real cluster's nodes do.
	twoNodes = &lab{name: "Slurm cluster", nodes: 2, ownHostnames: true}
	// eightNodes has the fence tree at width 2 (slurm8_test.go).
	eightNodes = &lab{name: "eight-node Slurm cluster", nodes: 8, mpiConf: "GopmiTreeWidth=2\n"}
)

// cluster returns l, starting it on first use. The Slurm cases run once,
// in the default pass: GOPMI_IT_SERVE changes only how gopmi run serves
// one node, which srun never uses.
func (l *lab) cluster(t *testing.T) *slurmlab.Cluster {
	t.Helper()
	begin(t)
	if shimMode() {
		t.Skip("the Slurm cases run in the default pass only: GOPMI_IT_SERVE=shim changes gopmi run, not srun")
	}
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		o := slurmlab.Options{Nodes: l.nodes, BinDir: binDir, MPIConf: l.mpiConf, OwnHostnames: l.ownHostnames,
			Prefix: os.Getenv("GOPMI_IT_SLURM_PREFIX"), Plugin: os.Getenv("GOPMI_IT_SLURM_PLUGIN")}
		if o.Plugin != "" {
			o.MPIConf += "GopmiBinDir=" + binDir + "\n"
		}
		l.c, l.err = slurmlab.Start(ctx, "", o)
	})
	if l.err != nil {
		t.Fatalf("%s: %v", l.name, l.err)
	}
	return l.c
}

// slurm returns the two-node cluster.
func slurm(t *testing.T) *slurmlab.Cluster {
	t.Helper()
	return twoNodes.cluster(t)
}

// stopSlurm ends the clusters after the tests. It reports false when a
// node's shim read a bootstrap mpi/gopmi wrote that was not in the plain
// form (proto/README.md): the C writer's names are generated from the
// proto (contrib/slurm/gopmi_bootstrap.h), and every step of every Slurm
// test, through every branch of bootstrap.c it took, is held to it here.
func stopSlurm() bool {
	ok := true
	for _, l := range []*lab{twoNodes, eightNodes} {
		if l.c == nil {
			continue
		}
		// A node whose log cannot be read is a failure too: the check
		// would pass without having looked.
		logs, _ := filepath.Glob(filepath.Join(l.c.Dir, "log", "slurmd-*.log"))
		if len(logs) != l.nodes {
			fmt.Fprintf(os.Stderr, "FAIL: %s: %d slurmd logs for %d nodes: the plain-form check cannot see every node\n", l.name, len(logs), l.nodes)
			ok = false
		}
		for _, f := range logs {
			b, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: %s: the plain-form check cannot read %v\n", l.name, err)
				ok = false
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, notPlainWarning) {
					fmt.Fprintf(os.Stderr, "FAIL: %s: %s: mpi/gopmi wrote a bootstrap outside the plain form:\n%s\n", l.name, filepath.Base(f), line)
					ok = false
					break
				}
			}
		}
		l.c.Stop()
	}
	return ok
}

// notPlainWarning begins the shim's warning about a bootstrap that was
// not in the plain form (shim.notPlainMsg).
const notPlainWarning = "bootstrap: not in the plain form"

// srun runs prog under `srun --mpi=gopmi <srunArgs>`.
func srun(t *testing.T, c *slurmlab.Cluster, timeout time.Duration, srunArgs []string, prog string, args ...string) clients.Result {
	t.Helper()
	argv := append(append([]string{"srun", "--mpi=gopmi"}, srunArgs...), prog)
	return runOn(t, c, timeout, append(argv, args...))
}

// runOn runs argv against the cluster; only a command that cannot start
// fails t, the result says the rest.
func runOn(t *testing.T, c *slurmlab.Cluster, timeout time.Duration, argv []string, env ...string) clients.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv = append([]string{c.Bin(argv[0])}, argv[1:]...)
	r, err := clients.Run(ctx, argv, clients.RunOptions{Env: append(c.Env(), env...)})
	if err != nil && !r.TimedOut {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return r
}

func slurmFailure(c *slurmlab.Cluster, r clients.Result) string {
	return fmt.Sprintf("%s\nslurmd-n1.log:\n%s\nslurmd-n2.log:\n%s", r.Summary(), c.Log("slurmd-n1", 15), c.Log("slurmd-n2", 15))
}

// The case table every launcher is judged by, under srun --mpi=gopmi on
// two nodes: MPICH's PMI-1 and Slurm's libpmi2, fences across nodes,
// attributes, the name service, abort's exit status.
func TestSlurmCases(t *testing.T) {
	c := slurm(t)
	for _, cs := range clients.Cases() {
		if cs.Heavy || strings.Contains(cs.Name, "spawn") {
			// Spawn under Slurm (a nested srun in the allocation) is not
			// built yet.
			continue
		}
		t.Run(cs.Name, func(t *testing.T) {
			nodes := min(cs.N, 2)
			timeout := cs.Timeout
			if timeout == 0 {
				timeout = 60 * time.Second
			}
			r := srun(t, c, timeout, []string{"-N", strconv.Itoa(nodes), "-n", strconv.Itoa(cs.N)}, progs[cs.Program], cs.Args...)
			if err := cs.Verify("gopmi", r); err != nil {
				t.Fatalf("%v\n%s", err, slurmFailure(c, r))
			}
		})
	}
}

// The fence tree at width 1 (node n2's fences go through node n1): the
// fence-heavy cases give the same answers as under the coordinator alone.
func TestSlurmTree(t *testing.T) {
	c := slurm(t)
	want := map[string]bool{"hello/n=4": true, "alltoall/n=8": true, "pmi2/default/n=4": true, "pmi2/ring/n=4": true, "pmi1/n=64": true, "pmi2_bench/n=16": true}
	for _, cs := range clients.Cases() {
		if !want[cs.Name] {
			continue
		}
		t.Run(cs.Name, func(t *testing.T) {
			argv := append([]string{"srun", "--mpi=gopmi", "-N", "2", "-n", strconv.Itoa(cs.N), progs[cs.Program]}, cs.Args...)
			r := runOn(t, c, time.Minute, argv, "GOPMI_TREE_WIDTH=1")
			if err := cs.Verify("gopmi", r); err != nil {
				t.Fatalf("%v\n%s", err, slurmFailure(c, r))
			}
		})
	}
}

// PMI_process_mapping follows Slurm's layout: what Slurm's own mpi/pmi2
// answers for the same step, for block and cyclic distributions, even and
// uneven.
func TestSlurmProcessMapping(t *testing.T) {
	c := slurm(t)
	mapping := func(t *testing.T, mpi string, args []string) string {
		argv := append([]string{"--mpi=" + mpi, "-N", "2", "-n", "4"}, args...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := clients.Run(ctx, append(append([]string{c.Bin("srun")}, argv...), progs[clients.PMI2Test], "default", "nosemi"), clients.RunOptions{Env: c.Env()})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("srun %s: %v\n%s", strings.Join(argv, " "), err, slurmFailure(c, r))
		}
		seen := map[string]int{}
		for _, l := range clients.Lines(r.Stdout, "ok pmi2 rank=") {
			if f := clients.Fields(l); f["key"] == "PMI_process_mapping" {
				seen[f["value"]]++
			}
		}
		if len(seen) != 1 {
			t.Fatalf("srun %s: ranks disagree on the mapping: %v", strings.Join(argv, " "), seen)
		}
		for v := range seen {
			return v
		}
		return ""
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // when the layout is fixed by the arguments
	}{
		{"block/even", []string{"-m", "block", "--ntasks-per-node=2"}, "(vector,(0,2,2))"},
		{"cyclic/even", []string{"-m", "cyclic", "--ntasks-per-node=2"}, "(vector,(0,2,1),(0,2,1))"},
		{"block", []string{"-m", "block"}, ""},
		{"cyclic", []string{"-m", "cyclic"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, slurms := mapping(t, "gopmi", tc.args), mapping(t, "pmi2", tc.args)
			// The same layout may be written more than one way: Slurm
			// writes (0,1,1),(0,1,1) where gopmi writes (0,1,2).
			if a, b := rankNodes(t, got, 4), rankNodes(t, slurms, 4); a != b || (tc.want != "" && got != tc.want) {
				t.Fatalf("gopmi says %s (nodes %s), Slurm's mpi/pmi2 %s (nodes %s), want %q", got, a, slurms, b, tc.want)
			}
		})
	}
}

// rankNodes decodes an RFC 13 vector into each rank's node, as text.
func rankNodes(t *testing.T, vector string, size int) string {
	t.Helper()
	body, ok := strings.CutPrefix(vector, "(vector,")
	body, ok2 := strings.CutSuffix(body, ")")
	if !ok || !ok2 {
		t.Fatalf("not a vector mapping: %q", vector)
	}
	var nodes []string
	for _, blk := range strings.Split(strings.Trim(body, "()"), "),(") {
		var start, count, per int
		if _, err := fmt.Sscanf(blk, "%d,%d,%d", &start, &count, &per); err != nil {
			t.Fatalf("mapping %q: block %q: %v", vector, blk, err)
		}
		for n := start; n < start+count; n++ {
			for i := 0; i < per; i++ {
				nodes = append(nodes, strconv.Itoa(n))
			}
		}
	}
	if len(nodes) < size {
		t.Fatalf("mapping %q covers %d of %d ranks", vector, len(nodes), size)
	}
	return strings.Join(nodes[:size], ",")
}

// A step leaves no gopmi process behind, on any node.
func TestSlurmNoOrphans(t *testing.T) {
	c := slurm(t)
	r := srun(t, c, time.Minute, []string{"-N", "2", "-n", "4"}, progs[clients.MPIHello])
	if r.ExitCode != 0 {
		t.Fatal(slurmFailure(c, r))
	}
	left := func() []string {
		var out []string
		ps, _ := proc.Descendants(1)
		for _, p := range ps {
			if p.Alive() && (strings.HasPrefix(p.Comm, "gopmi-slurm") || strings.HasPrefix(p.Comm, "gopmi-shim") || strings.HasPrefix(p.Comm, "gopmi-rm-slurm")) {
				out = append(out, fmt.Sprintf("%s (pid %d, ppid %d)", p.Comm, p.PID, p.PPID))
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(left()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if l := left(); len(l) > 0 {
		t.Fatalf("left after the step: %s", strings.Join(l, ", "))
	}
}

// scontrol shows what mpi.conf can set for gopmi.
func TestSlurmConfigShown(t *testing.T) {
	c := slurm(t)
	cmd := exec.Command(c.Bin("scontrol"), "show", "config")
	cmd.Env = append(os.Environ(), c.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol: %v\n%s", err, out)
	}
	for _, k := range []string{"GopmiBinDir", "GopmiFenceMode", "GopmiTimeout", "GopmiStartTimeout", "GopmiKVSMaxMiB"} {
		if !bytes.Contains(out, []byte(k)) {
			t.Errorf("scontrol show config lacks %s", k)
		}
	}
}

// shimOf finds the shim (gopmi-slurm shim) serving rank, on whatever node,
// from the fd names its stepd gave it.
func shimOf(rank int) (int, error) {
	ps, err := proc.Descendants(1)
	if err != nil {
		return 0, err
	}
	want := "rank" + strconv.Itoa(rank)
	for _, p := range ps {
		if !p.Alive() || !strings.HasPrefix(p.Comm, "gopmi-slurm") {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if names, ok := strings.CutPrefix(kv, "LISTEN_FDNAMES="); ok && slices.Contains(strings.Split(names, ":"), want) {
				return p.PID, nil
			}
		}
	}
	return 0, fmt.Errorf("no gopmi-slurm shim serves %s", want)
}

// A node lost in the middle of a job (its shim killed) fails the
// next fence within the step's time-out, naming the node and its ranks,
// and srun exits non-zero.
func TestSlurmNodeLoss(t *testing.T) {
	c := slurm(t)
	// Width 16: both nodes under the coordinator. Width 1: node n2's
	// fences go through node n1, which must send its own part up without
	// n2's so that the coordinator names n2 alone.
	for _, width := range []string{"16", "1"} {
		t.Run("tree-width="+width, func(t *testing.T) { nodeLoss(t, c, width) })
	}
}

func nodeLoss(t *testing.T, c *slurmlab.Cluster, width string) {
	// Rank 1 (node n2) holds; rank 0 (node n1) waits in a barrier.
	r := killShimInStep(t, c, []string{"-N", "2", "-n", "2"}, 2, 1, slurmFailure, "GOPMI_TIMEOUT=3", "GOPMI_TREE_WIDTH="+width)
	var barrier string
	for _, l := range clients.Lines(r.Stdout, "barrier-error rank=0") {
		barrier = l
	}
	// PMI-1 messages have no spaces.
	if !strings.Contains(strings.ReplaceAll(barrier, "_", " "), "rank 1 (node n2) did not arrive") {
		t.Fatalf("rank 0's barrier error does not name rank 1 on node n2: %q\n%s", barrier, slurmFailure(c, r))
	}
	if strings.Contains(r.Stdout, "barrier-completed") {
		t.Fatalf("a barrier completed without node n2:\n%s", r.Stdout)
	}
	// srun's own stderr names who never arrived: the shims' logs stay on
	// their nodes.
	if !strings.Contains(r.Stderr, "rank 1 (node n2) did not arrive") {
		t.Fatalf("srun's stderr does not name rank 1 on node n2:\n%s", r.Stderr)
	}
}

// killShimInStep runs a step of the tests' task in role hold (its last
// rank holds, the others wait in a barrier) with srun's args and env,
// waits until its ranks are ready, kills the gopmi-slurm shim that serves
// rank victim (not its stepd), and returns how srun ended, which must be
// a failure; failure formats what a fatal error shows.
func killShimInStep(t *testing.T, c *slurmlab.Cluster, args []string, ranks, victim int,
	failure func(*slurmlab.Cluster, clients.Result) string, env ...string) clients.Result {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ready.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append(append([]string{"srun", "--mpi=gopmi"}, args...), taskArgs("hold")...)
	done := make(chan clients.Result, 1)
	go func() {
		r, _ := clients.Run(ctx, argv, clients.RunOptions{Env: append(append(c.Env(), taskRun, sockEnv+"="+sock), env...)})
		done <- r
	}()
	readyErr := waitReady(ctx, ln, ranks)
	var pid int
	if readyErr == nil {
		pid, readyErr = shimOf(victim)
	}
	if readyErr == nil {
		readyErr = syscall.Kill(pid, syscall.SIGKILL)
	}
	if readyErr != nil {
		cancel()
	}
	r := <-done
	if readyErr != nil {
		t.Fatalf("before the kill: %v\n%s", readyErr, failure(c, r))
	}
	if r.TimedOut || r.ExitCode == 0 {
		t.Fatalf("srun did not fail: %s", failure(c, r))
	}
	return r
}

// salloc runs `salloc <allocation> srun --mpi=gopmi <step>` on the
// cluster: a spawn needs room in an allocation for the spawned step.
func salloc(t *testing.T, c *slurmlab.Cluster, timeout time.Duration, alloc, step []string, prog string, args ...string) clients.Result {
	t.Helper()
	argv := append(append([]string{"salloc"}, alloc...), "srun", "--mpi=gopmi")
	return runOn(t, c, timeout, append(append(append(argv, step...), prog), args...))
}

// MPI_Comm_spawn's PMI under srun: a nested srun --mpi=gopmi in the same
// allocation, joining the step's coordinator; the children see
// PMI_SPAWNED, the preput keys and their own layout; the parent reads
// their keys after job-connect.
func TestSlurmSpawn(t *testing.T) {
	c := slurm(t)
	for _, cs := range clients.Cases() {
		if cs.Name != "pmi2/spawn/n=2" {
			continue
		}
		r := salloc(t, c, time.Minute, []string{"-N", "2", "-n", "8"}, []string{"-n", "2"}, progs[cs.Program], cs.Args...)
		if err := cs.Verify("gopmi", r); err != nil {
			t.Fatalf("%v\n%s", err, slurmFailure(c, r))
		}
		// Spawn, then job-connect to the children, read their keys by
		// rank and whole, disconnect.
		r = salloc(t, c, time.Minute, []string{"-N", "2", "-n", "8"}, []string{"-n", "2"}, progs[clients.PMI2Test], "connect")
		if r.ExitCode != 0 || strings.Contains(r.Stdout, "fail ") ||
			strings.Count(r.Stdout, "size=2 mode=connect\n") != 2 || strings.Count(r.Stdout, "size=2 mode=connect-child\n") != 2 {
			t.Fatalf("connect: %s\n%s", r.Stdout, slurmFailure(c, r))
		}
		// Two commands at once (srun --multi-prog underneath): each
		// child's appnum is its command's place.
		r = salloc(t, c, time.Minute, []string{"-N", "2", "-n", "8"}, []string{"-n", "1"}, progs[clients.PMI2Test], "spawn-multi")
		for rank, app := range []int{0, 1, 1} {
			if want := fmt.Sprintf("ok pmi2-mchild rank=%d size=3 appnum=%d\n", rank, app); r.ExitCode != 0 || !strings.Contains(r.Stdout, want) {
				t.Errorf("spawn-multi: want %q:\n%s", want, slurmFailure(c, r))
			}
		}
		// Two commands with a working directory and an environment of
		// their own (MPICH's spawnminfo1): each rank runs in its
		// command's, with its command's appnum.
		r = salloc(t, c, time.Minute, []string{"-N", "2", "-n", "8"}, []string{"-n", "1"}, progs[clients.PMI2Test], "spawn-multi-wdir")
		for rank, want := range []string{"appnum=0 cwd=/tmp env=one", "appnum=1 cwd=/ env=two", "appnum=1 cwd=/ env=two"} {
			if want := fmt.Sprintf("ok pmi2-wchild rank=%d %s\n", rank, want); r.ExitCode != 0 || !strings.Contains(r.Stdout, want) {
				t.Errorf("spawn-multi-wdir: want %q:\n%s", want, slurmFailure(c, r))
			}
		}
		return
	}
	t.Fatal("no pmi2/spawn/n=2 case")
}

// A spawn that Slurm cannot place fails, with Slurm's reason, and ends
// the job; it never hangs.
func TestSlurmSpawnRefused(t *testing.T) {
	c := slurm(t)
	// One CPU: the two children cannot be placed.
	r := salloc(t, c, time.Minute, []string{"-n", "1"}, []string{"-n", "1"}, progs[clients.PMI2Test], "spawn")
	if r.TimedOut || r.ExitCode == 0 {
		t.Fatalf("want a failed job: %s", slurmFailure(c, r))
	}
	if !strings.Contains(r.Stdout, "reason=spawn-rc-") {
		t.Fatalf("the spawner was not told: %s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "More processors requested than permitted") {
		t.Fatalf("Slurm's reason is not shown:\n%s", r.Stderr)
	}
}

// A shim that cannot start fails the step, with the shim's own
// message in srun's output (Slurm's srun alone would exit 0 after "task
// launch failed").
func TestSlurmShimFailureIsShown(t *testing.T) {
	c := slurm(t)
	argv := []string{"srun", "--mpi=gopmi", "-N", "2", "-n", "2", progs[clients.MPIHello]}
	r := runOn(t, c, time.Minute, argv, "GOPMI_FENCE_MODE=bogus")
	if r.ExitCode == 0 || strings.Count(r.Stderr, `gopmi: node `) != 2 ||
		!strings.Contains(r.Stderr, `fence mode "bogus" (GOPMI_FENCE_MODE or GopmiFenceMode): want collect, lazy or modex`) ||
		strings.Contains(r.Stdout, "ok hello") {
		t.Fatalf("want one line per node naming the setting and a failed step:\n%s", slurmFailure(c, r))
	}
	// srun's side without its binaries: the step fails at once, saying
	// where it looked (Slurm alone would wait half a minute).
	start := time.Now()
	r = runOn(t, c, time.Minute, argv, "GOPMI_BINDIR=/nonexistent")
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "/nonexistent/gopmi-slurm") || time.Since(start) > 15*time.Second {
		t.Fatalf("a wrong GOPMI_BINDIR, after %s:\n%s", time.Since(start).Round(time.Millisecond), slurmFailure(c, r))
	}
}

// Each rank reads PMI_hwloc_xmlfile as a job attribute: the topology its
// own node's slurmstepd wrote, as MPICH loads it instead of probing the
// machine in every rank.
func TestSlurmHwlocXMLFile(t *testing.T) {
	c := slurm(t)
	if rel := c.Release(); rel >= "25.05" {
		// slurmd writes no topology for a plugin to hand on since
		// 25.05: the attribute is not set, and MPICH probes the node.
		r := srun(t, c, time.Minute, []string{"-N", "2", "-n", "4"}, progs[clients.PMI2Test], "nohwloc")
		if r.ExitCode != 0 || strings.Count(r.Stdout, "step=nohwloc") != 4 {
			t.Fatalf("Slurm %s: want no PMI_hwloc_xmlfile: %s", rel, slurmFailure(c, r))
		}
		return
	}
	r := srun(t, c, time.Minute, []string{"-N", "2", "-n", "4"}, progs[clients.PMI2Test], "hwloc")
	if r.ExitCode != 0 {
		t.Fatal(slurmFailure(c, r))
	}
	files := map[string]bool{}
	for _, m := range regexp.MustCompile(`ok pmi2 rank=\d+ step=hwloc file=(\S+)`).FindAllStringSubmatch(r.Stdout, -1) {
		files[m[1]] = true
	}
	if len(files) != 2 {
		t.Fatalf("want each node's own topology file, one per node; got %v:\n%s", files, r.Stdout)
	}
	for f := range files {
		if !strings.HasPrefix(f, c.Dir) || !strings.Contains(filepath.Base(f), "hwloc_topo_") {
			t.Errorf("%s is not a slurmstepd's topology file under the cluster's spool", f)
		}
	}
}

// srun --multi-prog: each line of the configuration that runs ranks is an
// app, so a rank's MPI_APPNUM is its line's place, even for ranks that
// are not consecutive ("0,2" then "*"); Slurm's mpi/pmi2 leaves it unset.
func TestSlurmMultiProg(t *testing.T) {
	c := slurm(t)
	conf := filepath.Join(t.TempDir(), "mpmd.conf")
	a := progs[clients.MPIAttrs]
	if err := os.WriteFile(conf, []byte("# MPMD\n0,2 "+a+"\n\n*   "+a+" second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runOn(t, c, time.Minute, []string{"srun", "--mpi=gopmi", "-N", "2", "-n", "5", "--multi-prog", conf})
	if r.ExitCode != 0 {
		t.Fatal(slurmFailure(c, r))
	}
	for rank, app := range []int{0, 1, 0, 1, 1} {
		if want := fmt.Sprintf("ok attrs rank=%d size=5 appnum=%d ", rank, app); !strings.Contains(r.Stdout, want) {
			t.Errorf("want %q in:\n%s", want, r.Stdout)
		}
	}
}

// TestSlurmNamesThroughDaemon: with a node daemon on srun's node, a name a
// Slurm step publishes is found by a gopmi run started on its own, and
// the step finds the run's answer: one name space for both. A run
// PMI2_Job_Connects to the step's job and reads a key of its rank on the
// other node. Both through srun's node's own daemon, and through a hub
// that node relays to, with the run on the hub's node.
func TestSlurmNamesThroughDaemon(t *testing.T) {
	c := slurm(t)
	d, _ := testDaemon(t)
	hub, node, _ := startHub(t, worldDir(t))
	for _, tc := range []struct {
		name         string
		step, client *nodeDaemon
	}{
		{"same-daemon", d, d},
		// srun's node relays to a hub, which the gopmi run uses: as if
		// the run were on another node of the cluster.
		{"through-hub", node, hub},
	} {
		for _, m := range []struct{ name, serve, client, stepWants, clientWants string }{
			{"names", "ns-serve", "ns-client", "step=xrun-ack value=ack-from-", "step=xrun-lookup"},
			{"connect", "xconnect-serve", "xconnect-client", "step=xjob-ack value=ack", " value=xv-1\n"},
		} {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				env := append(c.Env(), daemon.EnvSocket+"="+tc.step.sock)
				argv := []string{"srun", "--mpi=gopmi", "-N", "2", "-n", "2", progs[clients.PMI2Test], m.serve}
				step := startRun(ctx, argv, env, nil, "")
				if tc.step == tc.client && m.name == "names" {
					stepProcTable(t, tc.step)
				}
				client := startRun(ctx, daemonArgv(tc.client.sock, "-n", "1", progs[clients.PMI2Test], m.client), nil, nil, "")
				cr := client.wait(t, "the gopmi run")
				sr := step.wait(t, "the Slurm step")
				if cr.ExitCode != 0 || sr.ExitCode != 0 || !strings.Contains(sr.Stdout, m.stepWants) || !strings.Contains(cr.Stdout, m.clientWants) {
					t.Fatal(twoRuns(cr, sr, tc.client) + "\nstep's daemon:\n" + tc.step.log.String())
				}
			})
		}
	}
}

// stepProcTable waits until srun's node's daemon lists a running step's
// job of two ranks, and checks that gopmi query answers its proc table as
// for a gopmi run (TestDaemonQueryVocabulary): asked of the step's
// coordinator, both ranks connected, one on each node.
func stepProcTable(t *testing.T, d *nodeDaemon) {
	t.Helper()
	var ns string
	waitFor(t, "the step's job in gopmi ps", func() bool {
		var jobs []plugin.JobInfo
		if err := json.Unmarshal([]byte(ask(t, nil, "ps", "-json", "-daemon", d.sock)), &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Size == 2 && j.State == "running" && len(j.Nodes) == 2 {
				ns = j.Nspace
				return true
			}
		}
		return false
	})
	var procs []plugin.ProcInfo
	waitFor(t, "both ranks of the step connected in its proc table", func() bool {
		var res map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ask(t, nil, "query", "-json", "-daemon", d.sock, "-nspace", ns, plugin.QueryProcTable)), &res); err != nil {
			t.Fatal(err)
		}
		var err error
		if procs, err = plugin.DecodeProcTable(string(res[plugin.QueryProcTable])); err != nil {
			t.Fatal(err)
		}
		return len(procs) == 2 && procs[0].State == plugin.ProcConnected && procs[1].State == plugin.ProcConnected
	})
	if procs[0].Node == procs[1].Node || procs[0].Node == "" {
		t.Errorf("the step's proc table: %+v; want one rank on each node", procs)
	}
}

// A step whose tasks never speak PMI starts no gopmi process: each
// stepd's mpi/gopmi starts the node's shim when a task first writes to
// its PMI fd, and srun's starts the coordinator when the first node
// connects (GopmiOnDemand, default yes). GOPMI_ON_DEMAND=no starts them
// with the step, as before; an MPI step is served either way.
func TestSrunOnDemand(t *testing.T) {
	c := slurm(t)
	step := func(r clients.Result) string {
		for _, l := range strings.Split(r.Stdout, "\n") {
			if s, ok := strings.CutPrefix(l, "step="); ok {
				return s
			}
		}
		t.Fatalf("no step= line: %s", slurmFailure(c, r))
		return ""
	}
	say := []string{"sh", "-c", `echo step=$SLURM_JOB_ID.$SLURM_STEP_ID`}
	r := runOn(t, c, time.Minute, append([]string{"srun", "-vv", "--mpi=gopmi", "-N2", "-n2"}, say...))
	if r.ExitCode != 0 {
		t.Fatalf("a step without PMI: %s", slurmFailure(c, r))
	}
	s := step(r)
	for _, n := range []string{"n1", "n2"} {
		if want := "no task of step " + s + " spoke PMI or PMIx: no shim started"; !strings.Contains(c.Log("slurmd-"+n, 400), want) {
			t.Errorf("node %s's log lacks %q:\n%s", n, want, c.Log("slurmd-"+n, 20))
		}
	}
	if !strings.Contains(r.Stderr, "started when a node connects") || strings.Contains(r.Stderr, "a node connected; coordinator pid") {
		t.Errorf("srun started the step's coordinator, or did not say it waits for a node: %s", r.Stderr)
	}

	r = runOn(t, c, time.Minute, append([]string{"srun", "-vv", "--mpi=gopmi", "-N2", "-n2"}, say...), "GOPMI_ON_DEMAND=no")
	s = step(r)
	for _, n := range []string{"n1", "n2"} {
		if want := "serves 1 tasks of step " + s; r.ExitCode != 0 || !strings.Contains(c.Log("slurmd-"+n, 400), want) {
			t.Errorf("GOPMI_ON_DEMAND=no: node %s's log lacks %q:\n%s", n, want, c.Log("slurmd-"+n, 20))
		}
	}

	r = runOn(t, c, time.Minute, []string{"srun", "-vv", "--mpi=gopmi", "-N2", "-n4", progs[clients.MPIHello]})
	for rank := range 4 {
		if want := fmt.Sprintf("ok hello rank=%d size=4 sum=10", rank); r.ExitCode != 0 || !strings.Contains(r.Stdout, want) {
			t.Fatalf("hello, its shims and coordinator started on demand, lacks %q: %s", want, slurmFailure(c, r))
		}
	}
	if !strings.Contains(r.Stderr, "a node connected; coordinator pid") {
		t.Errorf("srun's log does not say the coordinator started when a node connected: %s", r.Stderr)
	}
}

// gopmi-slurm check tells an admin on a node that the installed plugin
// goes with the slurmd that runs and with the gopmi binaries it runs, and
// says what is wrong when it does not.
func TestSlurmCheck(t *testing.T) {
	c := slurm(t)
	run := func(slurmd string) (string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "gopmi-slurm"), "check", "-plugin", c.Plugin(), "-slurmd", slurmd)
		cmd.Env = append(os.Environ(), c.Env()...)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("gopmi-slurm check: %v", err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run(c.Bin("slurmd"))
	if code != 0 || strings.Count(out, "ok  ") != 3 || !strings.Contains(out, "built for Slurm "+c.Release()) {
		t.Errorf("check on the lab's node: exit %d\n%s", code, out)
	}
	// A slurmd of another release: Slurm would not load the plugin.
	other := filepath.Join(t.TempDir(), "slurmd")
	if err := os.WriteFile(other, []byte("#!/bin/sh\necho slurm 99.01.1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code = run(other)
	if code != 1 || !strings.Contains(out, "BAD ") || !strings.Contains(out, "but slurmd is 99.01.1") {
		t.Errorf("check against another release's slurmd: exit %d\n%s", code, out)
	}
}
