package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

// task is the test's end of one task connection.
type task struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (k *task) send(line string) {
	k.t.Helper()
	if _, err := k.c.Write([]byte(line + "\n")); err != nil {
		k.t.Fatalf("send %q: %v", line, err)
	}
}

func (k *task) expect(prefix string) string {
	k.t.Helper()
	_ = k.c.SetReadDeadline(time.Now().Add(waitTimeout))
	line, err := k.r.ReadString('\n')
	if err != nil {
		k.t.Fatalf("waiting for %q: %v", prefix, err)
	}
	if !strings.HasPrefix(line, prefix) {
		k.t.Fatalf("got %q, want %q...", line, prefix)
	}
	return line
}

func (k *task) hello() {
	k.t.Helper()
	k.send("cmd=init pmi_version=1 pmi_subversion=1")
	k.expect("cmd=response_to_init rc=0")
	k.send("cmd=barrier_in")
	k.expect("cmd=barrier_out rc=0")
	k.send("cmd=finalize")
	k.expect("cmd=finalize_ack rc=0")
}

// job is one Start of an n-rank job on one node with every task on its
// own connection.
type job struct {
	srv   *Server
	tasks []*task
}

// testConfig is the config of a one-node job of n ranks, each on an fd
// of its own, as edit changes its bootstrap.
func testConfig(t *testing.T, n int, edit func(b *shimv1.Bootstrap)) *Config {
	t.Helper()
	b := &shimv1.Bootstrap{
		Version: 1,
		Job:     &shimv1.Job{Nspace: "job-1", Size: int32(n), Nodes: []*shimv1.Node{{Id: 0, Name: "n0"}}},
		Backend: &shimv1.BackendConfig{Name: "fake"},
	}
	for i := range int32(n) {
		b.Job.Nodes[0].Ranks = append(b.Job.Nodes[0].Ranks, i)
		b.Tasks = append(b.Tasks, &shimv1.Task{Rank: i, FdName: fmt.Sprintf("rank%d", i)})
	}
	if edit != nil {
		edit(b)
	}
	c, err := NewConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startJob(t *testing.T, n int, be *bridge.Backend, edit func(b *shimv1.Bootstrap)) *job {
	t.Helper()
	c := testConfig(t, n, edit)
	j := &job{}
	conns := map[int32]net.Conn{}
	for _, tk := range c.Tasks {
		if tk.FDName == "" {
			continue
		}
		srv, cli := connected(t)
		conns[tk.Rank] = srv
		j.tasks = append(j.tasks, &task{t: t, c: cli, r: bufio.NewReader(cli)})
	}
	var err error
	j.srv, err = Start(context.Background(), c, Options{Backend: be, Conns: conns, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// wait is Server.Wait within waitTimeout.
func (j *job) wait(t *testing.T, ctx context.Context) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- j.srv.Wait(ctx) }()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("Wait did not return")
		return nil
	}
}

// A job on one node that needs nothing from elsewhere never asks for its
// backend.
func TestServeHello(t *testing.T) {
	var asked atomic.Bool
	be := bridge.NewBackend("gopmi-rm-fake", func() { asked.Store(true) })
	j := startJob(t, 3, be, nil)
	for _, k := range j.tasks {
		k.send("cmd=init pmi_version=1 pmi_subversion=1")
	}
	for _, k := range j.tasks {
		k.expect("cmd=response_to_init")
		k.send("cmd=barrier_in")
	}
	for _, k := range j.tasks {
		k.expect("cmd=barrier_out rc=0")
		k.send("cmd=finalize")
		k.expect("cmd=finalize_ack rc=0")
		k.c.Close()
	}
	if err := j.wait(t, context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if j.srv.Reason() != "job finished" {
		t.Errorf("reason %q", j.srv.Reason())
	}
	if asked.Load() {
		t.Error("a hello asked for the backend")
	}
}

// Wait's error tells how the job ended, as the shim's exit status does.
func TestServeEndings(t *testing.T) {
	tests := []struct {
		name string
		run  func(j *job, cancel context.CancelCauseFunc)
		code int
		msg  string
	}{
		{"task leaves early", func(j *job, _ context.CancelCauseFunc) {
			j.tasks[0].send("cmd=init pmi_version=1 pmi_subversion=1")
			j.tasks[0].expect("cmd=response_to_init")
			j.tasks[0].c.Close()
		}, ExitJobFailed, "rank 0 of job job-1 closed its PMI connection before finalize"},
		{"abort", func(j *job, _ context.CancelCauseFunc) {
			j.tasks[1].send("cmd=init pmi_version=1 pmi_subversion=1")
			j.tasks[1].expect("cmd=response_to_init")
			j.tasks[1].send("cmd=abort exitcode=7")
			// The process manager kills the tasks.
			j.tasks[0].c.Close()
			j.tasks[1].c.Close()
		}, ExitAborted, "status 7"},
		{"host stops", func(j *job, cancel context.CancelCauseFunc) {
			cancel(errors.New("received terminated"))
		}, ExitJobFailed, "stopped: received terminated"},
		{"backend dies", func(j *job, _ context.CancelCauseFunc) {
			j.srv.Fail(fmt.Errorf("backend gopmi-rm-fake exited: %w", plugin.ErrBackendGone))
		}, ExitBackend, "gopmi-rm-fake exited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &plugintest.Fake{AbortF: func(context.Context, *plugin.AbortRequest) error { return nil }}
			j := startJob(t, 2, bridge.ReadyBackend(fake, fake.DefaultInfo(), nil), nil)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			tt.run(j, cancel)
			err := j.wait(t, ctx)
			if got := ExitCode(err); got != tt.code || !strings.Contains(fmt.Sprint(err), tt.msg) {
				t.Fatalf("Wait: %v (exit %d), want exit %d and %q", err, got, tt.code, tt.msg)
			}
		})
	}
}

// After an abort the task connections stay open until the tasks close
// them (the process manager kills them): MPICH's PMI-1 client waits on its
// connection after abort, and an EOF makes its MPI_Abort return.
func TestAbortKeepsConnectionsUntilKilled(t *testing.T) {
	fake := &plugintest.Fake{AbortF: func(context.Context, *plugin.AbortRequest) error { return nil }}
	j := startJob(t, 2, bridge.ReadyBackend(fake, fake.DefaultInfo(), nil), nil)
	for _, k := range j.tasks {
		k.send("cmd=init pmi_version=1 pmi_subversion=1")
		k.expect("cmd=response_to_init")
	}
	j.tasks[1].send("cmd=abort exitcode=7")
	// The other task is still answered (with an error: the job ended).
	j.tasks[0].send("cmd=barrier_in")
	j.tasks[0].expect("cmd=barrier_out rc=-1")
	// The aborting task's connection is open: a read times out, no EOF.
	_ = j.tasks[1].c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := j.tasks[1].r.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the aborting task's connection: %v, want it open", err)
	}
	j.tasks[0].c.Close()
	j.tasks[1].c.Close()
	if err := j.wait(t, context.Background()); ExitCode(err) != ExitAborted {
		t.Fatalf("Wait: %v", err)
	}
}

