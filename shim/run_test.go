package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
)

// helloWorld runs what MPICH's hello does over PMI-1 on two tasks: init,
// put, barrier, get the other's key, finalize, close. afterInit, if set,
// runs between init and put.
func helloWorld(t *testing.T, r0, r1 *pmiTask, afterInit ...func(kvs string)) {
	t.Helper()
	kvs := r0.init()
	if got := r1.init(); got != kvs {
		t.Fatalf("kvsnames differ: %q %q", kvs, got)
	}
	for _, f := range afterInit {
		f(kvs)
	}
	r0.call("cmd=put kvsname="+kvs+" key=card-0 value=addr0", "put_result")
	r1.call("cmd=put kvsname="+kvs+" key=card-1 value=addr1", "put_result")
	r0.send("cmd=barrier_in")
	r1.send("cmd=barrier_in")
	r0.expect("barrier_out", true)
	r1.expect("barrier_out", true)
	if v := r0.call("cmd=get kvsname="+kvs+" key=card-1", "get_result")["value"]; v != "addr1" {
		t.Errorf("rank 0 got card-1=%q", v)
	}
	if v := r1.call("cmd=get kvsname="+kvs+" key=card-0", "get_result")["value"]; v != "addr0" {
		t.Errorf("rank 1 got card-0=%q", v)
	}
	r0.call("cmd=finalize", "finalize_ack")
	r1.call("cmd=finalize", "finalize_ack")
	r0.conn.Close()
	r1.conn.Close()
}

func TestRunPMI1(t *testing.T) {
	var mu sync.Mutex
	var conf *plugin.ConfigureRequest
	var fences []*plugin.FenceRequest
	be := &fakeBackend{
		configure: func(_ context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
			mu.Lock()
			conf = req
			mu.Unlock()
			return &plugin.ConfigureResponse{Attrs: []plugin.Info{{Key: "fake_attr", Value: "from-backend"}}}, nil
		},
		fence: func(_ context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			mu.Lock()
			fences = append(fences, req)
			mu.Unlock()
			return &plugin.FenceResponse{Data: req.Data}, nil
		},
	}
	proc := newFakeProc(be)
	b := oneNode(2)
	b.Backend.Config = `{"x":1}`
	b.Job.Attrs = []*shimv1.KeyValue{{Key: "boot_attr", Value: "from-bootstrap"}}
	p := startRun(t, b, runOpts{start: proc.start()})
	p.ready()
	r0, r1 := p.tasks[0], p.tasks[1]

	kvs := r0.init()
	// Attributes from the bootstrap and from Configure are both served.
	if v := r0.call("cmd=get kvsname="+kvs+" key=fake_attr", "get_result")["value"]; v != "from-backend" {
		t.Errorf("fake_attr=%q", v)
	}
	if v := r0.call("cmd=get kvsname="+kvs+" key=boot_attr", "get_result")["value"]; v != "from-bootstrap" {
		t.Errorf("boot_attr=%q", v)
	}
	r0.call("cmd=finalize", "finalize_ack")
	r0.conn.Close()
	// Rank 0 is done; rank 1 runs the whole program on its own.
	r1.init()
	r1.call("cmd=finalize", "finalize_ack")
	r1.conn.Close()

	p.waitExit(serve.ExitOK, "")
	if !proc.wasClosed() {
		t.Error("backend not closed")
	}
	mu.Lock()
	defer mu.Unlock()
	want := &plugin.ConfigureRequest{
		APIVersion: plugin.APIVersion1,
		Job: plugin.Job{Nspace: "job-1", Size: 2, UniverseSize: 2,
			Nodes: []plugin.Node{{ID: 0, Name: "n0", Ranks: []int32{0, 1}}},
			Apps:  []plugin.App{{FirstRank: 0, Size: 2}}},
		Config: []byte(`{"x":1}`),
	}
	if diff := cmp.Diff(want, conf); diff != "" {
		t.Errorf("Configure (-want +got):\n%s", diff)
	}
	if !strings.Contains(p.log.String(), "every task finished") {
		t.Errorf("last log line does not say why:\n%s", p.log.String())
	}
}

func TestRunHelloWorld(t *testing.T) {
	proc := newFakeProc(&fakeBackend{})
	p := startRun(t, oneNode(2), runOpts{start: proc.start()})
	p.ready()
	helloWorld(t, p.tasks[0], p.tasks[1])
	p.waitExit(serve.ExitOK, "")
}

