package slurm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A node process without its coordinator or secret says what is missing.
func TestNodeNeedsItsEnvironment(t *testing.T) {
	ctx := context.Background()
	call := func(n *Node) error {
		return n.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: "j", Rank: 0}, Data: []plugin.Info{{Key: "k", Value: "v"}}})
	}
	err := call(newNode(nil, func(string) string { return "" }))
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "no coordinator address") {
		t.Fatalf("no address: %v", err)
	}
	env := map[string]string{EnvCoordinator: "127.0.0.1:1"}
	err = call(newNode(nil, func(k string) string { return env[k] }))
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "no step secret") {
		t.Fatalf("no secret: %v", err)
	}
}

// counting counts the Fence calls that reach the coordinator.
type counting struct {
	plugin.Full
	mu     sync.Mutex
	fences []*plugin.FenceRequest
}

func (c *counting) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	c.mu.Lock()
	c.fences = append(c.fences, req)
	c.mu.Unlock()
	return c.Full.Fence(ctx, req)
}

// At width 1, three nodes form a chain: a barrier reaches the coordinator
// as one call without data, each node's data its own, read from it by
// direct modex; a collecting fence
// reaches the coordinator as one call carrying every node's part, and
// every node gets all the data. Every call goes up the chain: the
// coordinator holds one link, the top node's.
func TestTreeJoinsFences(t *testing.T) {
	var count *counting
	step := newTestStep(t, 7, 3, 1, func(root plugin.Full) plugin.Full { count = &counting{Full: root}; return count })
	accepted, job := step.accepted, step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := step.nodes(ctx, t)
	fenceAll := func(id string, collect bool) []*plugin.FenceResponse {
		out := make([]*plugin.FenceResponse, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() {
				resp, err := n.Fence(ctx, &plugin.FenceRequest{
					ID: id, Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}},
					LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: int32(i)}}, Node: job.Nodes[i].Name,
					Data: []byte(fmt.Sprintf("d%d;", i)), Collect: collect, Timeout: 5 * time.Second,
				})
				if err != nil {
					t.Errorf("node %d: %v", i, err)
				}
				out[i] = resp
			})
		}
		wg.Wait()
		return out
	}
	fenceAll("world/1", false)
	count.mu.Lock()
	got := count.fences
	count.fences = nil
	count.mu.Unlock()
	if len(got) != 1 || len(got[0].LocalProcs) != 3 || len(got[0].Data) != 0 {
		t.Fatalf("a barrier reached the coordinator as %+v, want one call carrying 3 ranks and no data (each node's data stays its own)", got)
	}
	resp, err := nodes[0].DirectModex(ctx, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: job.Nspace, Rank: 0}, Proc: plugin.Proc{Nspace: job.Nspace, Rank: 2}, Timeout: time.Second})
	if err != nil || string(resp.Data) != "d2;" {
		t.Fatalf("DirectModex(rank 2) after the barrier = %v, %v", resp, err)
	}
	for i, r := range fenceAll("world/2", true) {
		for _, part := range []string{"d0;", "d1;", "d2;"} {
			if r == nil || !strings.Contains(string(r.Data), part) {
				t.Fatalf("node %d: collect got %v, want every part", i, r)
			}
		}
	}
	count.mu.Lock()
	if len(count.fences) != 1 || len(count.fences[0].LocalProcs) != 3 {
		t.Fatalf("the coordinator saw %d fence calls (%+v), want one carrying 3 ranks", len(count.fences), count.fences)
	}
	count.mu.Unlock()
	// A node's hand-over of its own ranks' data (HandOver: a PMIx
	// server's, of its clients' commits) ends at that node: the
	// coordinator hears nothing, and the other nodes read the data.
	mine := []plugin.Proc{{Nspace: job.Nspace, Rank: 2}}
	if _, err := nodes[2].Fence(ctx, &plugin.FenceRequest{ID: "pmix:modex:n3/1", Procs: mine, LocalProcs: mine, Node: job.Nodes[2].Name,
		Data: []byte("h2;"), Timeout: 5 * time.Second, HandOver: true}); err != nil {
		t.Fatalf("node 3's hand-over: %v", err)
	}
	count.mu.Lock()
	if len(count.fences) != 1 {
		t.Errorf("a node's hand-over reached the coordinator: %+v", count.fences[1:])
	}
	count.mu.Unlock()
	resp, err = nodes[0].DirectModex(ctx, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: job.Nspace, Rank: 0}, Proc: plugin.Proc{Nspace: job.Nspace, Rank: 2}, Timeout: time.Second})
	if err != nil || !strings.HasSuffix(string(resp.Data), "h2;") {
		t.Fatalf("DirectModex(rank 2) after its node's hand-over = %v, %v", resp, err)
	}
	// The top node keeps its one link to the coordinator for every
	// call of the chain.
	if n := accepted.n.Load(); n != 1 {
		t.Errorf("the coordinator accepted %d connections from a chain of 3 nodes, want 1: the top node's", n)
	}
}

