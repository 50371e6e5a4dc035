package integration

import (
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/proc"
)

// taskPids reads the "task pid=P" lines the test binary's tasks print.
func taskPids(stdout string) []int {
	var out []int
	for _, l := range clients.Lines(stdout, "task pid=") {
		if pid, err := strconv.Atoi(clients.Fields(l)["pid"]); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// allExited fails t for every pid still running shortly after the run:
// gopmi run must end every task and helper before it exits. A pid left
// over is killed so it cannot disturb later tests. An empty list fails
// too: the run's output named no process, so nothing would be checked.
func allExited(t *testing.T, what string, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Errorf("%s: no pids to check: the run printed no \"task pid=\" line", what)
	}
	for _, pid := range pids {
		if err := proc.WaitExited(pid, 2*time.Second); err != nil {
			t.Errorf("%s left behind by the run: %v", what, err)
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
