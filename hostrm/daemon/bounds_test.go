package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
)

// serveBounded serves s on a unix socket, bounding this test's own user
// as any user but root, until the test ends; it returns the socket.
func serveBounded(t *testing.T, s *Server) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "gopmi-bounds-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeLocal(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeLocal: %v", err)
		}
	})
	return l.Addr().String()
}

func boundedServer(t *testing.T, o Options) (*Server, string, func() string) {
	t.Helper()
	o.unbounded = func(uint32) bool { return false }
	s, log := newTestServer(t, o)
	return s, serveBounded(t, s), log.String
}

// One user's connections past maxConnsPerUser are refused, told why, and
// logged with her uid; those she holds keep working.
func TestLocalConnectionsBounded(t *testing.T) {
	_, sock, log := boundedServer(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var held []*link.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxConnsPerUser {
		c, err := link.Dial(ctx, sock)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Each is counted once the daemon accepted it: ask on each.
	for _, c := range held {
		if _, err := c.Backend().GetInfo(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := link.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Backend().GetInfo(ctx)
	if want := strconv.Itoa(maxConnsPerUser) + " connections of uid " + strconv.Itoa(os.Geteuid()) + " already"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a connection past the bound: %v; want %q", err, want)
	}
	if _, err := held[0].Backend().GetInfo(ctx); err != nil {
		t.Fatalf("a connection held before: %v", err)
	}
	if !strings.Contains(log(), `"uid":`+strconv.Itoa(os.Geteuid())) || !strings.Contains(log(), "connections of uid") {
		t.Errorf("the refusal is not logged with the uid:\n%s", log())
	}
}

// A call over maxFrame, a value that never ends, closes its connection and
// is logged; the daemon holds nothing of it after, and serves the next.
func TestLocalFrameBounded(t *testing.T) {
	s, sock, log := boundedServer(t, Options{})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		_, _ = c.Write([]byte(`{"id":1,"call":"query","req":{"queries":[{"keys":["`))
		for range 2 * maxFrame >> 20 {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the daemon answered a call over its frame bound")
	}
	waitUntil(t, func() bool { return s.budget.bytes.sum() == 0 })
	if !strings.Contains(log(), "a connection closed: link: a frame over the server's limit") {
		t.Errorf("not logged:\n%s", log())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc, err := link.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if _, err := lc.Backend().GetInfo(ctx); err != nil {
		t.Fatal(err)
	}
}

// A query is bounded in keys.
func TestQueryBounded(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	keys := make([]string, maxQueryKeys+1)
	for i := range keys {
		keys[i] = plugin.QueryNames
	}
	_, err := s.Query(a, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: keys}}})
	if !errors.Is(err, plugin.ErrInvalidArgument) || !strings.Contains(err.Error(), "answers 64 at most") {
		t.Fatalf("a query of %d keys: %v", len(keys), err)
	}
	if _, err := s.Query(a, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: keys[:maxQueryKeys]}}}); err != nil {
		t.Fatal(err)
	}
}

// One user's names are bounded in number and in bytes, each with its own
// message; another user's are not touched by hers.
func TestNameQuotas(t *testing.T) {
	s, _ := newTestServer(t, Options{MaxNames: 5, MaxNameBytes: 4 << 10})
	a, closeA := as(1000)
	defer closeA()
	register(t, s, a, "run-a", "job.a")
	for i := range 5 {
		if err := publish(a, s, "job.a", "n"+strconv.Itoa(i), "v", plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(a, s, "job.a", "n5", "v", plugin.PersistDefault); !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "5 names are published for this user") {
		t.Fatalf("a sixth name: %v", err)
	}
	b, closeB := as(1001)
	defer closeB()
	register(t, s, b, "run-b", "job.b")
	if err := publish(b, s, "job.b", "big", strings.Repeat("v", 3<<10), plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	err := publish(b, s, "job.b", "bigger", strings.Repeat("v", 2<<10), plugin.PersistDefault)
	if !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "of the 4096 bytes one user may") {
		t.Fatalf("past the bytes: %v", err)
	}
	if err := publish(b, s, "job.b", "small", "v", plugin.PersistDefault); err != nil {
		t.Fatalf("within the bytes: %v", err)
	}
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// One user's registrations are bounded in number and bytes, and each
// job's log in entries and bytes; a job that ended makes room.
func TestJobRegistryBounded(t *testing.T) {
	s, _ := newTestServer(t, Options{unbounded: func(uint32) bool { return false }})
	a, closeA := as(1000)
	defer closeA()
	reg := func(ns, cmd string, nodes []plugin.Node) error {
		b, _ := json.Marshal(RunConfig{Run: "run-a", PID: 42, Cmd: cmd})
		job := jobOf(ns, 1)
		if nodes != nil {
			job = plugin.Job{Nspace: ns, Size: int32(len(nodes[0].Ranks)), Nodes: nodes}
		}
		_, err := s.Configure(a, &plugin.ConfigureRequest{Job: job, Config: b})
		return err
	}
	for i := range maxJobsPerUser {
		if err := reg("job."+strconv.Itoa(i), strings.Repeat("c", 10<<10), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg("one.more", "./app", nil); !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "256 jobs of") {
		t.Fatalf("a job past the bound: %v", err)
	}
	resp, err := s.Query(a, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryJobs}}}})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []plugin.JobInfo
	if err := json.Unmarshal([]byte(resp.Results[0].Value), &jobs); err != nil {
		t.Fatal(err)
	}
	if c := jobs[0].Cmd; len(c) > maxCmd+64 || !strings.HasSuffix(c, "(6144 bytes more)") {
		t.Errorf("a command of 10 KiB is kept as %d bytes ending %q", len(c), c[max(0, len(c)-40):])
	}
	// A log is bounded however much its run says.
	for range 100 {
		if err := s.Log(a, &plugin.LogRequest{Proc: plugin.Proc{Nspace: "job.0"}, Data: []plugin.Info{{Key: "line", Value: strings.Repeat("l", 1<<20)}}}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	j := s.jobs[jobKey(1000, "job.0")]
	if j.logBytes > maxLogBytes+maxLogEntry || len(j.log) > maxLog {
		t.Errorf("a job's log holds %d entries of %d bytes", len(j.log), j.logBytes)
	}
	// One ended makes room for another.
	j.info.State, j.info.Ended = "finished", time.Now()
	s.mu.Unlock()
	if err := reg("one.more", "./app", nil); err != nil {
		t.Fatalf("a job once another ended: %v", err)
	}
	// Bytes: a job of a million ranks is more than one user may register.
	b, closeB := as(1001)
	defer closeB()
	ranks := make([]int32, 1<<22)
	for i := range ranks {
		ranks[i] = int32(i)
	}
	cfg, _ := json.Marshal(RunConfig{Run: "run-b", PID: 43})
	_, err = s.Configure(b, &plugin.ConfigureRequest{Job: plugin.Job{Nspace: "huge", Size: int32(len(ranks)), Nodes: []plugin.Node{{ID: 0, Name: "n", Ranks: ranks}}}, Config: cfg})
	if !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "bytes one user may register") {
		t.Fatalf("a registration of 16 MiB: %v", err)
	}
}
