package slurm

import (
	"context"
	"errors"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/hostrm/internal/overlay"
	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

// The job of the tree tests: at width 1, node n1 (ranks 0-1) is under the
// coordinator, n2 (ranks 2-3) under n1, n3 (rank 4) under n2.
var treeJob = plugin.Job{Nspace: "slurm.9.0", Size: 5, Nodes: []plugin.Node{
	{ID: 0, Name: "n1", Ranks: []int32{0, 1}, Addr: "127.0.0.1"}, {ID: 1, Name: "n2", Ranks: []int32{2, 3}, Addr: "127.0.0.1"},
	{ID: 2, Name: "n3", Ranks: []int32{4}, Addr: "127.0.0.1"},
}}

const treeTimeout = 10 * time.Second

// part is a fence part carrying ranks, as node from sends it.
func part(from string, ranks ...int32) *plugin.FenceRequest {
	req := &plugin.FenceRequest{
		ID: "world/1", Procs: []plugin.Proc{{Nspace: treeJob.Nspace, Rank: plugin.RankWildcard}},
		Node: from, Data: []byte(from + ";"), Collect: true, Timeout: treeTimeout,
	}
	for _, r := range ranks {
		req.LocalProcs = append(req.LocalProcs, plugin.Proc{Nspace: treeJob.Nspace, Rank: r})
	}
	return req
}

// treeRig is node n1's tree, on a fake clock, under a fake coordinator
// that records the calls it gets.
type treeRig struct {
	t     *testing.T
	clock *crew.Fake
	log   *plugintest.Buffer
	tree  *tree
	root  *plugintest.Fake
	mu    sync.Mutex
	calls []*plugin.FenceRequest // what reached the coordinator
}

func newTreeRig(t *testing.T, self int, fence func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error)) *treeRig {
	r := &treeRig{t: t, clock: crew.NewFake(), log: &plugintest.Buffer{}}
	r.root = &plugintest.Fake{FenceF: func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		r.mu.Lock()
		r.calls = append(r.calls, req)
		r.mu.Unlock()
		if fence != nil {
			return fence(ctx, req)
		}
		return &plugin.FenceResponse{Data: []byte("answer")}, nil
	}}
	r.tree = newTree(treeConfig{width: 1, job: treeJob, self: self, toRoot: r.root, secret: testSecret,
		log: zerolog.New(r.log), clock: r.clock})
	t.Cleanup(r.tree.close)
	return r
}

// upCall is a call up, as the tests compare them.
type upCall struct {
	Ranks   string
	Timeout time.Duration
	Alone   bool // a part that went up by itself, not a gathered call
}

func ranksOf(req *plugin.FenceRequest) string {
	var rs []int32
	for _, p := range req.LocalProcs {
		rs = append(rs, p.Rank)
	}
	return plugin.RankList(rs)
}

