package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// as is a connection of uid: the context its calls get, and what closes
// it.
func as(uid uint32) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{peer: peer{uid: uid, pid: 1}, known: true}
	ctx = context.WithValue(ctx, connKey{}, c)
	c.ctx = ctx
	return ctx, cancel
}

func newTestServer(t *testing.T, o Options) (*Server, *plugintest.Buffer) {
	t.Helper()
	log := &plugintest.Buffer{}
	o.Logger = zerolog.New(log)
	if o.checkRun == nil {
		o.checkRun = func(string, peer) error { return nil } // fake peers
	}
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, log
}

func jobOf(ns string, size int32) plugin.Job {
	j := plugin.Job{Nspace: ns, Size: size, Nodes: []plugin.Node{{ID: 0, Name: "vm"}}}
	for r := int32(0); r < size; r++ {
		j.Nodes[0].Ranks = append(j.Nodes[0].Ranks, r)
	}
	return j
}

func register(t *testing.T, s *Server, ctx context.Context, run, ns string) {
	t.Helper()
	b, _ := json.Marshal(RunConfig{Run: run, PID: 42, Cmd: "./app"})
	if _, err := s.Configure(ctx, &plugin.ConfigureRequest{Job: jobOf(ns, 2), Config: b}); err != nil {
		t.Fatal(err)
	}
}

func publish(ctx context.Context, s *Server, ns, key, value string, p plugin.Persistence) error {
	return s.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: ns}, Data: []plugin.Info{{Key: key, Value: value}}, Persistence: p})
}

func lookup(ctx context.Context, s *Server, ns, key string) (string, error) {
	resp, err := s.Lookup(ctx, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: ns}, Keys: []string{key}})
	if err != nil {
		return "", err
	}
	return resp.Data[0].Value, nil
}

