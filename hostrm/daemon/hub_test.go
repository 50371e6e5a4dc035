package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
	"github.com/gopmi/gopmi/plugin/seclink"
)

func writeKey(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "link.key")
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// The link key must be the owner's alone and long enough.
func TestLoadKey(t *testing.T) {
	if k, err := LoadKey(writeKey(t, "  0123456789abcdef0123\n", 0o600)); err != nil || string(k) != "0123456789abcdef0123" {
		t.Fatalf("a good key: %q, %v", k, err)
	}
	for _, c := range []struct {
		name, body string
		mode       os.FileMode
		want       string
	}{
		{"readable by others", "0123456789abcdef0123", 0o644, "may be read or written by others (mode 0644): chmod 600"},
		{"writable by the group", "0123456789abcdef0123", 0o620, "mode 0620"},
		{"too short", "short\n", 0o600, "holds 5 bytes; want 16 at least"},
	} {
		if _, err := LoadKey(writeKey(t, c.body, c.mode)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := LoadKey(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := LoadKey(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing key was taken")
	}
}

// hubHandshake runs the hub's end of a handshake (s's policy, hubKey)
// and a node's (nodeKey, body) over a pipe.
func hubHandshake(t *testing.T, s *Server, hubKey, nodeKey string, body []byte) (got hello, hubErr, nodeErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, hubErr = seclink.Server(ctx, a, s.hubLink([]byte(hubKey), "10.0.0.2", &got))
		if hubErr != nil {
			a.Close()
		}
	}()
	_, nodeErr = seclink.Client(ctx, b, &seclink.Config{Key: []byte(nodeKey), Role: linkNode, PeerRole: linkHub}, body)
	if nodeErr != nil {
		b.Close()
	}
	<-done
	return got, hubErr, nodeErr
}

const testKey = "0123456789abcdef0123456789abcdef"

// The hub takes a node that proves the key and says who it is; a wrong
// key, or a hello that is not JSON, names no node or no known role, is
// refused at both ends with the reason. (The handshake's own cases, an
// impostor hub, replays and a relay in the middle, are plugin/seclink's
// tests.)
func TestHandshake(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	want := hello{Role: roleCall, Node: "n2", UID: 1000, PID: 42, Start: "77"}
	body, _ := json.Marshal(want)
	got, herr, nerr := hubHandshake(t, s, testKey, testKey, body)
	if herr != nil || nerr != nil {
		t.Fatalf("hub: %v, node: %v", herr, nerr)
	}
	if got != want {
		t.Fatalf("the hub heard %+v, want %+v", got, want)
	}

	_, herr, nerr = hubHandshake(t, s, testKey, "another-key-0123456789abcdef", body)
	if !errors.Is(herr, seclink.ErrRefused) || !strings.Contains(herr.Error(), "the node does not hold the key") {
		t.Errorf("hub, wrong key: %v", herr)
	}
	if !errors.Is(nerr, seclink.ErrRefused) || !strings.Contains(nerr.Error(), "refused by the hub: wrong proof") {
		t.Errorf("node, wrong key: %v", nerr)
	}

	for _, bad := range []string{`nope`, `{"role":"call"}`, `{"role":"boss","node":"n2"}`} {
		_, herr, nerr := hubHandshake(t, s, testKey, testKey, []byte(bad))
		if !errors.Is(herr, seclink.ErrRefused) || !errors.Is(nerr, seclink.ErrRefused) || !strings.Contains(nerr.Error(), "refused by the hub: bad hello") {
			t.Errorf("hello %s: hub %v, node %v", bad, herr, nerr)
		}
	}
}

// hubAndRelay is a hub on loopback TCP and a node's relay to it on a unix
// socket, until the test ends.
type hubAndRelay struct {
	hub      *Server
	hubLog   *plugintest.Buffer
	relay    *Upstream
	sock     string
	hubAddr  string
	stopHub  func()
	stopNode func()
}

func startHubAndRelay(t *testing.T, nodeKey string) *hubAndRelay {
	t.Helper()
	// Relayed callers are checked as the hub checks them; this node's
	// are the tests' fakes.
	s, log := newTestServer(t, Options{checkRun: func(run string, p peer) error {
		if p.node == "" {
			return nil
		}
		return callerRun(run, p)
	}})
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(context.Background())
	hdone := make(chan error, 1)
	go func() { hdone <- s.ServeHub(hctx, tl, []byte(testKey)) }()
	h := &hubAndRelay{hub: s, hubLog: log, hubAddr: tl.Addr().String(), sock: filepath.Join(t.TempDir(), "node.sock")}
	h.stopHub = func() {
		hcancel()
		if err := <-hdone; err != nil {
			t.Errorf("hub: %v", err)
		}
	}
	ul, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	h.relay = NewUpstream(h.hubAddr, "n2", []byte(nodeKey), zerolog.New(log).With().Str("side", "relay").Logger())
	nctx, ncancel := context.WithCancel(context.Background())
	ndone := make(chan error, 1)
	go func() { ndone <- h.relay.Serve(nctx, ul) }()
	h.stopNode = func() {
		ncancel()
		if err := <-ndone; err != nil {
			t.Errorf("relay: %v", err)
		}
	}
	t.Cleanup(func() {
		h.stopNode()
		h.stopHub()
	})
	return h
}

// A run on a node that relays to the hub registers there, as itself (the
// relay vouches for its pid and start time), publishes a name another run
// on the hub's node finds, and shows in gopmi ps from either node. The
// hub asks the node whether a run's process lives.
func TestHubRelay(t *testing.T) {
	h := startHubAndRelay(t, testKey)
	eventually(t, "the relay's link to the hub", h.relay.linked.Load)
	ctx, c := dialRelay(t, h)
	be := c.Backend()
	cfg := []byte(`{"run":"` + RunName() + `","cmd":"./app"}`)
	if _, err := be.Configure(ctx, &plugin.ConfigureRequest{Job: jobOf("job.n2", 2), Config: cfg}); err != nil {
		t.Fatalf("register through the relay: %v", err)
	}
	// Another process's run name is refused: the relay vouched for this
	// process's pid.
	other := []byte(`{"run":"vm:1:1"}`)
	if _, err := be.Configure(ctx, &plugin.ConfigureRequest{Job: jobOf("job.x", 1), Config: other}); !errors.Is(err, plugin.ErrPermission) {
		t.Fatalf("registering another process's run through the relay: %v", err)
	}
	if err := be.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: "job.n2"}, Data: []plugin.Info{{Key: "svc", Value: "tcp://n2:1"}}}); err != nil {
		t.Fatal(err)
	}

	uid := uint32(os.Getuid())
	here, closeHere := as(uid)
	defer closeHere()
	register(t, h.hub, here, "run-here", "job.here")
	if v, err := lookup(here, h.hub, "job.here", "svc"); err != nil || v != "tcp://n2:1" {
		t.Fatalf("a name published through the relay, looked up on the hub: %q, %v", v, err)
	}
	resp, err := be.Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryJobs}}}})
	if err != nil || !strings.Contains(resp.Results[0].Value, `"nspace":"job.here"`) || !strings.Contains(resp.Results[0].Value, `"nspace":"job.n2"`) {
		t.Fatalf("gopmi ps through the relay: %v %v", resp, err)
	}

	// The hub asks the node about pids there.
	start := procStart(os.Getpid())
	if !h.hub.runAlive("n2", os.Getpid(), "n2:1:"+start) {
		t.Error("the node says this process is gone")
	}
	if h.hub.runAlive("n2", os.Getpid(), "n2:1:not-its-start") {
		t.Error("the node says a process with another start time lives")
	}
	if !h.hub.runAlive("n3", os.Getpid(), "n3:1:x") {
		t.Error("a node without a link: its runs must be left to the grace")
	}
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialRelay connects to h's relay, for 20 s at most, until the test ends.
func dialRelay(t *testing.T, h *hubAndRelay) (context.Context, *link.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, err := link.Dial(ctx, h.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// A node with the wrong key is refused by the hub, which logs it; the
// node's callers hear why, not a connection that broke.
func TestHubRelayWrongKey(t *testing.T) {
	h := startHubAndRelay(t, "not-the-hub-key-0123456789")
	ctx, c := dialRelay(t, h)
	_, err := c.Backend().Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryJobs}}}})
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "which refuses it") || !strings.Contains(err.Error(), "wrong proof") {
		t.Fatalf("a call through a relay with the wrong key: %v", err)
	}
	// The hub logs the refusal after it answered it.
	eventually(t, "the hub's line about the refusal", func() bool { return strings.Contains(h.hubLog.String(), "hub: handshake refused") })
	if h.relay.linked.Load() {
		t.Errorf("a relay with the wrong key linked:\n%s", h.hubLog.String())
	}
}

