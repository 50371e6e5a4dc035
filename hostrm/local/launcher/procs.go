package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gopmi/gopmi/hostrm/internal/procstat"
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/shim/pmix"
)

// starter starts every child of the run from one goroutine locked to its
// OS thread for the run's whole life. Pdeathsig fires when the thread that
// forked a child exits, not the process: starting from an ordinary
// goroutine would let the runtime retire that thread (after some other
// goroutine locked it and exited) and SIGKILL a healthy child. The locked
// thread ends only when the starter is closed, after every child was
// reaped; if gopmi run itself dies, the kernel kills every child.
type starter struct {
	reqs chan func()
	done chan struct{}
}

func newStarter() *starter {
	s := &starter{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		// Never unlocked: the thread exits with the goroutine.
		runtime.LockOSThread()
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

// do runs f on the starter's thread and returns when f did. f starts
// children with startChild, and must not call do. One do for a whole
// launch keeps the launch on one thread: a hand-off per child cost up to
// a millisecond of latency each, waking the other thread.
func (s *starter) do(f func()) {
	done := make(chan struct{})
	s.reqs <- func() {
		defer close(done)
		f()
	}
	<-done
}

// startChild starts cmd with Pdeathsig and a pidfd for wait. Call it only
// from a function do runs.
func startChild(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if pidfdWorks() {
		// Start fills it in; on failure it closes it and sets -1.
		pidfd := -1
		cmd.SysProcAttr.PidFD = &pidfd
	}
	return cmd.Start()
}

// wait is cmd.Wait for a child startChild started. It first parks on the
// runtime's poller until the child's pidfd says it exited, so the wait
// itself never blocks: a job of N tasks would otherwise hold N threads
// in the launcher, each created for one blocking waitid (measured: 72
// threads at N=64). Without a pidfd it is plain cmd.Wait.
func wait(cmd *exec.Cmd) error {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.PidFD != nil && *cmd.SysProcAttr.PidFD >= 0 {
		fd := *cmd.SysProcAttr.PidFD
		*cmd.SysProcAttr.PidFD = -1
		waitExited(fd)
	}
	return cmd.Wait()
}

// pidfdWorks reports whether this kernel has pollable pidfds (Linux 5.3).
var pidfdWorks = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// waitExited returns when the process behind pidfd has exited (or the fd
// cannot be polled), and closes the fd. A pidfd polls readable once its
// process has exited.
func waitExited(pidfd int) {
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return err != unix.EINTR && (err != nil || n > 0)
	})
}

func (s *starter) close() {
	close(s.reqs)
	<-s.done
}

// socketpair returns both ends of a close-on-exec unix stream socketpair:
// ExtraFiles makes the end a child gets inheritable in that child only.
func socketpair(name string) (server, client *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair for %s: %w", name, err)
	}
	return os.NewFile(uintptr(fds[0]), name+"-shim"), os.NewFile(uintptr(fds[1]), name+"-task"), nil
}

// hangupDeath is exitInfo's words for a process SIGHUP killed.
var hangupDeath = fmt.Sprintf("was killed by signal %d (%s)", int(syscall.SIGHUP), syscall.SIGHUP)

// exitInfo describes how a process ended: the status gopmi run would
// exit with for it (128+signal for a signal), and words for humans.
func exitInfo(ps *os.ProcessState) (status int, state, human string) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		sig := ws.Signal()
		return 128 + int(sig), "signaled(" + signalName(sig) + ")", fmt.Sprintf("was killed by signal %d (%s)", int(sig), sig)
	}
	code := ps.ExitCode()
	return code, "exited(" + strconv.Itoa(code) + ")", fmt.Sprintf("exited with status %d", code)
}

// signalName gives the short name of a signal: "TERM", "KILL".
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGILL:
		return "ILL"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGBUS:
		return "BUS"
	case syscall.SIGFPE:
		return "FPE"
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGPIPE:
		return "PIPE"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGUSR1:
		return "USR1"
	case syscall.SIGUSR2:
		return "USR2"
	}
	return strconv.Itoa(int(sig))
}

// isZombie reports whether pid has exited but not been reaped yet. A
// signal sent to such a process does nothing, so the launcher does not
// count its exit as caused by that signal.
func isZombie(pid int) bool {
	st, ok := procstat.Read(pid)
	return !ok || st.Exited()
}

// tailWriter passes a child's stderr through and remembers its last
// non-empty line, for the one-line failure message.
type tailWriter struct {
	w     io.Writer
	quiet *atomic.Bool // when set, lines are remembered but not passed on

	mu      sync.Mutex
	partial []byte // guarded by mu
	last    string // guarded by mu
}

const maxTailLine = 1024

func (t *tailWriter) Write(p []byte) (int, error) {
	if t.w != nil && (t.quiet == nil || !t.quiet.Load()) {
		_, _ = t.w.Write(p)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		if l := strings.TrimSpace(string(t.partial[:i])); l != "" {
			t.last = l
		}
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > maxTailLine {
		t.partial = t.partial[len(t.partial)-maxTailLine:]
	}
	return len(p), nil
}

// lastLine returns the last complete or partial non-empty line.
func (t *tailWriter) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := strings.TrimSpace(string(t.partial)); l != "" {
		return l
	}
	if len(t.last) > maxTailLine {
		return t.last[:maxTailLine] + "..."
	}
	return t.last
}

// childEnv filters the environment gopmi run passes on: variables that
// would point a child at another launcher's sockets or make a PMI client
// pick another protocol are dropped.
func childEnv(env []string) []string {
	drop := map[string]bool{
		"LISTEN_PID": true, "LISTEN_FDS": true, "LISTEN_FDNAMES": true, "NOTIFY_SOCKET": true,
		"PMI_FD": true, "PMI_PORT": true, "PMI_ID": true, "PMI_RANK": true, "PMI_SIZE": true,
		"PMI_JOBID": true, "PMI_SPAWNED": true, "MPI_LOCALNRANKS": true, "MPI_LOCALRANKID": true,
		forwarder.EnvUniverse: true,
	}
	out := make([]string, 0, len(env))
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		// Another launcher's PMIx and PRRTE settings point at its server.
		if drop[k] || pmix.ForeignVar(k) || strings.HasPrefix(k, "PRTE_") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// fdLimit returns the soft RLIMIT_NOFILE. Go raises it to the hard limit
// at start-up (and restores the original for children), so this is the
// most the launcher can use.
func fdLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// SealInheritedFDs marks every open fd above 2 close-on-exec, so that
// descriptors gopmi run inherited from its parent (a shell's, a CI
// runner's) reach neither its shims nor its tasks: a child gets exactly
// stdin, stdout, stderr and the fds it is given. Call it at start-up,
// before other goroutines open files.
func SealInheritedFDs() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			// The directory's own fd is among them; it is closed already
			// and the call fails harmlessly.
			syscall.CloseOnExec(fd)
		}
	}
}