// A bootstrap outside the plain form (an enum by number) is still read,
// by protojson, and the log says so; one in it is read without a word.
func TestRunWarnsOfBootstrapNotPlain(t *testing.T) {
	for _, plain := range []bool{true, false} {
		b := oneNode(2)
		b.FenceMode = shimv1.FenceMode_FENCE_MODE_LAZY
		o := runOpts{start: newFakeProc(&fakeBackend{}).start()}
		if !plain {
			o.reform = func(data []byte) []byte {
				return regexp.MustCompile(`"fenceMode":\s*"FENCE_MODE_LAZY"`).ReplaceAll(data, []byte(`"fenceMode":2`))
			}
		}
		p := startRun(t, b, o)
		p.ready()
		helloWorld(t, p.tasks[0], p.tasks[1])
		p.waitExit(serve.ExitOK, "")
		if got := strings.Contains(p.log.String(), notPlainMsg); got == plain {
			t.Errorf("plain form %v: warned %v:\n%s", plain, got, p.log.String())
		}
	}
}

// A task that ends before finalize fails the job: exit 4, and the other
// task's pending barrier is answered with an error.
func TestRunTaskEndsEarly(t *testing.T) {
	proc := newFakeProc(&fakeBackend{})
	p := startRun(t, oneNode(2), runOpts{start: proc.start()})
	p.ready()
	r0, r1 := p.tasks[0], p.tasks[1]
	r0.init()
	r1.init()
	r0.sendParked("cmd=barrier_in")
	r1.conn.Close()
	r0.expect("barrier_out", false)
	p.waitExit(serve.ExitJobFailed, "rank 1 of job job-1 closed its PMI connection before finalize")
	r0.eof()
}

func TestRunAbort(t *testing.T) {
	aborted := make(chan *plugin.AbortRequest, 1)
	proc := newFakeProc(&fakeBackend{abort: func(_ context.Context, req *plugin.AbortRequest) error {
		aborted <- req
		return nil
	}})
	p := startRun(t, oneNode(2), runOpts{start: proc.start()})
	p.ready()
	p.tasks[0].init()
	p.tasks[1].init()
	p.tasks[1].send("cmd=abort exitcode=7")
	select {
	case req := <-aborted:
		if req.Status != 7 || req.Proc.Rank != 1 {
			t.Errorf("abort %+v", req)
		}
	case <-time.After(waitTimeout):
		t.Fatal("backend saw no abort")
	}
	// The step daemon kills the tasks.
	p.tasks[0].conn.Close()
	p.tasks[1].conn.Close()
	p.waitExit(serve.ExitAborted, "status 7")
}

// SIGTERM and the end of Run's context both fail the job: a pending
// request is answered with an error, and Run returns at once.
func TestRunStop(t *testing.T) {
	for _, how := range []string{"SIGTERM", "SIGINT", "context"} {
		t.Run(how, func(t *testing.T) {
			proc := newFakeProc(&fakeBackend{})
			p := startRun(t, oneNode(2), runOpts{start: proc.start()})
			p.ready()
			r0 := p.tasks[0]
			r0.init()
			r0.sendParked("cmd=barrier_in") // rank 1 never comes
			began := time.Now()
			switch how {
			case "SIGTERM":
				p.sigs <- syscall.SIGTERM
			case "SIGINT":
				p.sigs <- syscall.SIGINT
			default:
				p.cancel()
			}
			kv := r0.expect("barrier_out", false)
			if how != "context" && !strings.Contains(kv["_line"], "received") {
				t.Errorf("the error answer does not say why: %q", kv["_line"])
			}
			p.waitExit(serve.ExitJobFailed, "")
			if d := time.Since(began); d > 3*time.Second {
				t.Errorf("took %v to stop", d)
			}
			r0.eof()
			if msg := p.notify.next(t); !strings.HasPrefix(msg, "STOPPING=1\nSTATUS=") {
				t.Errorf("sd_notify %q, want STOPPING=1", msg)
			}
		})
	}
}