// A name one run publishes, another run of the same user finds; another
// user is refused, and the refusal is logged with who asked; root sees
// everything.
func TestNamesAcrossRunsAndUsers(t *testing.T) {
	s, log := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	b, closeB := as(1000)
	defer closeB()
	other, closeOther := as(1001)
	defer closeOther()
	root, closeRoot := as(0)
	defer closeRoot()
	register(t, s, a, "run-a", "job.a")
	register(t, s, b, "run-b", "job.b")
	register(t, s, other, "run-c", "job.c")
	register(t, s, root, "run-r", "job.r")

	if err := publish(a, s, "job.a", "svc", "port-1", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	if v, err := lookup(b, s, "job.b", "svc"); err != nil || v != "port-1" {
		t.Fatalf("same user, another run: %q, %v", v, err)
	}
	// To another user the name is not there (that it exists is its
	// owner's to tell); the log says who asked.
	if _, err := lookup(other, s, "job.c", "svc"); !errors.Is(err, plugin.ErrNotFound) || strings.Contains(err.Error(), "another user") {
		t.Fatalf("another user's lookup: %v", err)
	}
	if err := s.Unpublish(other, &plugin.UnpublishRequest{Proc: plugin.Proc{Nspace: "job.c"}, Keys: []string{"svc"}}); !errors.Is(err, plugin.ErrNotFound) || strings.Contains(err.Error(), "another user") {
		t.Fatalf("another user's unpublish: %v", err)
	}
	if _, err := lookup(other, s, "job.c", "nothing"); err == nil || !strings.Contains(err.Error(), "not published") {
		t.Fatalf("a name nobody published: %v", err)
	}
	if !strings.Contains(log.String(), `refused: unpublish of svc: \"svc\" is published by another user`) {
		t.Errorf("the refused unpublish is not logged:\n%s", log.String())
	}
	// Each user has a name space of their own: another user's "svc"
	// neither blocks nor stands in for this one's.
	if err := publish(other, s, "job.c", "svc", "mine", plugin.PersistDefault); err != nil {
		t.Fatalf("another user's publish of the same name: %v", err)
	}
	if v, err := lookup(other, s, "job.c", "svc"); err != nil || v != "mine" {
		t.Fatalf("the other user's own svc: %q, %v", v, err)
	}
	if v, err := lookup(b, s, "job.b", "svc"); err != nil || v != "port-1" {
		t.Fatalf("user 1000's svc after user 1001 published theirs: %q, %v", v, err)
	}
	if err := s.Unpublish(other, &plugin.UnpublishRequest{Proc: plugin.Proc{Nspace: "job.c"}, Keys: []string{"svc"}}); err != nil {
		t.Fatal(err)
	}
	// Nobody acts for a job of another user: a job's name is its user's,
	// so another user's "job.a" is not user 1000's.
	if err := publish(other, s, "job.a", "x", "y", plugin.PersistDefault); !errors.Is(err, plugin.ErrNotFound) {
		t.Fatalf("publish for another user's job: %v", err)
	}
	// ... and registering a job of the same name does not take it over.
	register(t, s, other, "run-c", "job.a")
	if err := s.Unpublish(other, &plugin.UnpublishRequest{Proc: plugin.Proc{Nspace: "job.a"}}); err != nil {
		t.Fatalf("unpublish-all of one's own job.a: %v", err)
	}
	if v, err := lookup(b, s, "job.b", "svc"); err != nil || v != "port-1" {
		t.Fatalf("user 1000's name after user 1001 unpublished everything of its own job.a: %q, %v", v, err)
	}
	// A publish retried across a restart of the daemon is not a conflict.
	if err := publish(a, s, "job.a", "svc", "port-1", plugin.PersistDefault); err != nil {
		t.Fatalf("the same publish again: %v", err)
	}
	// Root administers (ps, query, log) but resolves only its own names:
	// no user can stand in for a service root looks up.
	if _, err := lookup(root, s, "job.r", "svc"); !errors.Is(err, plugin.ErrPermission) {
		t.Fatalf("root's lookup of user 1000's name: %v", err)
	}
	if !strings.Contains(log.String(), `"uid":1001`) || !strings.Contains(log.String(), "refused") {
		t.Errorf("refusals are not logged with the caller: %s", log.String())
	}
	// ps: each user sees their own jobs, root all.
	for _, c := range []struct {
		ctx  context.Context
		want []string
	}{{a, []string{"job.a", "job.b"}}, {other, []string{"job.c", "job.a"}}, {root, []string{"job.a", "job.b", "job.c", "job.r", "job.a"}}} {
		resp, err := s.Query(c.ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{"namespaces"}}}})
		if err != nil || resp.Results[0].Value != strings.Join(c.want, ",") {
			t.Errorf("namespaces: %+v, %v, want %v", resp, err, c.want)
		}
	}
	// The owner unpublishes; the name is gone for everyone.
	if err := s.Unpublish(b, &plugin.UnpublishRequest{Proc: plugin.Proc{Nspace: "job.b"}, Keys: []string{"svc"}}); err != nil {
		t.Fatalf("the same user's unpublish: %v", err)
	}
	if _, err := lookup(a, s, "job.a", "svc"); !errors.Is(err, plugin.ErrNotFound) {
		t.Fatalf("after unpublish: %v", err)
	}
}

// A lookup with Wait returns when the name is published, and fails at
// its time-out naming the key.
func TestLookupWaits(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	register(t, s, a, "run-a", "job.a")
	got := make(chan error, 1)
	go func() {
		_, err := s.Lookup(a, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: "job.a"}, Keys: []string{"late"}, Wait: true, Timeout: 10 * time.Second})
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := publish(a, s, "job.a", "late", "v", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting lookup: %v", err)
	}
	_, err := s.Lookup(a, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: "job.a"}, Keys: []string{"never"}, Wait: true, Timeout: 50 * time.Millisecond})
	if !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), "never") {
		t.Fatalf("lookup of a name never published: %v", err)
	}
}