// privateUniverse serves a universe of this process on a private socket
// until the test ends, and returns its address.
func privateUniverse(t *testing.T) string {
	t.Helper()
	l, addr, err := link.ListenPrivate("universe", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- link.Serve(ctx, l, nodeService{}) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return addr
}

// The daemon reads a run's keys only from a universe the run's own
// process serves: a run that names another's universe (another user's,
// to read their keys through the root daemon) is refused.
func TestDialUniverseChecksOwner(t *testing.T) {
	addr := privateUniverse(t)
	ctx := context.Background()
	uid, pid := uint32(os.Getuid()), os.Getpid()
	c, err := dialUniverse(ctx, addr, uid, pid)
	if err != nil {
		t.Fatalf("the run's own universe: %v", err)
	}
	c.Close()
	for _, bad := range []struct {
		addr string
		uid  uint32
		pid  int
		want string
	}{
		{addr, uid, pid + 1, "not by the run that named it"},
		{addr, uid + 1, pid, "not by the run that named it"},
		{"unix:///run/gopmi/gopmi.sock", uid, pid, "not a run's private socket"},
		{"tcp://127.0.0.1:1", uid, pid, "not a run's private socket"},
	} {
		if c, err := dialUniverse(ctx, bad.addr, bad.uid, bad.pid); !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), bad.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s as uid %d pid %d: %v, want %q", bad.addr, bad.uid, bad.pid, err, bad.want)
		}
	}
}