// testSecret is a step secret as srun's plugin makes one.
const testSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// serveCoordinator serves be as a step's coordinator on loopback, behind
// the step secret as gopmi-slurm coordinate does, until the test ends; it
// returns its address and the connections it accepted.
func serveCoordinator(t *testing.T, be plugin.Full) (string, *countingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := &countingListener{Listener: l}
	al, err := AuthListener(accepted, testSecret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = direct.Serve(ctx, al, be)
	}()
	t.Cleanup(func() { cancel(); <-served })
	return l.Addr().String(), accepted
}

// testStep is a step for the node tests: its coordinator (a universe
// served behind the step secret) and a job of one rank on each of its
// nodes, all on this host. Its nodes close before the coordinator stops.
type testStep struct {
	root     *local.Universe
	accepted *countingListener
	job      plugin.Job
	args     []string // a node's: the coordinator, and the tree width if set
}

// newTestStep starts step id's coordinator (serving wrap(root) when wrap
// is set) for a job on nodes nodes; width 0 leaves the default.
func newTestStep(t *testing.T, id, nodes, width int, wrap func(plugin.Full) plugin.Full) *testStep {
	t.Helper()
	prefix := fmt.Sprintf("slurm.%d", id)
	s := &testStep{root: local.NewUniverse(local.UniverseOptions{Prefix: prefix, LayoutByRM: true}), job: hostJob(prefix+".0", nodes)}
	t.Cleanup(s.root.Close)
	var be plugin.Full = s.root
	if wrap != nil {
		be = wrap(s.root)
	}
	var addr string
	addr, s.accepted = serveCoordinator(t, be)
	s.args = []string{"-coordinator", addr}
	if width > 0 {
		s.args = append(s.args, "-tree-width", strconv.Itoa(width))
	}
	return s
}

// node makes a node of the step, with the step secret in its
// environment; the test's end closes it.
func (s *testStep) node(t *testing.T, opts ...NodeOption) *Node {
	n := newNode(s.args, func(k string) string { return map[string]string{EnvSecret: testSecret}[k] }, opts...)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// nodes makes every node of the step and configures it, in order.
func (s *testStep) nodes(ctx context.Context, t *testing.T, opts ...NodeOption) []*Node {
	t.Helper()
	var out []*Node
	for i := range s.job.Nodes {
		n := s.node(t, opts...)
		s.configure(ctx, t, n, i)
		out = append(out, n)
	}
	return out
}

// configure places n as the job's node index i.
func (s *testStep) configure(ctx context.Context, t *testing.T, n *Node, i int) {
	t.Helper()
	if _, err := n.Configure(ctx, &plugin.ConfigureRequest{Job: s.job, NodeID: int32(i)}); err != nil {
		t.Fatal(err)
	}
}

// hostJob is a job of one rank on each of n nodes, n1, n2, ..., all on
// this host.
func hostJob(nspace string, n int) plugin.Job {
	job := plugin.Job{Nspace: nspace, Size: int32(n)}
	for i := range n {
		job.Nodes = append(job.Nodes, plugin.Node{ID: int32(i), Name: fmt.Sprintf("n%d", i+1), Ranks: []int32{int32(i)}, Addr: "127.0.0.1"})
	}
	return job
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// A node whose parent never comes up (its tasks never speak PMI, so its
// gopmi never starts) goes up past it to the next ancestor, and says so
// in its log; the coordinator still hears only the top of the tree.
func TestNodeGoesPastASilentParent(t *testing.T) {
	step := newTestStep(t, 8, 3, 1, nil)
	accepted, job := step.accepted, step.job
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	step.configure(ctx, t, step.node(t), 0)
	log := &plugintest.Buffer{}
	leaf := step.node(t, WithLogger(zerolog.New(log)), withAncestorWait(time.Second))
	step.configure(ctx, t, leaf, 2)
	if err := leaf.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 2},
		Data: []plugin.Info{{Key: "from-n3", Value: "v"}}}); err != nil {
		t.Fatal(err)
	}
	want := "fence tree: node n2 did not answer in 1s; going up past it"
	if !strings.Contains(log.String(), want) {
		t.Errorf("the leaf's log lacks %q:\n%s", want, log.String())
	}
	if n := accepted.n.Load(); n != 1 {
		t.Errorf("the coordinator accepted %d connections, want 1: the leaf went through n1", n)
	}
}

