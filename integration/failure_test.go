package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/proc"
)

// Every failure must end the job promptly: well under the runs' own
// deadline, so a hang shows up as a failed check, not a killed run.
const promptly = 20 * time.Second

// noBarrierCompleted: the ranks waiting for a failed rank must get a PMI
// error or be killed; a barrier that completes without the failed rank is
// wrong.
func noBarrierCompleted() clients.Check {
	return clients.StdoutLacks("barrier-completed")
}

// TestTaskExitsBeforeFinalize: rank 1 runs PMI init and exits 0 without
// finalize while the others wait in a barrier; the job must fail at once
// and say which rank left before finalize.
func TestTaskExitsBeforeFinalize(t *testing.T) {
	begin(t)
	for _, ppn := range []string{"0", "2"} {
		t.Run("ppn="+ppn, func(t *testing.T) {
			r := gopmiRun(t, runOpts{env: []string{taskRun}}, append([]string{"-ppn", ppn, "-n", "4"}, taskArgs("nofinalize")...)...)
			verify(t, r, failed(), within(promptly), noBarrierCompleted(),
				clients.StdoutHas("exiting-without-finalize rank=1"),
				gopmiLine("rank 1", "before finalize"))
			allExited(t, "task", taskPids(r.Stdout))
		})
	}
}

// TestTaskKilledBySignal: rank 1 SIGKILLs itself after init while the
// others wait in a barrier; the job must fail at once and name the signal.
func TestTaskKilledBySignal(t *testing.T) {
	begin(t)
	r := gopmiRun(t, runOpts{env: []string{taskRun}}, append([]string{"-n", "4"}, taskArgs("sigkill")...)...)
	// The status is 128+9 when gopmi sees the signal first, else the job
	// failure the shim reports for the lost connection (1); both name
	// rank 1.
	verify(t, r, failed(), within(promptly), noBarrierCompleted(),
		clients.StdoutHas("killing-myself rank=1"), gopmiLine("rank 1"), func(r clients.Result) error {
			switch r.ExitCode {
			case 128 + int(syscall.SIGKILL):
				return gopmiLine("rank 1", "killed by signal 9")(r)
			case 1:
				return nil
			}
			return fmt.Errorf("exit code %d, want %d (the signal) or 1 (the lost connection)", r.ExitCode, 128+int(syscall.SIGKILL))
		})
	allExited(t, "task", taskPids(r.Stdout))
}

// TestFenceTimeout holds a barrier open (the last rank never joins) under
// -timeout 2s: the others must get a PMI error naming the missing rank
// within the time-out, and the job must end non-zero.
func TestFenceTimeout(t *testing.T) {
	begin(t)
	const fenceTimeout = 2 * time.Second
	for _, ppn := range []string{"0", "2"} {
		t.Run("ppn="+ppn, func(t *testing.T) {
			args := append([]string{"-ppn", ppn, "-timeout", fenceTimeout.String(), "-n", "4"}, taskArgs("hold")...)
			r := gopmiRun(t, runOpts{env: []string{taskRun}}, args...)
			verify(t, r, failed(), within(fenceTimeout+10*time.Second), noBarrierCompleted(),
				clients.StdoutHas("holding rank=3"), anyGopmiLine())
			// The error must say who is missing, not just that the barrier
			// failed. A rank may be ended by the first one's exit before it
			// prints; across nodes a rank may instead get the failure that
			// the first rank's exit caused.
			var named, other []string
			for _, l := range clients.Lines(r.Stdout, "barrier-error ") {
				if namesMissing(strings.ReplaceAll(l, "_", " "), 3) {
					named = append(named, l)
				} else {
					other = append(other, l)
				}
			}
			if len(named) == 0 || (ppn == "0" && len(other) > 0) {
				t.Errorf("%d barrier errors say that rank 3 did not arrive, %d do not\n%s", len(named), len(other), output(r))
			}
			if err := stderrMissing(3)(r); err != nil {
				// Known gap, not a failure: the "gopmi:" summary names the
				// first rank that exited after its barrier failed, and the
				// shim's log line with the cause may be dropped in the
				// teardown.
				t.Logf("note: %v", err)
			}
			allExited(t, "task", taskPids(r.Stdout))
		})
	}
}

// missingRe finds "rank 3" and "ranks 2-3" / "ranks 1,3" in a message.
var missingRe = regexp.MustCompile(`\branks? ([0-9][0-9,-]*)`)

// namesMissing reports whether s says that rank did not arrive: a fence
// timed out on one node names ranks, across nodes the universe names the
// ranks of the node that did not arrive.
func namesMissing(s string, rank int) bool {
	if !strings.Contains(s, "did not arrive") {
		return false
	}
	for _, m := range missingRe.FindAllStringSubmatch(s, -1) {
		for _, part := range strings.Split(strings.Trim(m[1], ",-"), ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			switch {
			case !isRange && err1 == nil && a == rank:
				return true
			case isRange && err1 == nil && err2 == nil && a <= rank && rank <= b:
				return true
			}
		}
	}
	return false
}

