package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Info is what /proc/PID/stat says about a process.
type Info struct {
	PID, PPID int
	// Comm is the command name (at most 15 bytes).
	Comm string
	// State is the one-letter state: R, S, D, Z (zombie), X (dead), ...
	State byte
}

// Stat reads /proc/pid/stat; ok is false when the process is gone.
func Stat(pid int) (p Info, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Info{}, false
	}
	s := string(b)
	// comm is in parentheses and may hold spaces or parentheses itself.
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return Info{}, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return Info{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Info{}, false
	}
	return Info{PID: pid, PPID: ppid, Comm: s[open+1 : closing], State: f[0][0]}, true
}

// Alive reports whether the process is neither a zombie nor dead.
func (p Info) Alive() bool { return p.State != 'Z' && p.State != 'X' }

// Descendants lists every process below root in the parent links, parents
// before their children.
func Descendants(root int) ([]Info, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	children := map[int][]Info{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := Stat(pid); ok {
			children[p.PPID] = append(children[p.PPID], p)
		}
	}
	var out []Info
	queue := []int{root}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
		queue = queue[1:]
	}
	return out, nil
}

// WaitExited waits until pid has terminated (gone, or a zombie), at most
// d. It polls a pidfd, which becomes readable when the process exits, so it
// needs neither a sleep loop nor a parent relationship.
func WaitExited(pid int, d time.Duration) error {
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
			if p, ok := Stat(pid); ok && p.Alive() {
				return fmt.Errorf("process %d (%s) still running (state %c) after waiting %s", pid, p.Comm, p.State, d)
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
