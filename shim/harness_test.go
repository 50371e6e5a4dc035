package shim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

// logBuf collects the shim's log and lets a test wait for a line.
type logBuf struct {
	mu      sync.Mutex
	buf     bytes.Buffer  // guarded by mu
	changed chan struct{} // closed and replaced on every write; guarded by mu
}

func newLogBuf() *logBuf { return &logBuf{changed: make(chan struct{})} }

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the log contains s.
func (b *logBuf) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		found, ch := strings.Contains(b.buf.String(), s), b.changed
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("log never contained %q:\n%s", s, b.String())
		}
	}
}

// oneNode returns a bootstrap for an n-rank job on one node, each task on
// fd "rank<i>", whose backend path is this test binary.
func oneNode(n int) *shimv1.Bootstrap {
	b := &shimv1.Bootstrap{
		Version: 1,
		Job:     &shimv1.Job{Nspace: "job-1", Size: int32(n), Nodes: []*shimv1.Node{{Id: 0, Name: "n0"}}},
		Backend: &shimv1.BackendConfig{Name: "fake", Path: os.Args[0], Args: []string{roleBackend}},
	}
	for i := range int32(n) {
		b.Job.Nodes[0].Ranks = append(b.Job.Nodes[0].Ranks, i)
		b.Tasks = append(b.Tasks, &shimv1.Task{Rank: i, FdName: fmt.Sprintf("rank%d", i)})
	}
	return b
}

// twoNodes is oneNode(2) with a third rank on another node, so that
// fences go to the backend (a one-node job fences locally).
func twoNodes() *shimv1.Bootstrap {
	b := oneNode(2)
	b.Job.Size = 3
	b.Job.Nodes = append(b.Job.Nodes, &shimv1.Node{Id: 1, Name: "n1", Ranks: []int32{2}})
	return b
}

// portJob is oneNode(2) with rank 1 connecting through PMI_PORT: the
// bootstrap, the listening socket to hand Run, and its address.
func portJob(t *testing.T) (*shimv1.Bootstrap, *os.File, string) {
	t.Helper()
	b := oneNode(2)
	b.PmiPortFd = "pmiport"
	b.Tasks[1].FdName = ""
	lf, addr := listenerFile(t, b.PmiPortFd)
	return b, lf, addr
}

// notifyListener is the step daemon's end of NOTIFY_SOCKET.
type notifyListener struct {
	conn *net.UnixConn
	addr string
}

// socketPath is a path for a unix socket in a fresh directory removed
// after the test: short, unlike t.TempDir's, since a socket path is
// limited to 108 bytes.
func socketPath(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gopmi-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, name)
}

func listenNotify(t *testing.T) *notifyListener {
	t.Helper()
	addr := socketPath(t, "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifyListener{conn: c, addr: addr}
}

// next returns the next datagram.
func (n *notifyListener) next(t *testing.T) string {
	t.Helper()
	_ = n.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	b := make([]byte, 4096)
	k, _, err := n.conn.ReadFrom(b)
	if err != nil {
		t.Fatalf("sd_notify: %v", err)
	}
	return string(b[:k])
}

// pmiTask is a task's end of its PMI connection, speaking raw PMI-1.
type pmiTask struct {
	t    *testing.T
	rank int32
	conn net.Conn
	r    *bufio.Reader
}

func newPMITask(t *testing.T, rank int32, conn net.Conn) *pmiTask {
	return &pmiTask{t: t, rank: rank, conn: conn, r: bufio.NewReader(conn)}
}

func (p *pmiTask) send(line string) {
	p.t.Helper()
	_ = p.conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	if _, err := p.conn.Write([]byte(line + "\n")); err != nil {
		p.t.Fatalf("rank %d: send %q: %v", p.rank, line, err)
	}
}

// recv reads one reply line as its cmd and key/values.
func (p *pmiTask) recv() (string, map[string]string) {
	p.t.Helper()
	_ = p.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	line, err := p.r.ReadString('\n')
	if err != nil {
		p.t.Fatalf("rank %d: read reply: %v (got %q)", p.rank, err, line)
	}
	kv := map[string]string{}
	var cmd string
	for i, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		if i == 0 {
			cmd = v
			continue
		}
		if _, dup := kv[k]; !dup {
			kv[k] = v
		}
	}
	// msg= may hold spaces; keep the raw line for messages.
	kv["_line"] = strings.TrimSpace(line)
	return cmd, kv
}

// expect reads a reply and checks its cmd and rc.
func (p *pmiTask) expect(cmd string, ok bool) map[string]string {
	p.t.Helper()
	got, kv := p.recv()
	if got != cmd {
		p.t.Fatalf("rank %d: got %q, want cmd=%s", p.rank, kv["_line"], cmd)
	}
	if rc := kv["rc"]; (rc == "0" || rc == "") != ok {
		p.t.Fatalf("rank %d: %q: rc %q, want success=%v", p.rank, kv["_line"], rc, ok)
	}
	return kv
}

func (p *pmiTask) call(line, reply string) map[string]string {
	p.t.Helper()
	p.send(line)
	return p.expect(reply, true)
}