// The subtree's call goes up when its last part arrives, or at half the
// time-out with what it has; a part that comes later goes up alone with
// what is left of the time-out. Every decision is the fake clock's: no
// test waits for a timer.
func TestTreeFlushAndLateParts(t *testing.T) {
	type event struct {
		at   time.Duration // since the first part
		part *plugin.FenceRequest
	}
	for _, tc := range []struct {
		name   string
		events []event
		until  time.Duration // the clock's end
		want   []upCall
		log    string // a line the log must have ("" none at warn)
	}{{
		name:   "every part before half the time-out",
		events: []event{{0, part("n1", 0, 1)}, {time.Second, part("n2", 2, 3, 4)}},
		until:  treeTimeout,
		want:   []upCall{{"ranks 0-4", 9 * time.Second, false}},
	}, {
		name:   "the last part just before half the time-out",
		events: []event{{0, part("n1", 0, 1)}, {treeTimeout/2 - time.Millisecond, part("n2", 2, 3, 4)}},
		until:  treeTimeout,
		want:   []upCall{{"ranks 0-4", treeTimeout/2 + time.Millisecond, false}},
	}, {
		name:   "no child by half the time-out",
		events: []event{{0, part("n1", 0, 1)}},
		until:  treeTimeout / 2,
		want:   []upCall{{"ranks 0-1", treeTimeout / 2, false}},
		log:    "fence tree: fence world/1: ranks 2-3 (node n2), rank 4 (node n3) did not arrive in 5s; sending the subtree's part up without them",
	}, {
		name:   "a late part goes up alone with the rest of the time-out",
		events: []event{{0, part("n1", 0, 1)}, {7 * time.Second, part("n2", 2, 3, 4)}},
		until:  treeTimeout,
		want:   []upCall{{"ranks 0-1", treeTimeout / 2, false}, {"ranks 2-4", 3 * time.Second, true}},
		log:    "ranks 2-3 (node n2), rank 4 (node n3) did not arrive in 5s",
	}, {
		name: "a subtree half there at half the time-out",
		events: []event{{0, part("n1", 0, 1)}, {time.Second, part("n2", 2, 3)},
			{6 * time.Second, part("n3", 4)}},
		until: treeTimeout,
		want:  []upCall{{"ranks 0-3", treeTimeout / 2, false}, {"rank 4", 4 * time.Second, true}},
		log:   "rank 4 (node n3) did not arrive in 5s",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTreeRig(t, 0, nil)
			var got []upCall
			var waits []chan fencetree.Result
			now := time.Duration(0)
			for _, ev := range tc.events {
				r.clock.Advance(ev.at - now)
				now = ev.at
				a := r.tree.arrive(ev.part)
				switch {
				case a.err != nil:
					t.Fatalf("part of %s: %v", ev.part.Node, a.err)
				case a.up != nil:
					got = append(got, upCall{ranksOf(a.up), a.up.Timeout, true})
				default:
					waits = append(waits, a.wait)
				}
			}
			r.clock.Advance(tc.until - now)
			// The gathered calls' waiters hear the coordinator's answer.
			for i, w := range waits {
				select {
				case res := <-w:
					if res.Err != nil || string(res.Resp.Data) != "answer" {
						t.Errorf("waiter %d: %v, %v; want the coordinator's answer", i, res.Resp, res.Err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("waiter %d has no answer", i)
				}
			}
			r.mu.Lock()
			for _, c := range r.calls {
				got = append(got, upCall{ranksOf(c), c.Timeout, false})
			}
			r.mu.Unlock()
			sort.SliceStable(got, func(i, j int) bool { return !got[i].Alone && got[j].Alone })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("calls up (-want +got):\n%s", diff)
			}
			logged := r.log.String()
			if tc.log != "" && !strings.Contains(logged, tc.log) {
				t.Errorf("the log lacks %q:\n%s", tc.log, logged)
			}
			if tc.log == "" && strings.Contains(logged, `"level":"warn"`) {
				t.Errorf("a warning without a missing part:\n%s", logged)
			}
		})
	}
}

// A fence the tree gives up on names the ranks its subtree never got,
// grouped by node, as the universe names a fence's missing ranks; when
// every part came, it names the parent that did not answer.
func TestTreeTimeoutNamesMissing(t *testing.T) {
	// The coordinator never answers: it holds each call until it ends.
	hold := func(ctx context.Context, _ *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		<-ctx.Done()
		return nil, plugin.Errorf(plugin.ErrAborted, "held: %v", ctx.Err())
	}
	for _, tc := range []struct {
		name  string
		self  int
		parts []*plugin.FenceRequest
		want  string
	}{{
		name:  "a child never came",
		self:  0,
		parts: []*plugin.FenceRequest{part("n1", 0, 1)},
		want:  "fence world/1: ranks 2-3 (node n2), rank 4 (node n3) did not arrive in 10s",
	}, {
		name:  "part of a subtree never came",
		self:  0,
		parts: []*plugin.FenceRequest{part("n1", 0, 1), part("n2", 2, 3)},
		want:  "fence world/1: rank 4 (node n3) did not arrive in 10s",
	}, {
		name:  "the coordinator never answered",
		self:  0,
		parts: []*plugin.FenceRequest{part("n1", 0, 1), part("n2", 2, 3, 4)},
		want:  "fence world/1: the coordinator did not answer in 10s",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTreeRig(t, tc.self, hold)
			var waits []chan fencetree.Result
			for _, p := range tc.parts {
				a := r.tree.arrive(p)
				if a.wait == nil {
					t.Fatalf("part of %s did not join the subtree's call: %+v", p.Node, a)
				}
				waits = append(waits, a.wait)
			}
			r.clock.Advance(treeTimeout + expireGrace)
			for i, w := range waits {
				select {
				case res := <-w:
					if !errors.Is(res.Err, plugin.ErrTimeout) || res.Err.Error() != tc.want {
						t.Errorf("waiter %d: %v; want %q", i, res.Err, tc.want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("waiter %d has no answer", i)
				}
			}
			if !strings.Contains(r.log.String(), tc.want) {
				t.Errorf("the log lacks %q:\n%s", tc.want, r.log.String())
			}
		})
	}
}

// A caller whose deadline passes while the subtree waits for a child is
// told which ranks are missing, not that it went away.
func TestTreeCallerDeadlineNamesMissing(t *testing.T) {
	r := newTreeRig(t, 0, nil)
	dead, cancel := context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	_, err := r.tree.fence(dead, part("n1", 0, 1))
	want := "fence world/1: ranks 2-3 (node n2), rank 4 (node n3) did not arrive in 10s"
	if !errors.Is(err, plugin.ErrTimeout) || err.Error() != want {
		t.Fatalf("fence past the caller's deadline: %v; want %q", err, want)
	}
}

// A child lost in the middle of a fence (its call cancelled: its process
// died, its link broke) leaves a line in the node's log naming the node
// and the ranks its subtree carried.
func TestSubtreeLossIsLogged(t *testing.T) {
	r := newTreeRig(t, 0, nil)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := subtreeServer{t: r.tree}.Fence(gone, part("n2", 2, 3, 4))
	if !errors.Is(err, plugin.ErrAborted) {
		t.Fatalf("a cancelled child's fence: %v", err)
	}
	want := "fence tree: node n2's subtree went away in fence world/1 (it carried ranks 2-3 (node n2), rank 4 (node n3))"
	if got := r.log.String(); !strings.Contains(got, want) || !strings.Contains(got, `"level":"warn"`) {
		t.Fatalf("the log lacks a warning %q:\n%s", want, got)
	}
}

// brokenListener fails every Accept for good.
type brokenListener struct{ net.Listener }

func (brokenListener) Accept() (net.Conn, error) {
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EINVAL)}
}

