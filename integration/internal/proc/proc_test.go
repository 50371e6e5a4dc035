package proc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStatSelf(t *testing.T) {
	p, ok := Stat(os.Getpid())
	if !ok {
		t.Fatal("Stat of the test process: not found")
	}
	if p.PID != os.Getpid() || p.PPID != os.Getppid() || !p.Alive() || p.Comm == "" {
		t.Fatalf("Stat = %+v, want pid %d ppid %d, alive, a name", p, os.Getpid(), os.Getppid())
	}
	if _, ok := Stat(-1); ok {
		t.Fatal("Stat(-1) found a process")
	}
}

// TestDescendantsAndWait starts sh, which starts sleep and prints its pid:
// sleep must be found below the test process, and WaitExited must time out
// while it runs and return once it is killed.
func TestDescendantsAndWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the sleep pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("sleep pid %q: %v", line, err)
	}

	ds, err := Descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		if d.PID == pid {
			found = d.PPID == cmd.Process.Pid
		}
	}
	if !found {
		t.Fatalf("sleep %d is not a child of sh %d in %+v", pid, cmd.Process.Pid, ds)
	}

	if err := WaitExited(pid, 10*time.Millisecond); err == nil {
		t.Fatal("WaitExited returned nil for a running process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := WaitExited(pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