// init runs PMI-1 start-up as MPICH does and returns the kvsname.
func (p *pmiTask) init() string {
	p.t.Helper()
	p.call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init")
	maxes := p.call("cmd=get_maxes", "maxes")
	if maxes["kvsname_max"] == "" {
		p.t.Fatalf("rank %d: maxes without kvsname_max: %q", p.rank, maxes["_line"])
	}
	return p.call("cmd=get_my_kvsname", "my_kvsname")["kvsname"]
}

// sendParked sends a request that will wait (a barrier) and then a quick
// one, and reads the quick one's answer: afterwards the shim has surely
// read the first, so the test can fail the job knowing it is pending.
func (p *pmiTask) sendParked(line string) {
	p.t.Helper()
	p.send(line)
	p.call("cmd=get_my_kvsname", "my_kvsname")
}

// backendFailsInFence has both tasks of a two-node job init and enter a
// barrier, whose fence goes to the backend; fail then makes the backend
// fail, and both barriers must fail. It returns rank 0's answer.
func backendFailsInFence(r0, r1 *pmiTask, fail func()) map[string]string {
	r0.t.Helper()
	r0.init()
	r1.init()
	r0.send("cmd=barrier_in")
	r1.send("cmd=barrier_in")
	fail()
	kv := r0.expect("barrier_out", false)
	r1.expect("barrier_out", false)
	return kv
}

// eof waits for the shim to close the connection.
func (p *pmiTask) eof() {
	p.t.Helper()
	_ = p.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		if _, err := p.r.ReadByte(); err != nil {
			if os.IsTimeout(err) {
				p.t.Fatalf("rank %d: connection still open", p.rank)
			}
			return
		}
	}
}

// inProc is Run running in this process on socketpairs.
type inProc struct {
	t      *testing.T
	tasks  map[int32]*pmiTask
	notify *notifyListener
	sigs   chan os.Signal
	log    *logBuf
	done   chan error
	cancel context.CancelFunc
}

// runOpts tunes startRun.
type runOpts struct {
	start      StartFunc
	inProcess  func(context.Context, serve.BackendSpec) (plugin.Full, error)
	inNames    []string // RunConfig.BackendNames
	noPlugins  bool     // neither StartPlugin nor Backend
	backendEnv []string
	// extra files for Run besides one socketpair per fd task.
	files []*os.File
	// noTasks skips creating the task socketpairs.
	noTasks bool
	env     map[string]string
	// reform rewrites the bootstrap's protojson before Run reads it.
	reform func([]byte) []byte
}

// startRun runs Run on b with a socketpair per task and a notify socket.
func startRun(t *testing.T, b *shimv1.Bootstrap, o runOpts) *inProc {
	t.Helper()
	data, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if o.reform != nil {
		data = o.reform(data)
	}
	p := &inProc{
		t:      t,
		tasks:  map[int32]*pmiTask{},
		notify: listenNotify(t),
		sigs:   make(chan os.Signal, 1),
		log:    newLogBuf(),
		done:   make(chan error, 1),
	}
	files := o.files
	if !o.noTasks {
		for _, task := range b.Tasks {
			if task.FdName == "" {
				continue
			}
			f, c := socketpair(t, task.FdName)
			files = append(files, f)
			p.tasks[task.Rank] = newPMITask(t, task.Rank, c)
		}
	}
	env := map[string]string{"NOTIFY_SOCKET": p.notify.addr, "PATH": os.Getenv("PATH")}
	for k, v := range o.env {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	t.Cleanup(cancel)
	if o.start == nil && (o.inProcess == nil || len(o.inNames) > 0) && !o.noPlugins {
		o.start = pluginStart
	}
	rc := RunConfig{
		Stdin:        bytes.NewReader(data),
		Stderr:       p.log,
		Getenv:       func(k string) string { return env[k] },
		Files:        func() ([]*os.File, error) { return files, nil },
		Signals:      p.sigs,
		StartPlugin:  o.start,
		Backend:      o.inProcess,
		BackendNames: o.inNames,
		backendEnv:   o.backendEnv,
	}
	go func() { p.done <- Run(ctx, rc) }()
	t.Cleanup(func() {
		// A failed test must not leave Run behind for goleak to find.
		cancel()
		select {
		case <-p.done:
		case <-time.After(waitTimeout):
		}
	})
	return p
}

// ready waits for READY=1.
func (p *inProc) ready() {
	p.t.Helper()
	if msg := p.notify.next(p.t); !strings.HasPrefix(msg, "READY=1\n") {
		p.t.Fatalf("first sd_notify message %q, want READY=1", msg)
	}
}

// wait returns Run's error.
func (p *inProc) wait() error {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err
	case <-time.After(waitTimeout):
		p.t.Fatalf("Run did not return; log:\n%s", p.log.String())
		return nil
	}
}

// waitExit checks Run's exit status and that the error says want.
func (p *inProc) waitExit(code int, want string) error {
	p.t.Helper()
	err := p.wait()
	if got := serve.ExitCode(err); got != code {
		p.t.Fatalf("exit %d (%v), want %d; log:\n%s", got, err, code, p.log.String())
	}
	if want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
		p.t.Fatalf("error %v does not say %q", err, want)
	}
	return err
}
