package shim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gopmi/gopmi/plugin/grpcplugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
)

// These tests start the real backend plugin: this test binary as
// gopmi-test-backend, through grpcplugin.

// pluginStart is shim/goplugin.Start, which this package's tests cannot
// import (it imports the shim).
func pluginStart(ctx context.Context, l Launch) (Process, error) {
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path: l.Path, Args: l.Args, Env: l.Env, SocketDir: l.SocketDir, Logger: l.Log, StartTimeout: l.Timeout,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func TestRunRealPlugin(t *testing.T) {
	// Two nodes: the barrier's fence crosses the gRPC boundary too.
	p := startRun(t, twoNodes(), runOpts{backendEnv: []string{raceEnv(), envFakeAttr + "=fake_attr=hello"}})
	p.ready()
	helloWorld(t, p.tasks[0], p.tasks[1], func(kvs string) {
		// Configure's attributes crossed the process boundary.
		if v := p.tasks[0].call("cmd=get kvsname="+kvs+" key=fake_attr", "get_result")["value"]; v != "hello" {
			t.Errorf("fake_attr=%q", v)
		}
	})
	p.waitExit(serve.ExitOK, "")
}

// fenceWatch is where the fake backend reports a fence: it dials the
// socket and writes "fence <pid>".
type fenceWatch struct {
	l    *net.UnixListener
	addr string
}

func watchFences(t *testing.T) *fenceWatch {
	t.Helper()
	addr := socketPath(t, "fence.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &fenceWatch{l: l, addr: addr}
}

// pid waits for a fence to reach the backend and returns the backend's
// pid.
func (w *fenceWatch) pid(t *testing.T) int {
	t.Helper()
	_ = w.l.SetDeadline(time.Now().Add(waitTimeout))
	c, err := w.l.Accept()
	if err != nil {
		t.Fatalf("no fence reached the backend: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(line, "fence %d", &pid); err != nil || pid <= 1 {
		t.Fatalf("fence report %q: %v", line, err)
	}
	return pid
}

func TestRunRealPluginKilled(t *testing.T) {
	w := watchFences(t)
	p := startRun(t, twoNodes(), runOpts{backendEnv: []string{raceEnv(), envFakeFence + "=block", envFakeNotify + "=" + w.addr}})
	p.ready()
	backendFailsInFence(p.tasks[0], p.tasks[1], func() {
		if err := syscall.Kill(w.pid(t), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	})
	p.waitExit(serve.ExitBackend, "gopmi-rm-fake exited")
}

// shimProc is gopmi-shim as a process, started the way `gopmi run` does:
// socketpairs as fds 3.., LISTEN_FDS and LISTEN_FDNAMES set, LISTEN_PID
// unset, the bootstrap on stdin, NOTIFY_SOCKET for readiness.
type shimProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	tasks  map[int32]*pmiTask
	notify *notifyListener
	log    *logBuf
	waited chan error
}

func startShim(t *testing.T, b *shimv1.Bootstrap, env ...string) *shimProc {
	t.Helper()
	data, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	t.Cleanup(cancel)
	p := &shimProc{t: t, tasks: map[int32]*pmiTask{}, notify: listenNotify(t), log: newLogBuf(), waited: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, os.Args[0], roleShim)
	p.cmd.Stdin = bytes.NewReader(data)
	p.cmd.Stderr = p.log
	var names []string
	for _, task := range b.Tasks {
		f, c := socketpair(t, task.FdName)
		defer f.Close() // the child has its copy
		p.cmd.ExtraFiles = append(p.cmd.ExtraFiles, f)
		names = append(names, task.FdName)
		p.tasks[task.Rank] = newPMITask(t, task.Rank, c)
	}
	p.cmd.Env = helperEnv(append([]string{
		fmt.Sprintf("LISTEN_FDS=%d", len(names)),
		"LISTEN_FDNAMES=" + strings.Join(names, ":"),
		"NOTIFY_SOCKET=" + p.notify.addr,
	}, env...)...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.waited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.waited
		}
	})
	return p
}

// exit waits for the shim and returns its exit status.
func (p *shimProc) exit() int {
	p.t.Helper()
	select {
	case err := <-p.waited:
		p.waited <- err
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		default:
			p.t.Fatalf("wait: %v", err)
		}
	case <-time.After(waitTimeout):
		p.t.Fatalf("shim did not exit; log:\n%s", p.log.String())
	}
	return -1
}

func (p *shimProc) expectExit(code int, reason string) {
	p.t.Helper()
	if got := p.exit(); got != code {
		p.t.Fatalf("exit %d, want %d; log:\n%s", got, code, p.log.String())
	}
	lines := strings.Split(strings.TrimSpace(p.log.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, reason) || !strings.Contains(last, fmt.Sprintf(`"exit":%d`, code)) {
		p.t.Errorf("last log line %q does not say %q", last, reason)
	}
}

func (p *shimProc) ready() {
	p.t.Helper()
	if msg := p.notify.next(p.t); msg != "READY=1\nSTATUS=serving 2 tasks" {
		p.t.Fatalf("sd_notify %q; log:\n%s", msg, p.log.String())
	}
}

func TestShimProcess(t *testing.T) {
	p := startShim(t, twoNodes())
	p.ready()
	helloWorld(t, p.tasks[0], p.tasks[1])
	p.expectExit(serve.ExitOK, "every task finished")
	// The backend's GRPC teardown is quick: nothing waited for go-plugin's
	// kill fallback.
	if strings.Contains(p.log.String(), "failed to exit gracefully") {
		t.Errorf("backend had to be killed:\n%s", p.log.String())
	}
}

func TestShimProcessSIGTERM(t *testing.T) {
	p := startShim(t, oneNode(2))
	p.ready()
	r0 := p.tasks[0]
	r0.init()
	r0.sendParked("cmd=barrier_in")
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	kv := r0.expect("barrier_out", false)
	if !strings.Contains(kv["_line"], "terminated") {
		t.Errorf("answer %q does not say why", kv["_line"])
	}
	p.expectExit(serve.ExitJobFailed, "received terminated")
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("took %v to stop", d)
	}
}

func TestShimProcessBackendKilled(t *testing.T) {
	w := watchFences(t)
	p := startShim(t, twoNodes(), envFakeFence+"=block", envFakeNotify+"="+w.addr)
	p.ready()
	backendFailsInFence(p.tasks[0], p.tasks[1], func() {
		if err := syscall.Kill(w.pid(t), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	})
	p.expectExit(serve.ExitBackend, "gopmi-rm-fake exited")
}

func TestShimProcessBadBootstrap(t *testing.T) {
	b := oneNode(2)
	b.Tasks[1].Rank = 5
	p := startShim(t, b)
	msg := p.notify.next(t)
	if !strings.HasPrefix(msg, "STATUS=bad bootstrap: tasks[1].rank: rank 5 is not on node 0") || !strings.HasSuffix(msg, "\nERRNO=22") {
		t.Errorf("sd_notify %q", msg)
	}
	p.expectExit(serve.ExitUsage, "tasks[1].rank")
}
