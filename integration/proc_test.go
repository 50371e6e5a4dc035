package integration

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/integration/clients"
)

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid int
	comm      string
	state     byte
}

// readProc reads /proc/pid/stat; ok is false when the process is gone.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	// comm is in parentheses and may hold spaces or parentheses itself.
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procInfo{}, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, comm: s[open+1 : closing], state: f[0][0]}, true
}

// running reports whether pid exists and is not a zombie: orphans are not
// reaped on this machine kind, so a dead process may linger as state Z.
func running(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state != 'Z' && p.state != 'X'
}

// descendants lists every process below root in the parent links.
func descendants(root int) []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procInfo{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// waitExited waits until pid has terminated (gone, or a zombie), at most
// d. It uses a pidfd, which becomes readable when the process exits, so
// it needs neither polling nor a parent relationship.
func waitExited(pid int, d time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			if running(pid) {
				p, _ := readProc(pid)
				return fmt.Errorf("process %d (%s) still running (state %c) %s after the run", pid, p.comm, p.state, d)
			}
			return nil
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd of %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}

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
// over is killed so it cannot disturb later tests.
func allExited(t *testing.T, what string, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := waitExited(pid, 2*time.Second); err != nil {
			t.Errorf("%s: %v", what, err)
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