// A task that connects and says nothing fails the job within the connect
// time-out, naming it.
func TestServeConnectTimeout(t *testing.T) {
	j := startJob(t, 2, bridge.NewBackend("gopmi-rm-fake", nil), func(b *shimv1.Bootstrap) {
		b.Timeouts = &shimv1.Timeouts{Connect: durationOf(200 * time.Millisecond)}
	})
	j.tasks[0].send("cmd=init pmi_version=1 pmi_subversion=1")
	j.tasks[0].expect("cmd=response_to_init rc=0")
	err := j.wait(t, context.Background())
	if ExitCode(err) != ExitJobFailed || !strings.Contains(err.Error(), "connect: rank 1 sent nothing within 200ms") {
		t.Fatalf("Wait: %v", err)
	}
}

// A request that needs the backend waits for it, and the handle brings it
// up on demand.
func TestServeBackendOnDemand(t *testing.T) {
	fake := &plugintest.Fake{
		PublishF: func(context.Context, *plugin.PublishRequest) error { return nil },
	}
	var be *bridge.Backend
	be = bridge.NewBackend("gopmi-rm-fake", func() {
		go be.Up(fake, fake.DefaultInfo(), nil)
	})
	j := startJob(t, 1, be, nil)
	k := j.tasks[0]
	k.send("cmd=init pmi_version=1 pmi_subversion=1")
	k.expect("cmd=response_to_init")
	k.send("cmd=publish_name service=svc port=p1")
	k.expect("cmd=publish_result rc=0")
	k.send("cmd=finalize")
	k.expect("cmd=finalize_ack rc=0")
	k.c.Close()
	if err := j.wait(t, context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

// Connections for ranks the job does not have here are closed, not
// served.
func TestServeStrayConnection(t *testing.T) {
	c, err := NewConfig(&shimv1.Bootstrap{
		Version: 1,
		Job:     &shimv1.Job{Nspace: "job-1", Size: 1, Nodes: []*shimv1.Node{{Id: 0, Ranks: []int32{0}}}},
		Tasks:   []*shimv1.Task{{Rank: 0, FdName: "rank0"}},
		Backend: &shimv1.BackendConfig{Name: "fake"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv0, cli0 := connected(t)
	stray, strayCli := connected(t)
	s, err := Start(context.Background(), c, Options{
		Backend: bridge.NewBackend("gopmi-rm-fake", nil),
		Conns:   map[int32]net.Conn{0: srv0, 5: stray},
		Logger:  zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = strayCli.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := strayCli.Read(make([]byte, 1)); err == nil {
		t.Error("the stray connection is still open")
	}
	k := &task{t: t, c: cli0, r: bufio.NewReader(cli0)}
	k.hello()
	cli0.Close()
	if err := (&job{srv: s}).wait(t, context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
