package grpcplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin/runner"
)

// procRunner starts and owns the plugin process for go-plugin (its
// RunnerFunc seam). go-plugin's own runner can neither set Pdeathsig on
// the right thread nor tell anyone the moment the process exits, and it
// ignores UnixSocketConfig.TempDir; this one does all three.
type procRunner struct {
	path string
	args []string
	env  []string // the environment before go-plugin's additions
	// goEnv is what go-plugin adds (magic cookie, protocol versions,
	// socket directory), set by the RunnerFunc before go-plugin calls
	// Start on the same goroutine. It comes last in the plugin's
	// environment so that nothing overrides go-plugin's variables.
	goEnv []string

	exited  chan struct{} // closed when the process has exited and been reaped
	waitErr error         // cmd.Wait's result; read only after exited closes

	mu      sync.Mutex
	cmd     *exec.Cmd // guarded by mu; set once started
	killed  bool      // guarded by mu; no start after a kill
	outR    *os.File  // guarded by mu
	errR    *os.File  // guarded by mu
	closeRd sync.Once
}

var _ runner.Runner = (*procRunner)(nil)

func newProcRunner(path string, args, env []string) *procRunner {
	return &procRunner{path: path, args: args, env: env, exited: make(chan struct{})}
}

// Start is runner.Runner's: it forks the plugin. The RunnerFunc configured
// the command before go-plugin calls it, so there is nothing to take from
// ctx.
func (r *procRunner) Start(context.Context) error {
	// Holding mu across the fork makes kill wait for it, so a kill that
	// races with the start still finds the process.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		return errors.New("start backend: cancelled before start")
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start backend: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("start backend: stderr pipe: %w", err)
	}
	cmd := exec.Command(r.path, r.args...)
	cmd.Env = append(append([]string(nil), r.env...), r.goEnv...)
	// Our own pipes rather than cmd's: Wait then leaves the read ends open
	// until go-plugin has read the last log line.
	cmd.Stdout = outW
	cmd.Stderr = errW
	// The plugin must not outlive the host: nothing else would end it when
	// the shim is SIGKILLed. The kernel sends Pdeathsig when the thread that
	// forked exits, not the process, hence the locked goroutine in own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go r.own(cmd, started)
	err = <-started
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err // names the binary already
	}
	r.cmd, r.outR, r.errR = cmd, outR, errR
	return nil
}

// own starts the process on a thread it keeps until the process is gone,
// so that no other goroutine can end that thread and, with it, the plugin.
func (r *procRunner) own(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		started <- err
		close(r.exited)
		return
	}
	started <- nil
	r.waitErr = cmd.Wait()
	close(r.exited)
}

// exitedEarly reports, waiting up to d for it, whether the process was
// started and has exited, and how it ended.
func (r *procRunner) exitedEarly(d time.Duration) (string, bool) {
	r.mu.Lock()
	started := r.cmd != nil
	r.mu.Unlock()
	if !started {
		return "", false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.exited:
	case <-t.C:
		return "", false
	}
	if r.waitErr != nil {
		return r.waitErr.Error(), true
	}
	return "exit status 0", true
}

// Kill sends SIGKILL; it is a no-op once the process is gone.
func (r *procRunner) Kill(context.Context) error {
	r.kill()
	return nil
}

func (r *procRunner) kill() {
	r.mu.Lock()
	r.killed = true
	cmd := r.cmd
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-r.exited:
		return
	default:
	}
	// ErrProcessDone (it exited just now) is the only error Kill can give
	// for our own child.
	_ = cmd.Process.Kill()
}

// Wait waits for the process to exit, then closes the pipes' read ends
// (go-plugin calls it only after reading them to EOF).
func (r *procRunner) Wait(ctx context.Context) error {
	select {
	case <-r.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.closePipes()
	return r.waitErr
}

func (r *procRunner) closePipes() {
	r.closeRd.Do(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.outR != nil {
			r.outR.Close()
		}
		if r.errR != nil {
			r.errR.Close()
		}
	})
}

func (r *procRunner) Stdout() io.ReadCloser {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outR
}

func (r *procRunner) Stderr() io.ReadCloser {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errR
}

func (r *procRunner) Name() string { return r.path }

// ID is the pid, or "" before the start (go-plugin then has nothing to
// kill).
func (r *procRunner) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}

func (r *procRunner) Diagnose(context.Context) string {
	return fmt.Sprintf("%s must be a gopmi backend whose main calls grpcplugin.Serve; run by hand, it says so.",
		filepath.Base(r.path))
}

func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