// When a node's subtree server fails, its log says so, naming every rank
// below it: their fences cannot come through it.
func TestSubtreeServerFailureIsLogged(t *testing.T) {
	clock := crew.NewFake()
	log := &plugintest.Buffer{}
	root := &plugintest.Fake{
		PublishF: func(context.Context, *plugin.PublishRequest) error { return nil },
		AwaitEventsF: func(ctx context.Context, _ *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
			<-ctx.Done() // the wait for the job's news: none
			return nil, ctx.Err()
		},
	}
	tr := newTree(treeConfig{width: 1, job: treeJob, self: 0, toRoot: root, secret: testSecret, log: zerolog.New(log), clock: clock,
		listen: func(network, addr string) (net.Listener, error) {
			l, err := net.Listen(network, addr)
			return brokenListener{l}, err
		}})
	defer tr.close()
	if err := tr.serve(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "fence tree: serving node n1's subtree failed: the fences of ranks 2-3 (node n2), rank 4 (node n3) cannot reach it"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the log lacks %q:\n%s", want, log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A part whose way up is gone fails naming the ranks it carried and the
// parent it could not reach, and the node logs it.
func TestTreeLostParentNamesSubtree(t *testing.T) {
	r := newTreeRig(t, 0, func(context.Context, *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		return nil, plugin.Errorf(plugin.ErrUnavailable, "connection refused")
	})
	// A fence of this node's ranks alone goes up as it is.
	req := part("n1", 0, 1)
	req.Procs = req.LocalProcs
	_, err := r.tree.fence(context.Background(), req)
	want := "fence world/1: ranks 0-1 (node n1) cannot reach the coordinator: connection refused"
	if !errors.Is(err, plugin.ErrUnavailable) || err.Error() != want {
		t.Fatalf("fence: %v; want %q", err, want)
	}
	if !strings.Contains(r.log.String(), want) {
		t.Fatalf("the log lacks %q:\n%s", want, r.log.String())
	}
	// Said once: a node further down, which gets it as its parent's
	// answer, does not add its own words; a link that breaks is lost.
	ctx, cancel := context.WithCancel(context.Background())
	l, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	served := make(chan error, 1)
	go func() {
		served <- direct.Serve(ctx, l, &plugintest.Fake{FenceF: func(context.Context, *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			return nil, err
		}})
	}()
	c, derr := direct.Dial(context.Background(), l.Addr().String())
	if derr != nil {
		t.Fatal(derr)
	}
	defer c.Close()
	_, answered := c.Backend().Fence(context.Background(), req)
	if answered == nil || answered.Error() != want || lostLink(answered) {
		t.Fatalf("the parent's answer %q: lostLink %v; want it passed on as it is", answered, lostLink(answered))
	}
	cancel()
	<-served
	if _, broken := c.Backend().Fence(context.Background(), req); !lostLink(broken) {
		t.Fatalf("a call on a link whose server ended: %v; want a lost link", broken)
	}
}

// Closing the tree ends every goroutine and timer it started, answers
// the fences it holds, and refuses later ones (goleak checks the rest).
func TestTreeCloseEndsItsWork(t *testing.T) {
	r := newTreeRig(t, 0, func(ctx context.Context, _ *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a := r.tree.arrive(part("n1", 0, 1))
	r.clock.Advance(treeTimeout / 2) // the partial call goes up and hangs
	r.tree.close()
	select {
	case res := <-a.wait:
		if !errors.Is(res.Err, plugin.ErrAborted) {
			t.Errorf("a held part at close: %v", res.Err)
		}
	default:
		t.Error("close left a part without an answer")
	}
	if b := r.tree.arrive(part("n2", 2, 3, 4)); !errors.Is(b.err, plugin.ErrAborted) {
		t.Errorf("a part after close: %+v", b)
	}
	armed := r.tree.crew.Armed()
	if armed != 0 {
		t.Errorf("%d timers armed after close", armed)
	}
}

// The node's logger reaches its fence tree's listener: a connection to
// the subtree server that cannot prove the step secret is refused and
// logged there. A node without WithLogger logs through Configure's
// context, as go-plugin's Serve gives it.
func TestNodeLoggerReachesTheTree(t *testing.T) {
	root := local.NewUniverse(local.UniverseOptions{Prefix: "slurm.10", LayoutByRM: true})
	defer root.Close()
	addr, _ := serveCoordinator(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := hostJob("slurm.10.0", 2)
	env := map[string]string{EnvSecret: testSecret}
	args := []string{"-coordinator", addr, "-tree-width", "1"}
	given, fromCtx := &plugintest.Buffer{}, &plugintest.Buffer{}
	n1 := newNode(args, func(k string) string { return env[k] }, WithLogger(zerolog.New(given)))
	defer n1.Close()
	if _, err := n1.Configure(ctx, &plugin.ConfigureRequest{Job: job, NodeID: 0}); err != nil {
		t.Fatal(err)
	}
	n2 := newNode(args, func(k string) string { return env[k] })
	defer n2.Close()
	if _, err := n2.Configure(zerolog.New(fromCtx).WithContext(ctx), &plugin.ConfigureRequest{Job: job, NodeID: 1}); err != nil {
		t.Fatal(err)
	}

	// n1 listens for n2; a stranger without the secret knocks.
	listening := n1.ov.Addr()
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	wrong := overlay.Dialer(strings.Repeat("w", len(testSecret)), overlay.RoleTreeChild, overlay.ParentRole(job.Nspace, 0))
	if c, err := wrong(dctx, listening); err == nil {
		c.Close()
		t.Fatal("a wrong secret was accepted")
	}
	want := "seclink: handshake refused"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(given.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("node n1's log lacks %q:\n%s", want, given.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// n2's tree logs to the logger of its Configure's context.
	n2.mu.Lock()
	tr := n2.tree
	n2.mu.Unlock()
	tr.log.Warn().Msg("marker")
	if !strings.Contains(fromCtx.String(), "marker") {
		t.Fatalf("node n2's tree does not log to Configure's context logger: %q", fromCtx.String())
	}
}

// awaitChildren of any fence, before a rank's finalize (WithFinalizeDrain), returns once no
// child's part of any fence is passing through the node, and childFlush
// after the last one returned, for its answer to be written.
func TestDrainBeforeFinalize(t *testing.T) {
	r := newTreeRig(t, 0, nil)
	r.tree.drain.call("f/1", 1)
	r.tree.drain.call("f/2", 1)
	drain := func() <-chan struct{} {
		done := make(chan struct{})
		go func() {
			r.tree.drain.await(context.Background(), "")
			close(done)
		}()
		return done
	}
	// drained advances the tree's clock by step until done is closed.
	drained := func(done <-chan struct{}, step time.Duration) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			r.clock.Advance(step)
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatal("not drained")
			}
		}
	}
	done := drain()
	r.tree.drain.call("f/1", -1)
	select {
	case <-done:
		t.Fatal("drained while a child's part of f/2 was still passing through")
	case <-time.After(50 * time.Millisecond):
	}
	r.tree.drain.call("f/2", -1)
	select {
	case <-done:
		t.Fatal("drained before its answer had childFlush to leave")
	case <-time.After(50 * time.Millisecond):
	}
	drained(done, childFlush)
	// Nothing passing through, childFlush after the last: at once.
	select {
	case <-drain():
	case <-time.After(5 * time.Second):
		t.Fatal("an idle node did not drain at once")
	}
	// A child's part that never returns holds the drain childDrain, no
	// more.
	r.tree.drain.call("f/3", 1)
	done = drain()
	select {
	case <-done:
		t.Fatal("drained while a child's part of f/3 was still passing through")
	case <-time.After(50 * time.Millisecond):
	}
	drained(done, childDrain)
}