// A run that ends takes its run-long and job-long names with it; a name
// published to last until unpublished stays. A run whose connection
// closed keeps them for the grace, then loses them.
func TestNamesEndWithTheirRun(t *testing.T) {
	s, _ := newTestServer(t, Options{Grace: 100 * time.Millisecond})
	a, closeA := as(1000)
	register(t, s, a, "run-a", "job.a")
	b, closeB := as(1000)
	defer closeB()
	register(t, s, b, "run-b", "job.b")
	for key, p := range map[string]plugin.Persistence{"run": plugin.PersistDefault, "keep": plugin.PersistIndefinite} {
		if err := publish(b, s, "job.b", key, "v", p); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon does not hear of a job's end before its run's.
	if err := publish(b, s, "job.b", "job", "v", plugin.PersistApp); !errors.Is(err, plugin.ErrNotSupported) {
		t.Fatalf("a job-long name: %v", err)
	}
	if err := s.NotifyEvent(b, &plugin.EventRequest{Code: EventRunEnded, Source: plugin.Proc{Nspace: "job.b"}}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]error{"run": plugin.ErrNotFound, "keep": nil} {
		if _, err := lookup(a, s, "job.a", key); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Errorf("%s after its run ended: %v, want %v", key, err, want)
		}
	}
	// An ended job is no longer an active namespace (what pps lists), but
	// gopmi ps -a still shows it.
	resp, err := s.Query(a, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryNamespaces, plugin.QueryJobs}}}})
	if err != nil || len(resp.Results) != 2 || resp.Results[0].Value != "job.a" || !strings.Contains(resp.Results[1].Value, `"nspace":"job.b"`) {
		t.Errorf("after job.b's run ended: %+v, %v; want namespaces job.a, and job.b in %s", resp, err, plugin.QueryJobs)
	}
	// Connection lost: kept for the grace, then gone.
	if err := publish(a, s, "job.a", "a-run", "v", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	c, closeC := as(1000)
	defer closeC()
	register(t, s, c, "run-c", "job.c")
	closeA()
	time.Sleep(20 * time.Millisecond)
	if _, err := lookup(c, s, "job.c", "a-run"); err != nil {
		t.Fatalf("within the grace: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := lookup(c, s, "job.c", "a-run")
		if errors.Is(err, plugin.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the grace: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err = s.Query(c, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{"job-status"}, Qualifiers: []plugin.Info{{Key: "nspace", Value: "job.a"}}}}})
	if err != nil || !strings.HasPrefix(resp.Results[0].Value, "lost") {
		t.Fatalf("job-status of the lost run: %+v, %v", resp, err)
	}
}