// A node that went past a parent that was late (its gopmi came up after
// the child's first call) goes back to it once it answers, so that the
// parent's fences do not wait, until half their time-out, for the
// child's ranks, whose parts would go around it.
func TestNodeRejoinsALateParent(t *testing.T) {
	step := newTestStep(t, 12, 3, 1, nil)
	job := step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := make([]*plugintest.Buffer, 3)
	nodes := make([]*Node, 3)
	for i := range nodes {
		logs[i] = &plugintest.Buffer{}
		nodes[i] = step.node(t, WithLogger(zerolog.New(logs[i])), withAncestorWait(200*time.Millisecond))
	}
	configure := func(i int) { step.configure(ctx, t, nodes[i], i) }
	configure(0)
	configure(2) // n2, its parent, is not up: n3 goes past it to n1
	if err := nodes[2].Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 2},
		Data: []plugin.Info{{Key: "early", Value: "v"}}}); err != nil {
		t.Fatal(err)
	}
	configure(1)
	want := "fence tree: node n2 answers now; this node's calls go through it again"
	for !strings.Contains(logs[2].String(), want) {
		if ctx.Err() != nil {
			t.Fatalf("n3 never went back to n2; its log:\n%s", logs[2].String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A fence of the three: n2 gets n3's part and goes up at once. Had
	// n3 stayed with n1, n2 would send its own part up only at half the
	// time-out (20 s), past this fence's 10 s.
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			_, err := n.Fence(fctx, &plugin.FenceRequest{
				ID: "world/1", Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}},
				LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: int32(i)}}, Node: job.Nodes[i].Name,
				Collect: true, Data: []byte{byte('a' + i)}, Timeout: 40 * time.Second,
			})
			if err != nil {
				t.Errorf("node %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if strings.Contains(logs[1].String(), "did not arrive") {
		t.Errorf("n2 waited for n3's part:\n%s", logs[1].String())
	}
}

// A node whose parent's gopmi ended (its ranks exited, its stepd killed
// it) links past it on its next call: to the parent's parent, here the
// top node, not failing every later call of its subtree.
func TestNodeRelinksPastALostParent(t *testing.T) {
	step := newTestStep(t, 11, 3, 1, nil)
	root, accepted, job := step.root, step.accepted, step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nodes []*Node
	for i := range job.Nodes {
		n := step.node(t, withAncestorWait(300*time.Millisecond))
		step.configure(ctx, t, n, i)
		nodes = append(nodes, n)
	}
	publish := func(key string) error {
		return nodes[2].Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 2},
			Data: []plugin.Info{{Key: key, Value: "v"}}})
	}
	if err := publish("before"); err != nil {
		t.Fatal(err)
	}
	nodes[1].Close() // n2's gopmi ends
	deadline := time.Now().Add(10 * time.Second)
	for err := publish("after"); err != nil; err = publish("after") {
		// The call in flight when the link broke may fail; the next
		// ones go past n2.
		if time.Now().After(deadline) {
			t.Fatalf("n3's calls after its parent ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := root.Lookup(ctx, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 0}, Keys: []string{"after"}}); err != nil {
		t.Fatalf("the name n3 published through n1 is not at the coordinator: %v", err)
	}
	if n := accepted.n.Load(); n != 1 {
		t.Errorf("the coordinator accepted %d connections, want 1: n3 went through n1", n)
	}
}

// A read of a rank whose node has no gopmi up (none of its ranks spoke
// PMI yet) ends at the read's own time-out, dial and call together, as
// a time-out that names the node, as the universe's read of a rank that
// contributed nothing does.
func TestReadOfANodeNotUp(t *testing.T) {
	step := newTestStep(t, 13, 2, 0, nil)
	job := step.job
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := step.node(t)
	step.configure(ctx, t, n, 0)
	start := time.Now()
	_, err := n.DirectModex(ctx, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: job.Nspace, Rank: 0},
		Proc: plugin.Proc{Nspace: job.Nspace, Rank: 1}, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), "node n2 did not answer in 300ms") {
		t.Fatalf("read of a rank on a node not up: %v, want a time-out naming node n2", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the read took %s, far past its 300ms time-out", d)
	}
}

// A node's Configure Config is a declared JSON object: the coordinator
// reads the port range from it, ignores keys it does not know, reads an
// older node's "tree-ports=" text, and refuses anything else.
func TestNodeConfig(t *testing.T) {
	for _, tc := range []struct {
		in    string
		ports string
		bad   bool
	}{
		{"", "", false},
		{`{"tree_ports":"30000-30099"}`, "30000-30099", false},
		{`{"tree_ports":"30000-30099","later":1}`, "30000-30099", false},
		{"tree-ports=30000-30099", "30000-30099", false},
		{"ports 30000", "", true},
	} {
		c, err := ParseNodeConfig([]byte(tc.in))
		if (err != nil) != tc.bad || c.TreePorts != tc.ports || (tc.bad && !errors.Is(err, plugin.ErrInvalidArgument)) {
			t.Errorf("ParseNodeConfig(%q) = %+v, %v", tc.in, c, err)
		}
	}
}