// stderrMissing wants a line on stderr saying that rank did not arrive.
func stderrMissing(rank int) clients.Check {
	return func(r clients.Result) error {
		for _, l := range strings.Split(r.Stderr, "\n") {
			if namesMissing(l, rank) {
				return nil
			}
		}
		return fmt.Errorf("no line on stderr says that rank %d did not arrive", rank)
	}
}

// TestBackendDies kills gopmi-rm-local while the tasks wait in a barrier
// that cannot complete (the last rank holds it open): the job must end
// non-zero with a message about the backend, and nothing may be left. A
// job on one node that gopmi run serves itself has no backend process to
// kill: there the test checks that none runs (nor a shim), and ends the
// job by killing a task instead.
func TestBackendDies(t *testing.T) {
	begin(t)
	for _, c := range []struct {
		name string
		n    int
		ppn  string
	}{{"one-node", 3, "0"}, {"ppn=2", 4, "2"}} {
		t.Run(c.name, func(t *testing.T) {
			servedHere := c.ppn == "0" && !shimMode()
			sock := filepath.Join(t.TempDir(), "ready.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()

			ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
			defer cancel()
			argv := gopmiArgv(append([]string{"-ppn", c.ppn, "-n", strconv.Itoa(c.n)}, taskArgs("hold")...)...)
			type outcome struct {
				r   clients.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				r, err := clients.Run(ctx, argv, clients.RunOptions{Env: []string{taskRun, sockEnv + "=" + sock}})
				done <- outcome{r, err}
			}()

			readyErr := waitReady(ctx, ln, c.n)
			var backends, shims []proc.Info
			if readyErr == nil {
				backends, shims, readyErr = gopmiHelpers()
			}
			victim := 0
			switch {
			case readyErr != nil:
			case servedHere && len(backends)+len(shims) > 0:
				readyErr = fmt.Errorf("a job on one node runs %d gopmi-rm-local and %d gopmi-shim processes, want none", len(backends), len(shims))
			case servedHere:
				var tasks []proc.Info
				if tasks, readyErr = taskProcs(); readyErr == nil && len(tasks) == 0 {
					readyErr = errors.New("no task below the test process")
				}
				if readyErr == nil {
					victim = tasks[0].PID
				}
			case len(backends) == 0:
				readyErr = errors.New("no gopmi-rm-local below the test process")
			default:
				// One backend is enough: the job cannot go on without it.
				victim = backends[0].PID
			}
			if readyErr == nil {
				readyErr = syscall.Kill(victim, syscall.SIGKILL)
			}
			if readyErr != nil {
				cancel()
			}
			o := <-done
			logRun(t, o.r)
			if readyErr != nil {
				t.Fatalf("before the kill: %v\n%s", readyErr, output(o.r))
			}
			if o.err != nil {
				t.Fatalf("%v\n%s", o.err, output(o.r))
			}
			t.Logf("killed pid %d (of %d backends)", victim, len(backends))
			// The gopmi: summary may name a consequence (a rank that exited
			// after its barrier failed); the cause must be on stderr.
			cause := stderrLine("backend", "gopmi-rm-local", "exited")
			if servedHere {
				cause = gopmiLine("killed by signal 9")
			}
			verify(t, o.r, failed(), within(promptly), noBarrierCompleted(), anyGopmiLine(), cause)
			pids := taskPids(o.r.Stdout)
			for _, p := range slices.Concat(backends, shims) {
				pids = append(pids, p.PID)
			}
			allExited(t, "task, shim or backend", pids)
		})
	}
}

// taskProcs finds the tasks (this test binary run as a task) below the
// test process.
func taskProcs() ([]proc.Info, error) {
	below, err := proc.Descendants(os.Getpid())
	if err != nil {
		return nil, err
	}
	var tasks []proc.Info
	for _, p := range below {
		if p.Comm == filepath.Base(selfBin)[:min(len(filepath.Base(selfBin)), 15)] {
			tasks = append(tasks, p)
		}
	}
	return tasks, nil
}

// gopmiHelpers finds the backends (gopmi-rm-local) and shims below the
// test process.
func gopmiHelpers() (backends, shims []proc.Info, err error) {
	below, err := proc.Descendants(os.Getpid())
	if err != nil {
		return nil, nil, err
	}
	for _, p := range below {
		switch p.Comm {
		case "gopmi-rm-local":
			backends = append(backends, p)
		case "gopmi-shim":
			shims = append(shims, p)
		}
	}
	return backends, shims, nil
}

// waitReady accepts one "ready" report per rank on ln, within ctx.
func waitReady(ctx context.Context, ln net.Listener, n int) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = ln.(*net.UnixListener).SetDeadline(dl)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		conn, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("wait for %d ranks to be ready (%d so far): %w", n, len(seen), err)
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil {
			return fmt.Errorf("read a ready report: %w", err)
		}
		seen[clients.Fields(line)["rank"]] = true
	}
	return nil
}