// Published names outlive the daemon: a new daemon on the same state file
// has them, and the run that published them, coming back within the
// grace, goes on; a run that does not come back loses its run-long names.
func TestNamesSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "names.json")
	s1, _ := newTestServer(t, Options{StateFile: file})
	a, closeA := as(1000)
	register(t, s1, a, "run-a", "job.a")
	b, closeB := as(1000)
	register(t, s1, b, "run-b", "job.b")
	if err := publish(a, s1, "job.a", "svc", "port-1", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	if err := publish(b, s1, "job.b", "gone", "v", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	closeA()
	closeB()

	s2, _ := newTestServer(t, Options{StateFile: file, Grace: 200 * time.Millisecond})
	a2, closeA2 := as(1000)
	defer closeA2()
	register(t, s2, a2, "run-a", "job.a") // run-a comes back; run-b does not
	c, closeC := as(1000)
	defer closeC()
	register(t, s2, c, "run-c", "job.c")
	if v, err := lookup(c, s2, "job.c", "svc"); err != nil || v != "port-1" {
		t.Fatalf("after the restart: %q, %v", v, err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := lookup(c, s2, "job.c", "gone"); !errors.Is(err, plugin.ErrNotFound) {
		t.Fatalf("the name of a run that never came back: %v", err)
	}
	if _, err := lookup(c, s2, "job.c", "svc"); err != nil {
		t.Fatalf("the name of the run that came back: %v", err)
	}
	// Another user cannot take a run over.
	o, closeO := as(1001)
	defer closeO()
	b2, _ := json.Marshal(RunConfig{Run: "run-a"})
	if _, err := s2.Configure(o, &plugin.ConfigureRequest{Job: jobOf("job.x", 1), Config: b2}); !errors.Is(err, plugin.ErrPermission) {
		t.Fatalf("another user registering run-a: %v", err)
	}
}

// serveTest serves s on a unix socket as gopmi daemon does; it returns
// the socket's path.
func serveTest(t testing.TB, s *Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = link.ServeConns(ctx, l, s, ConnContext)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

// The client registers in the background, publishes through the daemon,
// and when the daemon restarts it connects and registers again: a lookup
// made meanwhile waits for the new daemon instead of failing.
func TestClientFollowsRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "names.json")
	path := filepath.Join(t.TempDir(), "d.sock")
	serve := func(s *Server) (stop func()) {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = link.ServeConns(ctx, l, s, ConnContext) }()
		return func() { cancel(); <-done }
	}
	s1, _ := newTestServer(t, Options{StateFile: file})
	stop1 := serve(s1)
	c := Dial(path, RunName(), zerolog.Nop())
	defer c.Close()
	c.Register(jobOf("job.x", 1), RunConfig{PID: 1})
	ctx := context.Background()
	if err := c.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: "job.x"}, Data: []plugin.Info{{Key: "k", Value: "v"}}}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.Lookup(ctx, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: "job.x"}, Keys: []string{"after"}, Wait: true, Timeout: 20 * time.Second})
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	// The daemon goes; a new one takes the same socket and state.
	s1.Close()
	stop1()
	s2, _ := newTestServer(t, Options{StateFile: file})
	stop2 := serve(s2)
	defer stop2()
	rctx, rcancel := as(0)
	defer rcancel()
	register(t, s2, rctx, "run-root", "job.root")
	// The client comes back and registers job.x again before its calls go
	// on; then the name it waits for appears.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := s2.Query(rctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{"namespaces"}}}})
		if err == nil && strings.Contains(resp.Results[0].Value, "job.x") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client did not register again with the new daemon")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := publish(rctx, s2, "job.root", "after", "there", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("lookup across the restart: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lookup across the restart never returned")
	}
	if v, err := c.Lookup(ctx, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: "job.x"}, Keys: []string{"k"}}); err != nil || v.Data[0].Value != "v" {
		t.Fatalf("the name published before the restart: %+v, %v", v, err)
	}
}

// gopmi ps on a daemon serving 1,000 processes, through the socket as the
// tool asks (the bound: 100 ms).
func BenchmarkPS1000(b *testing.B) {
	s, err := NewServer(Options{Logger: zerolog.Nop(), checkRun: func(string, peer) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 10; i++ {
		ctx, cancel := as(1000)
		defer cancel()
		cfg, _ := json.Marshal(RunConfig{Run: fmt.Sprintf("run-%d", i), PID: 100 + i, Cmd: "./app", Pids: make([]int, 100)})
		if _, err := s.Configure(ctx, &plugin.ConfigureRequest{Job: jobOf(fmt.Sprintf("job.%d", i), 100), Config: cfg}); err != nil {
			b.Fatal(err)
		}
	}
	path := serveTest(b, s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := link.Dial(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := c.Backend().Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryJobs}}}})
		if err != nil || !strings.Contains(resp.Results[0].Value, "job.9") {
			b.Fatalf("ps: %v", err)
		}
		c.Close()
		cancel()
	}
}