// The backend process exiting mid-job fails the pending fence and the
// shim exits 3.
func TestRunBackendDies(t *testing.T) {
	entered := make(chan struct{}, 1)
	proc := newFakeProc(&fakeBackend{fence: func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, fmt.Errorf("fence: %w", plugin.ErrBackendGone)
	}})
	p := startRun(t, twoNodes(), runOpts{start: proc.start()})
	p.ready()
	kv := backendFailsInFence(p.tasks[0], p.tasks[1], func() {
		select {
		case <-entered:
		case <-time.After(waitTimeout):
			t.Fatal("fence never reached the backend")
		}
		proc.die()
	})
	if !strings.Contains(kv["_line"], "backend_gopmi-rm-fake_exited") {
		t.Errorf("error answer %q does not name the backend", kv["_line"])
	}
	p.waitExit(serve.ExitBackend, "gopmi-rm-fake exited")
}

func TestRunSIGUSR1DumpsStacks(t *testing.T) {
	proc := newFakeProc(&fakeBackend{})
	p := startRun(t, oneNode(2), runOpts{start: proc.start()})
	p.ready()
	p.sigs <- syscall.SIGUSR1
	p.log.waitFor(t, "goroutine dump")
	if !strings.Contains(p.log.String(), "serveConn") {
		t.Error("the dump does not show the connection readers")
	}
	// Tasks that close without ever calling init end the job cleanly.
	p.tasks[0].conn.Close()
	p.tasks[1].conn.Close()
	p.waitExit(serve.ExitOK, "")
}

func TestRunConnectTimeout(t *testing.T) {
	proc := newFakeProc(&fakeBackend{})
	b := oneNode(2)
	b.Timeouts = &shimv1.Timeouts{Connect: durationpb.New(300 * time.Millisecond)}
	p := startRun(t, b, runOpts{start: proc.start()})
	p.ready()
	p.tasks[0].init()
	p.waitExit(serve.ExitJobFailed, "connect: rank 1 sent nothing within 300ms")
}

func TestRunPMIPort(t *testing.T) {
	proc := newFakeProc(&fakeBackend{})
	b, lf, addr := portJob(t)
	p := startRun(t, b, runOpts{start: proc.start(), files: []*os.File{lf}})
	p.ready()
	c, err := net.DialTimeout("unix", addr, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r1 := newPMITask(t, 1, c)
	r1.call("cmd=initack pmiid=1", "initack")
	for _, want := range []string{"size=2", "rank=1", "debug="} {
		if cmd, kv := r1.recv(); cmd != "set" || !strings.Contains(kv["_line"], want) {
			t.Fatalf("initack: got %q, want cmd=set %s", kv["_line"], want)
		}
	}
	helloWorld(t, p.tasks[0], r1)
	p.waitExit(serve.ExitOK, "")
}

func TestRunPMIPortConnectTimeout(t *testing.T) {
	proc := newFakeProc(&fakeBackend{})
	b, lf, _ := portJob(t)
	b.Timeouts = &shimv1.Timeouts{Connect: durationpb.New(300 * time.Millisecond)}
	p := startRun(t, b, runOpts{start: proc.start(), files: []*os.File{lf}})
	p.ready()
	p.tasks[0].init()
	p.waitExit(serve.ExitJobFailed, "connect: 0 of 1 PMI_PORT tasks connected within 300ms")
}

// Start-up failures before the tasks are served (a bad bootstrap, a
// missing fd, no backend binary) are reported with STATUS= and ERRNO=
// before the shim exits, and nothing is served.
func TestRunStartupFailure(t *testing.T) {
	emptyDir := t.TempDir()
	tests := []struct {
		name   string
		edit   func(b *shimv1.Bootstrap)
		noFDs  bool
		env    map[string]string
		code   int
		status string
		errno  syscall.Errno
	}{
		{name: "bad version", edit: func(b *shimv1.Bootstrap) { b.Version = 3 },
			code: serve.ExitUsage, status: "bad bootstrap: version: got 3", errno: syscall.EINVAL},
		{name: "missing fd", noFDs: true,
			code: serve.ExitUsage, status: `rank 0: fd "rank0" is not among the inherited fds`, errno: syscall.EINVAL},
		{name: "backend not found", edit: func(b *shimv1.Bootstrap) { b.Backend = &shimv1.BackendConfig{Name: "nope"} },
			env:  map[string]string{"PATH": emptyDir},
			code: serve.ExitBackend, status: "gopmi-rm-nope not found in", errno: syscall.EHOSTDOWN},
		{name: "backend path missing", edit: func(b *shimv1.Bootstrap) { b.Backend.Path = filepath.Join(emptyDir, "x") },
			code: serve.ExitBackend, status: "backend.path " + filepath.Join(emptyDir, "x"), errno: syscall.ENOENT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := oneNode(1)
			if tt.edit != nil {
				tt.edit(b)
			}
			p := startRun(t, b, runOpts{noTasks: tt.noFDs, env: tt.env, start: newFakeProc(&fakeBackend{}).start()})
			p.waitExit(tt.code, tt.status)
			msg := p.notify.next(t)
			want := fmt.Sprintf("\nERRNO=%d", int(tt.errno))
			if !strings.HasPrefix(msg, "STATUS=") || !strings.Contains(msg, tt.status) || !strings.HasSuffix(msg, want) {
				t.Errorf("sd_notify %q, want STATUS=...%s...%s", msg, tt.status, want)
			}
			if strings.Contains(msg, "READY=1") {
				t.Error("READY sent on failure")
			}
			checkLastLogLine(t, p, tt.status, tt.code)
		})
	}
}