// A job's names are its run's: another run of the same user, on another
// connection, cannot publish, look up or log for it.
func TestActsForOwnRunOnly(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	a, closeA := as(1000)
	defer closeA()
	b, closeB := as(1000)
	defer closeB()
	register(t, s, a, "run-a", "job.a")
	register(t, s, b, "run-b", "job.b")
	if err := publish(b, s, "job.a", "svc", "x", plugin.PersistDefault); !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "belongs to run run-a") {
		t.Errorf("publish for another run's job: %v", err)
	}
	if _, err := lookup(b, s, "job.a", "svc"); !errors.Is(err, plugin.ErrPermission) {
		t.Errorf("lookup as another run's job: %v", err)
	}
	if err := s.Log(b, &plugin.LogRequest{Proc: plugin.Proc{Nspace: "job.a"}, Data: []plugin.Info{{Key: "line", Value: "x"}}}); !errors.Is(err, plugin.ErrPermission) {
		t.Errorf("log for another run's job: %v", err)
	}
	if err := s.NotifyEvent(b, &plugin.EventRequest{Code: EventRunEnded, Source: plugin.Proc{Nspace: "job.a"}}); !errors.Is(err, plugin.ErrPermission) {
		t.Errorf("another run ends job.a's run: %v", err)
	}
	if err := publish(a, s, "job.a", "svc", "x", plugin.PersistDefault); err != nil {
		t.Errorf("the run's own publish: %v", err)
	}
}

