package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/proc"
)

// The fault matrix: for each process of a job (a task, gopmi run, a shim,
// a backend), each phase of the job (before init, inside a fence, after a
// spawn, after finalize) and each way to die (exit 1, SIGKILL, SIGSTOP
// never resumed), a job of 4 ranks (pmi2_fault) has that process die
// there. The table it prints says how each job ended; each cell must:
//   - end within its time-out (-timeout 2s), except where nothing can tell
//     a stopped process from a slow one: gopmi run itself stopped, and a
//     task stopped after finalize (a program may run long after
//     MPI_Finalize); there the test stops gopmi run (SIGKILL, SIGTERM) as
//     a user would, and the rest must still hold;
//   - leave no process of the job (task, child, shim, backend: neither
//     running nor a zombie) and nothing in its TMPDIR;
//   - exit non-zero with a line that says what happened, unless gopmi run
//     itself was killed (there is nobody left to say it).
// Shims and backends exist only with -ppn (here -ppn 2: two shims, each
// with its backend); their "exit 1" is a wrapper that kills the real one
// and exits 1 when told to.

type faultCell struct {
	target, phase, death string
	ppn                  bool
}

type faultRow struct {
	cell      faultCell
	status    string
	wall      time.Duration
	line      string
	leftovers []string
	stopped   string // how the test had to stop gopmi run, if it did
	err       string
}

const (
	faultTimeout = 2 * time.Second  // the job's fence time-out
	faultEnd     = 12 * time.Second // how long a cell may take to end
	faultWaitRun = 5 * time.Second  // then the test stops a hung gopmi run
)