// The tasks are served while the backend starts: a backend that then fails
// to start or configure fails the job after READY, with its reason in
// STATUS= and the exit status that names the backend.
func TestRunBackendStartFailure(t *testing.T) {
	tests := []struct {
		name   string
		start  func() StartFunc
		status string
	}{
		{name: "backend start fails", start: func() StartFunc {
			return func(context.Context, Launch) (Process, error) {
				return nil, errors.New("handshake: garbage on stdout")
			}
		}, status: "handshake: garbage on stdout"},
		{name: "configure fails", start: func() StartFunc {
			return newFakeProc(&fakeBackend{configure: func(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
				return nil, fmt.Errorf("no such allocation: %w", plugin.ErrNotFound)
			}}).start()
		}, status: "gopmi-rm-fake: configure: no such allocation"},
		{name: "old API", start: func() StartFunc {
			return newFakeProc(&oldAPIBackend{}).start()
		}, status: "speaks API versions [0.9]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startRun(t, oneNode(1), runOpts{start: tt.start()})
			p.ready()
			// A one-node job starts its backend when it first needs it.
			p.tasks[0].init()
			p.tasks[0].send("cmd=publish_name service=svc port=p1")
			p.tasks[0].expect("publish_result", false)
			p.waitExit(serve.ExitBackend, tt.status)
			if msg := p.notify.next(t); !strings.Contains(msg, "STATUS=") || !strings.Contains(msg, tt.status) {
				t.Errorf("sd_notify %q, want STATUS=...%s", msg, tt.status)
			}
			checkLastLogLine(t, p, tt.status, serve.ExitBackend)
		})
	}
}

// checkLastLogLine checks the shim's last log line gives the reason and
// the exit status.
func checkLastLogLine(t *testing.T, p *inProc, reason string, code int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(p.log.String()), "\n")
	var last struct {
		Error string
		Exit  int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("last log line %q: %v", lines[len(lines)-1], err)
	}
	if !strings.Contains(last.Error, reason) || last.Exit != code {
		t.Errorf("last log line %q does not give the reason and exit status", lines[len(lines)-1])
	}
}

type oldAPIBackend struct{ fakeBackend }

func (*oldAPIBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "old", APIVersions: []string{"0.9"}}, nil
}