// A run that names a universe it does not serve gets no keys through the
// daemon: the read is refused and logged.
func TestDirectModexForgedUniverse(t *testing.T) {
	s, log := newTestServer(t, Options{})
	addr := privateUniverse(t)
	// The caller is pid 1 (see as): this process serves the universe.
	a, closeA := as(uint32(os.Getuid()))
	defer closeA()
	b, _ := json.Marshal(RunConfig{Run: "run-a", Universe: addr})
	if _, err := s.Configure(a, &plugin.ConfigureRequest{Job: jobOf("job.a", 2), Config: b}); err != nil {
		t.Fatal(err)
	}
	_, err := s.DirectModex(a, &plugin.ModexRequest{Proc: plugin.Proc{Nspace: "job.a", Rank: 0}})
	if !errors.Is(err, plugin.ErrPermission) || !strings.Contains(err.Error(), "not by the run that named it") || !strings.Contains(log.String(), "refused: direct modex") {
		t.Fatalf("a read through a universe the run does not serve: %v\n%s", err, log.String())
	}
}

// Refusals of lookups made at once do not race (the refusal log's map is
// the server's, under its lock).
func TestLookupRefusalsInParallel(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	owner, closeOwner := as(1000)
	defer closeOwner()
	register(t, s, owner, "run-o", "job.o")
	if err := publish(owner, s, "job.o", "svc", "x", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	other, closeOther := as(1001)
	defer closeOther()
	register(t, s, other, "run-x", "job.x")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				_, err := s.Lookup(other, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: "job.x"}, Keys: []string{"svc", fmt.Sprintf("k%d-%d", g, i)}})
				if !errors.Is(err, plugin.ErrNotFound) {
					t.Errorf("lookup of another user's name: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// After the hub restarts, a run relayed from another node that comes
// back is that node's again: its liveness and keys are asked of that
// node, not looked for on the hub's.
func TestRestoredRunLearnsItsNode(t *testing.T) {
	file := filepath.Join(t.TempDir(), "names.json")
	s1, _ := newTestServer(t, Options{StateFile: file})
	relayed := func(s *Server) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		return withPeer(ctx, peer{uid: 1000, pid: 42, node: "n2", start: "7"}), cancel
	}
	ctx, cancel := relayed(s1)
	register(t, s1, ctx, "n2:42:7", "job.a")
	if err := publish(ctx, s1, "job.a", "svc", "x", plugin.PersistDefault); err != nil {
		t.Fatal(err)
	}
	cancel()
	s1.Close()
	s2, _ := newTestServer(t, Options{StateFile: file})
	ctx, cancel = relayed(s2)
	defer cancel()
	register(t, s2, ctx, "n2:42:7", "job.a")
	s2.mu.Lock()
	node := s2.runs["n2:42:7"].node
	s2.mu.Unlock()
	if node != "n2" {
		t.Fatalf("the run kept from the state file and registered again from n2 is on node %q", node)
	}
}

// A host floods the hub with handshakes: it holds its own few places, the
// others keep theirs. A second host cannot take a linked node's name.
func TestHubBounds(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	for range maxHandshakesPerHost {
		if !s.shaking.hold("10.0.0.9", maxHandshakesPerHost, maxHandshakes) {
			t.Fatal("a host's first handshakes were refused")
		}
	}
	if s.shaking.hold("10.0.0.9", maxHandshakesPerHost, maxHandshakes) {
		t.Error("a host took more than its handshakes")
	}
	if !s.shaking.hold("10.0.0.1", maxHandshakesPerHost, maxHandshakes) {
		t.Error("another host was refused while one floods")
	}
	s.shaking.release("10.0.0.9")
	if !s.shaking.hold("10.0.0.9", maxHandshakesPerHost, maxHandshakes) {
		t.Error("a handshake place was not given back")
	}

	// n2 linked from 10.0.0.2, its daemon answering on the link.
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		link.ServeConn(ctx, b, nodeService{}, nil)
	}()
	lc := link.NewConn(a)
	s.addNode("n2", "10.0.0.2:4000", lc)
	if err := s.admitNode(hello{Role: roleCall, Node: "n2"}, "10.0.0.3"); err == nil || !strings.Contains(err.Error(), "duplicate node: n2 is linked from host 10.0.0.2") {
		t.Errorf("calls from a second host named n2: %v", err)
	}
	if err := s.admitNode(hello{Role: roleNode, Node: "n2"}, "10.0.0.3"); err == nil {
		t.Error("a second host's link as n2 was admitted")
	}
	if err := s.admitNode(hello{Role: roleCall, Node: "n2"}, "10.0.0.2"); err != nil {
		t.Errorf("n2's own calls: %v", err)
	}
	// A second daemon on n2's host, while the first still answers.
	if err := s.admitNode(hello{Role: roleNode, Node: "n2"}, "10.0.0.2"); err == nil || !strings.Contains(err.Error(), "still answers") {
		t.Errorf("a second link of n2 from its host while the first answers: %v", err)
	}
	// The first one is gone (its daemon restarted): the new link is in.
	cancel()
	<-served
	lc.Close()
	if err := s.admitNode(hello{Role: roleNode, Node: "n2"}, "10.0.0.2"); err != nil {
		t.Errorf("n2 again after its old link closed: %v", err)
	}
}