// A job's log holds the daemon's notes and what its run sent; its user
// (and root) reads it, nobody else.
func TestJobLog(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	register(t, s, a, "run-a", "job.a")
	if err := s.Log(a, &plugin.LogRequest{Proc: plugin.Proc{Nspace: "job.a"}, Data: []plugin.Info{{Key: "status", Value: "gopmi run exited with status 3"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.NotifyEvent(a, &plugin.EventRequest{Code: EventRunEnded, Source: plugin.Proc{Nspace: "job.a"}}); err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context) []plugin.LogEntry {
		resp, err := s.Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryJobLog}}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []plugin.LogEntry
		if err := json.Unmarshal([]byte(resp.Results[0].Value), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var msgs []string
	for _, e := range read(a) {
		msgs = append(msgs, e.From+": "+e.Msg)
	}
	want := []string{"daemon: registered by run run-a (pid 1), 2 ranks on 1 nodes", "run: gopmi run exited with status 3", "daemon: ended: finished"}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	other, closeOther := as(1001)
	defer closeOther()
	if got := read(other); len(got) != 0 {
		t.Fatalf("another user reads %v", got)
	}
	root, closeRoot := as(0)
	defer closeRoot()
	if got := read(root); len(got) != 3 {
		t.Fatalf("root reads %d entries, want 3", len(got))
	}
	if err := s.Log(other, &plugin.LogRequest{Proc: plugin.Proc{Nspace: "job.a"}, Data: []plugin.Info{{Key: "line", Value: "x"}}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Fatalf("another user logging for job.a: %v", err)
	}
}

// A run is registered by its own process only: the pid in its name must
// be the caller's, with that start time.
func TestCallerRun(t *testing.T) {
	self := peer{uid: 0, pid: int32(os.Getpid())}
	if err := callerRun(RunName(), self); err != nil {
		t.Fatalf("this process's own run: %v", err)
	}
	if err := callerRun(RunName(), peer{pid: 1}); err == nil {
		t.Fatal("another process claimed this process's run")
	}
	if err := callerRun("vm:"+strconv.Itoa(os.Getpid())+":1", self); err == nil {
		t.Fatal("a run of this pid with another start time was accepted")
	}
	if err := callerRun("run-a", self); err == nil {
		t.Fatal("a malformed run name was accepted")
	}
}

// A read of another run's job whose run is gone fails at once (the
// daemon cannot reach its universe), never waiting; a connect to a job of
// another user is refused as not found.
func TestDirectModexOfAGoneRun(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	register(t, s, a, "run-a", "job.a")
	b, closeB := as(1000)
	defer closeB()
	cfg, _ := json.Marshal(RunConfig{Run: "run-b", Universe: "unix://" + link.AbstractName("gone")})
	if _, err := s.Configure(b, &plugin.ConfigureRequest{Job: jobOf("job.b", 2), Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Connect(a, &plugin.ConnectRequest{Procs: []plugin.Proc{{Nspace: "job.a"}, {Nspace: "job.b"}}}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	start := time.Now()
	_, err := s.DirectModex(a, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: "job.a"}, Proc: plugin.Proc{Nspace: "job.b", Rank: 1}})
	if !errors.Is(err, plugin.ErrAborted) || time.Since(start) > 5*time.Second {
		t.Fatalf("read of a gone run's job: %v after %s", err, time.Since(start))
	}
	o, closeO := as(1001)
	defer closeO()
	register(t, s, o, "run-o", "job.o")
	if _, err := s.Connect(o, &plugin.ConnectRequest{Procs: []plugin.Proc{{Nspace: "job.o"}, {Nspace: "job.b"}}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Fatalf("another user's connect to job.b: %v", err)
	}
}

// proc-table and local-peers describe a job the caller may see: its ranks,
// their nodes and pids; another user's job is not shown. A job registered
// again (after a restart) keeps the age its run gave it.
func TestQueryProcTableAndPeers(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	other, closeOther := as(1001)
	defer closeOther()
	started := time.Now().Add(-time.Hour).Round(time.Second)
	b, _ := json.Marshal(RunConfig{Run: "run-a", Pids: []int{11, 12, 13}, Started: started})
	job := plugin.Job{Nspace: "job.a", Size: 3, Nodes: []plugin.Node{{ID: 0, Name: "n1", Ranks: []int32{0, 2}}, {ID: 1, Name: "n2", Ranks: []int32{1}}}}
	if _, err := s.Configure(a, &plugin.ConfigureRequest{Job: job, Config: b}); err != nil {
		t.Fatal(err)
	}
	q := func(ctx context.Context, key string, quals ...plugin.Info) (string, error) {
		resp, err := s.Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{key}, Qualifiers: quals}}})
		if err != nil {
			return "", err
		}
		return resp.Results[0].Value, nil
	}
	ns := plugin.Info{Key: "nspace", Value: "job.a"}
	if v, err := q(a, plugin.QueryProcTable, ns); err != nil || v != `[{"rank":0,"node":"n1","pid":11,"state":"unknown"},{"rank":1,"node":"n2","pid":12,"state":"unknown"},{"rank":2,"node":"n1","pid":13,"state":"unknown"}]` {
		t.Errorf("proc-table: %s, %v", v, err)
	}
	if v, err := q(a, plugin.QueryLocalPeers, ns, plugin.Info{Key: "node", Value: "n1"}); err != nil || v != "0,2" {
		t.Errorf("local-peers on n1: %q, %v", v, err)
	}
	if v, err := q(a, plugin.QueryLocalProcTable, plugin.Info{Key: plugin.QualNspace, Value: "job.a"}, plugin.Info{Key: plugin.QualNodeID, Value: "1"}); err != nil || v != `[{"rank":1,"node":"n2","pid":12,"state":"unknown"}]` {
		t.Errorf("local proc table of node 1: %s, %v", v, err)
	}
	if v, err := q(a, plugin.QueryNodeList, ns); err != nil || v != "n1,n2" {
		t.Errorf("node list: %q, %v", v, err)
	}
	if _, err := q(other, plugin.QueryProcTable, ns); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("another user's proc-table: %v", err)
	}
	ps, err := q(a, plugin.QueryJobs)
	if err != nil || !strings.Contains(ps, `"started":"`+started.Format(time.RFC3339)) {
		t.Errorf("the job's start, as its run gave it: %s, %v (want %s)", ps, err, started.Format(time.RFC3339))
	}
}

// A job another user registers under the name of root's job answers none
// of root's questions about its own: the newest job of a name is asked
// only among the caller's jobs when it has one (issue: a forged job made
// root's query of its own job answer "lost").
func TestQueryByNamePrefersOwnJob(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	root, closeRoot := as(0)
	defer closeRoot()
	her, closeHer := as(1000)
	defer closeHer()
	register(t, s, root, "run-r", "job.x")
	time.Sleep(2 * time.Millisecond) // hers is the newer
	register(t, s, her, "run-h", "job.x")
	logAs := func(ctx context.Context, v string) {
		if err := s.Log(ctx, &plugin.LogRequest{Proc: plugin.Proc{Nspace: "job.x"}, Data: []plugin.Info{{Key: "says", Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	logAs(root, "root's own line")
	logAs(her, "a forged line")
	ask := func(ctx context.Context, key string) string {
		resp, err := s.Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{key}, Qualifiers: []plugin.Info{{Key: plugin.QualNspace, Value: "job.x"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Results[0].Value
	}
	if got := ask(root, plugin.QueryJobLog); !strings.Contains(got, "root's own line") || strings.Contains(got, "forged") {
		t.Errorf("root's log of its job.x: %s", got)
	}
	if got := ask(her, plugin.QueryJobLog); strings.Contains(got, "root's") || !strings.Contains(got, "forged") {
		t.Errorf("her log of her job.x: %s", got)
	}
	s.mu.Lock()
	j := s.jobsNamedLocked(peer{uid: 0}, "job.x")
	s.mu.Unlock()
	if len(j) != 1 || j[0].info.UID != 0 {
		t.Errorf("root's job.x resolves to %d jobs, first of uid %d", len(j), j[0].info.UID)
	}
}