func TestResolveBackend(t *testing.T) {
	shimDir, pathDir, other := t.TempDir(), t.TempDir(), t.TempDir()
	mk := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	self := mk(shimDir, "gopmi-shim", 0o755)
	beside := mk(shimDir, "gopmi-rm-local", 0o755)
	inPath := mk(pathDir, "gopmi-rm-slurm", 0o755)
	mk(pathDir, "gopmi-rm-local", 0o755)
	mk(pathDir, "gopmi-rm-noexec", 0o644)
	link := filepath.Join(other, "gopmi-shim")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "PATH" {
			return "relative:" + pathDir
		}
		return ""
	}
	tests := []struct {
		name string
		spec serve.BackendSpec
		self string
		want string
		err  string
	}{
		{"beside the shim first", serve.BackendSpec{Name: "local"}, self, beside, ""},
		{"then PATH", serve.BackendSpec{Name: "slurm"}, self, inPath, ""},
		{"beside the link's target", serve.BackendSpec{Name: "local"}, link, beside, ""},
		{"explicit path", serve.BackendSpec{Name: "x", Path: inPath}, self, inPath, ""},
		{"not executable", serve.BackendSpec{Name: "noexec"}, self, "", "gopmi-rm-noexec not found in " + shimDir + ":" + pathDir},
		{"missing", serve.BackendSpec{Name: "vendor"}, link, "", "gopmi-rm-vendor not found in " + other + ":" + shimDir + ":" + pathDir + " (next to the shim, then PATH)"},
		{"bad path", serve.BackendSpec{Path: filepath.Join(other, "none")}, self, "", "backend.path " + filepath.Join(other, "none")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveBackend(tt.spec, tt.self, env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || serve.ExitCode(err) != serve.ExitBackend {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// A signal during start-up ends it at once: the backend's start is
// cancelled, the step daemon hears why, and the exit says the job failed.
func TestRunStopDuringStart(t *testing.T) {
	starting := make(chan struct{})
	start := func(ctx context.Context, _ Launch) (Process, error) {
		close(starting)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	// A job on two nodes starts its backend at once.
	p := startRun(t, twoNodes(), runOpts{start: start})
	select {
	case <-starting:
	case <-time.After(waitTimeout):
		t.Fatal("backend start never began")
	}
	p.sigs <- syscall.SIGTERM
	p.waitExit(serve.ExitJobFailed, "received terminated")
	if msg := p.notify.next(t); !strings.HasPrefix(msg, "READY=1") {
		t.Errorf("first sd_notify %q, want READY=1", msg)
	}
	if msg := p.notify.next(t); !strings.Contains(msg, "received terminated") || !strings.Contains(msg, "STATUS=") {
		t.Errorf("sd_notify %q", msg)
	}
}

// A job that ends while its backend is still starting does not wait for
// it: the start is cut short and the shim exits cleanly.
func TestRunJobEndsBeforeBackendStarts(t *testing.T) {
	starting := make(chan struct{})
	cancelled := make(chan struct{})
	start := func(ctx context.Context, _ Launch) (Process, error) {
		close(starting)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}
	// Rank 2 lives on another node: this node starts its backend at once.
	b := twoNodes()
	p := startRun(t, b, runOpts{start: start})
	p.ready()
	select {
	case <-starting:
	case <-time.After(waitTimeout):
		t.Fatal("backend start never began")
	}
	for _, k := range p.tasks {
		k.init()
		k.call("cmd=finalize", "finalize_ack")
		k.conn.Close()
	}
	p.waitExit(serve.ExitOK, "")
	select {
	case <-cancelled:
	default:
		t.Fatal("the backend's start was not cut short")
	}
}

// A job on one node starts its backend only when it needs it: MPICH's
// hello never does.
func TestRunOneNodeJobNeedsNoBackend(t *testing.T) {
	var starts atomic.Int32
	start := func(ctx context.Context, _ Launch) (Process, error) {
		starts.Add(1)
		return nil, errors.New("must not start")
	}
	p := startRun(t, oneNode(2), runOpts{start: start})
	p.ready()
	helloWorld(t, p.tasks[0], p.tasks[1])
	p.waitExit(serve.ExitOK, "")
	if n := starts.Load(); n != 0 {
		t.Fatalf("backend started %d times", n)
	}
}

// The backend's private socket directory exists only for a backend that
// starts, and is gone when the shim is.
func TestRunSocketDirLifetime(t *testing.T) {
	dirs := make(chan string, 1)
	start := func(_ context.Context, l Launch) (Process, error) {
		st, err := os.Stat(l.SocketDir)
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("socket dir %q at start: %v, %v", l.SocketDir, st, err)
		}
		dirs <- l.SocketDir
		return nil, errors.New("handshake: garbage on stdout")
	}
	p := startRun(t, oneNode(1), runOpts{start: start})
	p.ready()
	p.tasks[0].init()
	p.tasks[0].send("cmd=publish_name service=svc port=p1")
	p.tasks[0].expect("publish_result", false)
	p.waitExit(serve.ExitBackend, "garbage on stdout")
	select {
	case dir := <-dirs:
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket dir %s left behind: %v", dir, err)
		}
	default:
		t.Fatal("the backend was never started")
	}
}

// Once the backend is up its socket directory is gone, while the job
// runs: a shim killed later leaves nothing behind.
func TestRunSocketDirGoneOnceUp(t *testing.T) {
	dirs := make(chan string, 1)
	start := func(ctx context.Context, l Launch) (Process, error) {
		dirs <- l.SocketDir
		return pluginStart(ctx, l)
	}
	p := startRun(t, oneNode(1), runOpts{start: start})
	p.ready()
	p.tasks[0].init()
	// The fake backend has no name service: the call brings it up.
	p.tasks[0].send("cmd=publish_name service=svc port=p1")
	p.tasks[0].expect("publish_result", false)
	dir := <-dirs
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket dir %s still there with the backend up: %v", dir, err)
	}
	p.tasks[0].call("cmd=finalize", "finalize_ack")
	p.tasks[0].conn.Close()
	p.waitExit(0, "")
}

// backend.start_at_once starts the backend of a one-node job with its
// tasks: a smoke test of a backend sees its calls.
func TestRunStartAtOnce(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	start := func(ctx context.Context, l Launch) (Process, error) {
		once.Do(func() { close(started) })
		return pluginStart(ctx, l)
	}
	b := oneNode(2)
	b.Backend.StartAtOnce = true
	p := startRun(t, b, runOpts{start: start})
	p.ready()
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("start_at_once: the backend did not start before any request needed it")
	}
	helloWorld(t, p.tasks[0], p.tasks[1])
	p.waitExit(serve.ExitOK, "")
}

// RunConfig.Backend serves the backend in the shim's process: it gets the
// bootstrap's backend spec when the job needs its backend, answers the
// job's cross-node fence, and is closed after the job; no backend binary
// is looked up.
func TestRunInProcessBackend(t *testing.T) {
	fences := make(chan *plugin.FenceRequest, 4)
	fb := &fakeBackend{fence: func(_ context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		fences <- req
		return &plugin.FenceResponse{Data: req.Data}, nil // node n1's rank 2 puts nothing
	}}
	var got serve.BackendSpec
	var closed atomic.Bool
	b := twoNodes()
	b.Backend = &shimv1.BackendConfig{Name: "nowhere-on-path", Args: []string{"-x", "1"}}
	p := startRun(t, b, runOpts{env: map[string]string{"PATH": t.TempDir()},
		inProcess: func(_ context.Context, spec serve.BackendSpec) (plugin.Full, error) {
			got = spec
			return closeProbe{plugin.Complete(fb), &closed}, nil
		}})
	p.ready()
	helloWorld(t, p.tasks[0], p.tasks[1])
	p.waitExit(serve.ExitOK, "")
	if got.Name != "nowhere-on-path" || !slices.Equal(got.Args, []string{"-x", "1"}) {
		t.Errorf("backend spec %+v, want the bootstrap's", got)
	}
	if len(fences) == 0 {
		t.Error("the in-process backend saw no fence")
	}
	if !closed.Load() {
		t.Error("the in-process backend was not closed after the job")
	}
}

// With BackendNames, RunConfig.Backend serves only the backends it names:
// another is started as a process (gopmi-pmix serves gopmi run's own
// backend in process, and starts a vendor's).
func TestRunInProcessOnlyNamedBackends(t *testing.T) {
	var called atomic.Bool
	p := startRun(t, twoNodes(), runOpts{inNames: []string{"local"},
		inProcess: func(context.Context, serve.BackendSpec) (plugin.Full, error) {
			called.Store(true)
			return nil, errors.New("not this one")
		}})
	p.ready()
	helloWorld(t, p.tasks[0], p.tasks[1])
	p.waitExit(serve.ExitOK, "")
	if called.Load() {
		t.Error("a backend BackendNames does not name was served in process")
	}
}

// closeProbe records its Close.
type closeProbe struct {
	plugin.Full
	closed *atomic.Bool
}

func (c closeProbe) Close() error { c.closed.Store(true); return nil }

// A shim given no way to start a backend process, and none in process,
// says so before it serves.
func TestRunNoWayToStartBackend(t *testing.T) {
	p := startRun(t, oneNode(1), runOpts{noPlugins: true})
	p.waitExit(serve.ExitBackend, "can neither start a backend process nor serve gopmi-rm-")
}