// TestBadWireInput runs the test binary as a task that writes malformed
// PMI-1 and PMI-2 requests on PMI_FD: each must get rc != 0 with a
// message and leave the connection usable; the unrecoverable ones (a
// PMI-2 length prefix that is not a number, a connection closed in the
// middle of a request) must end the job non-zero with a clear message.
func TestBadWireInput(t *testing.T) {
	begin(t)
	recoverable := map[string][]string{
		"wire1": {"unknown-command", "missing-value", "missing-key", "duplicated-key", "oversized-key",
			"oversized-value", "oversized-line", "garbled-no-cmd", "garbled-token", "wrong-kvsname"},
		"wire2": {"unknown-command", "missing-value", "missing-key", "duplicated-key", "oversized-key",
			"oversized-value", "garbled-no-cmd", "garbled-body"},
	}
	for _, role := range []string{"wire1", "wire2"} {
		t.Run(role, func(t *testing.T) {
			r := gopmiRun(t, runOpts{env: []string{taskRun}}, append([]string{"-n", "2"}, taskArgs(role)...)...)
			checks := []clients.Check{clients.ExitCode(0), clients.NoFail(), quiet()}
			for _, step := range recoverable[role] {
				checks = append(checks, stepRejected(step, 2))
			}
			verify(t, r, append(checks, clients.StdoutHas("wire rank=0 still-usable"), clients.StdoutHas("wire rank=1 still-usable"))...)
		})
	}

	for _, c := range []struct {
		role   string
		stdout []string // task lines that must be there
		stderr []string // words one gopmi: line must hold
	}{
		{"wire1-midclose", []string{"closed-mid-message rank=0"}, []string{"rank 0", "middle of a message"}},
		{"wire2-midclose", []string{"closed-mid-message rank=0"}, []string{"rank 0", "closed"}},
		{"wire2-badlen", []string{"wire rank=0 step=after-bad-length closed=true"}, []string{"rank 0"}},
	} {
		t.Run(c.role, func(t *testing.T) {
			r := gopmiRun(t, runOpts{env: []string{taskRun}}, append([]string{"-n", "1"}, taskArgs(c.role)...)...)
			checks := []clients.Check{failed(), within(promptly), clients.NoFail(), gopmiLine(c.stderr...)}
			for _, s := range c.stdout {
				checks = append(checks, clients.StdoutHas(s))
			}
			if c.role == "wire2-badlen" {
				checks = append(checks, stepRejected("bad-length", 1), stderrLine("length prefix"))
			}
			verify(t, r, checks...)
			allExited(t, "task", taskPids(r.Stdout))
		})
	}
}

// stepRejected wants, from each of n ranks, the reply to a malformed step
// with rc != 0 and a non-empty message.
func stepRejected(step string, n int) clients.Check {
	return func(r clients.Result) error {
		seen := map[string]bool{}
		for _, l := range clients.Lines(r.Stdout, "wire rank=") {
			f := clients.Fields(l)
			if f["step"] != step {
				continue
			}
			if f["rc"] == "0" || f["rc"] == "none" {
				return fmt.Errorf("step %s: rc=%s, want an error: %s", step, f["rc"], l)
			}
			if strings.Contains(l, `msg=""`) {
				return fmt.Errorf("step %s: the error reply has no message: %s", step, l)
			}
			seen[f["rank"]] = true
		}
		if len(seen) != n {
			return fmt.Errorf("step %s: %d of %d ranks printed a reply", step, len(seen), n)
		}
		return nil
	}
}

// TestLauncherMistake: a program that does not exist is a launcher error
// that names it, not a hang or a crash.
func TestLauncherMistake(t *testing.T) {
	begin(t)
	for _, p := range []string{"/nonexistent/gopmi-no-such-program", "gopmi-no-such-program-on-path"} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			r := gopmiRun(t, runOpts{}, "-n", "2", p)
			verify(t, r, failed(), within(promptly), func(r clients.Result) error {
				if !strings.Contains(r.Stderr, p) {
					return fmt.Errorf("stderr does not name %s", p)
				}
				return nil
			})
		})
	}
}

func TestNamesMissing(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"fence world/1: rank 3 (node vm) did not arrive within 2s", true},
		{"fence world/1: ranks 2-3 (node vm-1) did not arrive in 2s", true},
		{"fence world/1: ranks 1,3 did not arrive", true},
		{"fence world/1: ranks 4-7 did not arrive", false},
		{"fence world/1: rank 13 did not arrive", false},
		{"rank 3 closed its PMI connection before finalize", false},
	} {
		if got := namesMissing(c.s, 3); got != c.want {
			t.Errorf("namesMissing(%q, 3) = %v, want %v", c.s, got, c.want)
		}
	}
}