func TestFaultMatrix(t *testing.T) {
	begin(t)
	if shimMode() {
		t.Skip("the fault matrix sets -ppn itself: it runs once, in the default mode")
	}
	var cells []faultCell
	for _, target := range []string{"task", "gopmi", "shim", "backend"} {
		for _, ppn := range []bool{false, true} {
			if !ppn && (target == "shim" || target == "backend") {
				continue
			}
			for _, phase := range []string{"init", "fence", "spawn", "finalized"} {
				for _, death := range []string{"exit", "kill", "stop"} {
					cells = append(cells, faultCell{target, phase, death, ppn})
				}
			}
		}
	}
	wrappers := faultWrappers(t)
	rows := make([]faultRow, len(cells))
	sem := make(chan struct{}, 6)
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rows[i] = runFaultCell(t, c, wrappers)
		}()
	}
	wg.Wait()

	var tbl strings.Builder
	fmt.Fprintf(&tbl, "%-8s %-4s %-10s %-5s %-8s %-7s %-9s %s\n", "process", "ppn", "phase", "death", "status", "took", "stopped", "line / leftovers")
	for _, r := range rows {
		c := r.cell
		ppn := "0"
		if c.ppn {
			ppn = "2"
		}
		what := r.line
		if len(r.leftovers) > 0 {
			what += " LEFT: " + strings.Join(r.leftovers, ", ")
		}
		if r.err != "" {
			what += " FAILED: " + r.err
		}
		fmt.Fprintf(&tbl, "%-8s %-4s %-10s %-5s %-8s %-7s %-9s %s\n", c.target, ppn, c.phase, deathName(c), r.status,
			r.wall.Round(10*time.Millisecond), orDash(r.stopped), what)
	}
	t.Logf("fault matrix (-timeout %s):\n%s", faultTimeout, tbl.String())
	for _, r := range rows {
		if r.err != "" || len(r.leftovers) > 0 {
			t.Errorf("%s %s %s ppn=%v: %s; left %v", r.cell.target, r.cell.phase, r.cell.death, r.cell.ppn, r.err, r.leftovers)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deathName: gopmi run is not made to exit 1; it is asked to stop
// (SIGTERM), which is the orderly way it ends early.
func deathName(c faultCell) string {
	if c.target == "gopmi" && c.death == "exit" {
		return "term"
	}
	return c.death
}

// faultWrappers writes gopmi-shim and gopmi-rm-local wrappers that run the
// real program and, once $GOPMI_FAULT_DIR/die exists, kill it and exit 1.
func faultWrappers(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, name := range []string{"gopmi-shim", "gopmi-rm-local"} {
		real := filepath.Join(filepath.Dir(gopmiBin), name)
		// An asynchronous command of sh reads /dev/null unless told;
		// fds 3 and up are the shim's sockets.
		script := `#!/bin/sh
exec 9<&0
"` + real + `" "$@" <&9 9<&- &
pid=$!
exec 9<&-
while [ ! -e "$GOPMI_FAULT_DIR/die" ]; do
	if ! kill -0 $pid 2>/dev/null; then wait $pid; exit $?; fi
	sleep 0.02
done
kill -9 $pid
exit 1
`
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

func runFaultCell(t *testing.T, c faultCell, wrappers map[string]string) (row faultRow) {
	row.cell = c
	dir, err := os.MkdirTemp("", "gopmi-fault-")
	if err != nil {
		row.err = err.Error()
		return row
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		row.err = err.Error()
		return row
	}
	args := []string{"-n", "4", "-timeout", faultTimeout.String(), "-start-timeout", "5s"}
	if c.ppn {
		args = append(args, "-ppn", "2")
	} else {
		args = append(args, "-ppn", "0")
	}
	args = append(args, prog(t, clients.PMI2Fault), "phase="+c.phase, "dir="+dir)
	if c.target == "task" {
		args = append(args, "die="+c.death)
	}
	env := append(os.Environ(), "TMPDIR="+tmp, "GOPMI_FAULT_DIR="+dir, "GOPMI_TEST_ALARM=60", "GOPMI_DAEMON=none")
	if c.death == "exit" && c.target == "shim" {
		env = append(env, "GOPMI_SHIM="+wrappers["gopmi-shim"])
	}
	if c.death == "exit" && c.target == "backend" {
		env = append(env, "GOPMI_RM_LOCAL="+wrappers["gopmi-rm-local"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{gopmiBin, "run"}, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		row.err = err.Error()
		return row
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	seen := map[int]string{cmd.Process.Pid: "gopmi"}
	note := func() {
		ps, _ := proc.Descendants(cmd.Process.Pid)
		for _, p := range ps {
			seen[p.PID] = p.Comm
		}
	}

	// Rank 0 at the phase; or rank 1, when it is the one to die there
	// (its death may end the job before rank 0 gets there).
	marker := filepath.Join(dir, "at."+c.phase+".0")
	if c.target == "task" {
		marker = filepath.Join(dir, "at."+c.phase+".1")
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		note()
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) || isDone(done) {
			row.err = "rank 0 never reached the phase: " + lastLines(out.String(), 3)
			_ = cmd.Process.Kill()
			<-done
			return row
		}
	}
	time.Sleep(20 * time.Millisecond)
	note()
	if err := injectFault(c, cmd.Process.Pid, dir, seen); errors.Is(err, errNoTarget) {
		// The shims end with their tasks' finalize: after it there is
		// none to kill.
		row.status, row.line = "n/a", err.Error()
		_ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		<-done
		return row
	} else if err != nil {
		row.err = err.Error()
		_ = cmd.Process.Kill()
		<-done
		return row
	}
	// The waiting ranks go on into what the fault broke.
	time.Sleep(100 * time.Millisecond)
	note()
	_ = os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)

	expectHang := c.death == "stop" && (c.target == "gopmi" || c.target == "task" && c.phase == "finalized")
	limit := faultEnd
	if expectHang {
		limit = faultWaitRun
	}
	select {
	case <-done:
	case <-time.After(limit):
		if !expectHang {
			row.err = fmt.Sprintf("did not end within %s", limit)
		}
		// As a user would: ask, then insist.
		if c.target == "gopmi" {
			row.stopped = "KILL"
			_ = cmd.Process.Kill()
		} else {
			row.stopped = "TERM"
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-done:
		case <-time.After(faultEnd):
			row.stopped += "+KILL"
			_ = cmd.Process.Kill()
			<-done
		}
	}
	row.wall = time.Since(start)
	row.status = exitStatus(cmd.ProcessState)
	row.line = failureLine(out.String())

	// What was seen must be gone: tasks (their files name them), shims,
	// backends, spawned children.
	for _, e := range mustGlob(filepath.Join(dir, "task.*")) {
		if pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(e), "task.")); err == nil {
			seen[pid] = "task"
		}
	}
	delete(seen, cmd.Process.Pid)
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		row.leftovers = row.leftovers[:0]
		for pid, comm := range seen {
			if alive(pid) {
				row.leftovers = append(row.leftovers, fmt.Sprintf("%s %d", comm, pid))
			}
		}
		if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
			for _, e := range entries {
				row.leftovers = append(row.leftovers, "TMPDIR/"+e.Name())
			}
		}
		if len(row.leftovers) == 0 || time.Now().After(deadline) {
			break
		}
	}
	sort.Strings(row.leftovers)
	if (c.target == "gopmi" && c.death != "exit" || c.target == "shim") && c.ppn && onlyShimDirs(row.leftovers) {
		// gopmi run killed: its shims died with it, and one caught
		// starting its backend could not remove the backend's socket
		// directory. Or a shim killed while starting its backend, by
		// the test's wrapper: gopmi run reaps the wrapper, whose pid
		// does not name the shim's directory. The next run with shims
		// removes it.
		next := exec.Command(gopmiBin, "run", "-ppn", "1", "-n", "1", "true")
		next.Env = env
		// The wrappers would kill the next run's shim too.
		_ = os.Remove(filepath.Join(dir, "die"))
		if b, err := next.CombinedOutput(); err != nil {
			row.err = fmt.Sprintf("the next run: %v: %s", err, b)
		}
		if entries, _ := os.ReadDir(tmp); len(entries) == 0 {
			row.stopped += " (next run swept " + strconv.Itoa(len(row.leftovers)) + " dir)"
			row.leftovers = nil
		}
	}
	for pid, comm := range seen {
		if alive(pid) && comm != "gopmi" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	killedRun := c.target == "gopmi" && c.death != "exit"
	switch {
	case row.err != "":
	case row.status == "0" && c.phase == "finalized" && (c.target == "backend" || c.target == "shim"):
		// Its node's ranks may all have finalized and closed their
		// connections before the fault landed: then the node's job was
		// over, its shim no longer needed its backend, and the run
		// rightly ends well. (Rank 0's marker says only that rank 0
		// finalized; its node's other rank races the fault.)
		row.line = "none needed it any more: its node's ranks had finalized"
	case row.status == "0":
		row.err = "exit 0 after a fault"
	case !killedRun && row.line == "":
		row.err = "no line says what happened: " + lastLines(out.String(), 3)
	}
	return row
}

var errNoTarget = errors.New("no such process left at this phase")

// injectFault makes the cell's process die; a task dies by itself.
func injectFault(c faultCell, runPid int, dir string, seen map[int]string) error {
	if c.target == "task" {
		return nil
	}
	pid := runPid
	if c.target != "gopmi" {
		want := map[string]string{"shim": "gopmi-shim", "backend": "gopmi-rm-local"}[c.target]
		var pids []int
		for p, comm := range seen {
			if comm == want && alive(p) {
				pids = append(pids, p)
			}
		}
		if len(pids) == 0 {
			return fmt.Errorf("%w: every %s ended", errNoTarget, want)
		}
		slices.Sort(pids)
		pid = pids[0]
	}
	if c.death == "exit" && c.target != "gopmi" {
		return os.WriteFile(filepath.Join(dir, "die"), nil, 0o644)
	}
	sig := map[string]syscall.Signal{"exit": syscall.SIGTERM, "kill": syscall.SIGKILL, "stop": syscall.SIGSTOP}[c.death]
	return syscall.Kill(pid, sig)
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func exitStatus(ps *os.ProcessState) string {
	if ps == nil {
		return "?"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "sig" + strconv.Itoa(int(ws.Signal()))
	}
	return strconv.Itoa(ps.ExitCode())
}

// failureLine is the line gopmi run printed about the failure: its first
// "gopmi:" line (the cause; what followed from it comes after), else its
// first error log line.
func failureLine(out string) string {
	var last, lastErr string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case last == "" && (strings.HasPrefix(l, "gopmi:") || strings.HasPrefix(l, "gopmi run:")):
			last = l
		case lastErr == "" && strings.Contains(l, " ERR "):
			lastErr = l
		}
	}
	if last == "" {
		last = lastErr
	}
	if len(last) > 240 {
		last = last[:240] + "..."
	}
	return last
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

func mustGlob(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

func onlyShimDirs(left []string) bool {
	for _, l := range left {
		if !strings.HasPrefix(l, "TMPDIR/gopmi-shim-") {
			return false
		}
	}
	return len(left) > 0
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	p, ok := proc.Stat(pid)
	return ok && p.Alive()
}

// TestFenceTimeoutEndsJob: a fence that times out ends the job, whatever
// its ranks do next. Rank 1 of pmi2_fault stops before the fence; rank 0,
// told its fence failed, goes on and hangs (ignore: 30 s). The run ends
// at the time-out, non-zero, with a line naming rank 1; before, it waited
// for the hung rank.
func TestFenceTimeoutEndsJob(t *testing.T) {
	begin(t)
	for _, ppn := range []string{"0", "1"} {
		t.Run("ppn="+ppn, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			r := gopmiRun(t, runOpts{timeout: time.Minute}, "-timeout", faultTimeout.String(), "-ppn", ppn, "-n", "2",
				prog(t, clients.PMI2Fault), "phase=fence", "die=stop", "dir="+dir, "ignore")
			took := time.Since(start)
			if !strings.Contains(r.Stdout, "rank=0 ignores its failed fence") {
				t.Fatalf("rank 0 did not go on after its failed fence: %s", output(r))
			}
			if r.ExitCode == 0 || took > faultEnd {
				t.Errorf("the run ended with %d after %v; want non-zero within %v: %s", r.ExitCode, took, faultEnd, output(r))
			}
			if !strings.Contains(r.Stderr, "rank 1 (node ") || !strings.Contains(r.Stderr, "did not arrive") {
				t.Errorf("no line names the rank that never arrived: %s", output(r))
			}
		})
	}
}