// A daemon that closed dials no run's universe: a job's query is answered
// from its registry, and no link outlives Close (one that did would keep
// a goroutine Close waits for).
func TestClosedDaemonDialsNoUniverse(t *testing.T) {
	addr := privateUniverse(t)
	s, _ := newTestServer(t, Options{})
	ctx, cancel := as(uint32(os.Getuid()))
	defer cancel()
	p, _ := peerOf(ctx)
	p.pid = int32(os.Getpid())
	ctx = withPeer(ctx, p)
	b, _ := json.Marshal(RunConfig{Run: "run-u", Universe: addr})
	if _, err := s.Configure(ctx, &plugin.ConfigureRequest{Job: jobOf("job.u", 2), Config: b}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	resp, err := s.Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{plugin.QueryJobStatus}, Qualifiers: []plugin.Info{{Key: plugin.QualNspace, Value: "job.u"}}}}})
	if err != nil || len(resp.Results) != 1 {
		t.Fatalf("query after Close: %+v, %v", resp, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs["run-u"]; r == nil || r.link != nil {
		t.Errorf("after Close the daemon holds a link to the run's universe: %+v", r)
	}
}

// Whose handshake places a connection takes: a remote host's, apart for
// root's privileged ports; on the hub's own host, its user's, whatever
// loopback address it came from.
func TestHandshaker(t *testing.T) {
	hub := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7170}
	owner := func() (int, error) { return 999, nil }
	for _, c := range []struct {
		from     *net.TCPAddr
		to       *net.TCPAddr
		who      string
		rootPool bool
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 40000}, hub, "10.1.2.3", false},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 700}, hub, "10.1.2.3", true},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 41), Port: 40000}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7170}, "uid 999 of this host", false},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 40001}, hub, "uid 999 of this host", false},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 800}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7170}, "uid 999 of this host", true},
	} {
		if who, root := handshakerOf(c.from, c.to, owner); who != c.who || root != c.rootPool {
			t.Errorf("from %v to %v: %q, root %v; want %q, %v", c.from, c.to, who, root, c.who, c.rootPool)
		}
	}
	if who, _ := handshakerOf(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 40000}, hub, func() (int, error) { return 0, errors.New("gone") }); who != "127.0.0.2" {
		t.Errorf("a local peer whose socket is gone: %q", who)
	}
}
