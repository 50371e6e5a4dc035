package plugintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Harness tells RunConformance how to reach the backend under test.
type Harness struct {
	// NewNode returns the backend the shim on node nodeID of job would
	// talk to. The suite calls it once per node of every job it makes,
	// each job with a fresh namespace; for a backend that lives in a
	// daemon, return several views (connections) of one daemon. Register
	// clean-up with t.Cleanup.
	NewNode func(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend
	// Timeout is the fence, modex and lookup timeout the suite puts in its
	// requests, and so how long the cases that wait for a time-out take.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// Config is passed to every Configure call.
	Config []byte

	// processes: each node is a plugin process (Plugin.Harness), already
	// reached over gRPC.
	processes bool
}

// DefaultTimeout is Harness.Timeout's default.
const DefaultTimeout = 2 * time.Second

// knownCaps are the capability names a backend may advertise.
var knownCaps = []string{
	plugin.CapPublish, plugin.CapSpawn, plugin.CapConnect,
	plugin.CapQuery, plugin.CapLog, plugin.CapNotify,
}

// jobSeq makes namespaces unique within a process; the time makes them
// unique across runs against a long-lived daemon.
var jobSeq atomic.Int64

// RunConformance runs the conformance suite against h. Each case makes its
// own 2-node, 4-rank job (ranks 0-1 on node n0, 2-3 on node n1) with a
// fresh namespace; the Connect case makes a second such job and connects
// the two, so a backend that advertises "connect" must know every job
// configured through the harness's nodes.
//
// A go-plugin backend must pass with Plugin.Harness, which starts its
// binary once per node as the shims do ("process"). A harness of
// in-process backends runs every case twice, once calling them directly
// ("direct") and once through an in-process gRPC pair ("grpc"), so the
// suite also covers the conversions a real plugin's calls go through; it
// suits a backend that lives in a daemon and the tests of its library.
func RunConformance(t *testing.T, h Harness) {
	if h.NewNode == nil {
		t.Fatal("conformance: Harness.NewNode is nil")
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultTimeout
	}
	runCases(t, h, conformanceCases)
}

// nameServiceCases are the cases of the name service (Publisher).
var nameServiceCases = []conformanceCase{
	{"NameService", testNameService},
	{"LookupWaitTimeout", testLookupWaitTimeout},
	{"NameUnknownInfo", testNameUnknownInfo},
	{"NamePersistFirstRead", testNamePersistFirstRead},
	{"NameRangeNamespace", testNameRangeNamespace},
	{"UnpublishWithoutKeys", testUnpublishWithoutKeys},
}

// conformanceCases are every case, in the order RunConformance runs them.
var conformanceCases = slices.Concat([]conformanceCase{
	{"GetInfo", testGetInfo},
	{"Configure", testConfigure},
	{"ClientConnectedFinalized", testClients},
	{"FenceCollect", testFenceCollect},
	{"FenceTwice", testFenceTwice},
	{"FenceBarrier", testFenceBarrier},
	{"FenceTimeout", testFenceTimeout},
	{"FenceLateArrival", testFenceLateArrival},
	{"FenceSameIDTwoJobs", testFenceTwoJobs},
	{"FenceCancel", testFenceCancel},
	{"FenceThenDirectModex", testFenceModex},
	{"ZeroTimeouts", testZeroTimeouts},
	{"DirectModexTimeout", testModexTimeout},
	{"DirectModexWholeJob", testModexWholeJob},
	{"DirectModexUnknownJob", testModexUnknownJob},
}, nameServiceCases, []conformanceCase{
	{"Connect", testConnect},
	{"Capabilities", testCapabilities},
	{"Abort", testAbort},
	{"AbortFailsWaits", testAbortFailsWaits},
})

// conformanceCase is one case of the suite.
type conformanceCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// RunNameService runs the name-service cases of the suite alone, against
// a backend that is only a name service, or reached as one: the node
// daemon, say, which serves names across runs but no fences. Each node
// NewNode returns needs GetInfo (advertising CapPublish), Configure and
// the Publisher calls.
func RunNameService(t *testing.T, h Harness) {
	if h.NewNode == nil {
		t.Fatal("conformance: Harness.NewNode is nil")
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultTimeout
	}
	runCases(t, h, nameServiceCases)
}

// runCases runs cases in each mode h allows.
func runCases(t *testing.T, h Harness, cases []conformanceCase) {
	modes := []string{"direct", "grpc"}
	if h.processes {
		modes = []string{"process"}
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					c.run(t, newEnv(t, h, mode == "grpc"))
				})
			}
		})
	}
}

// env is one case's job and its two nodes' backends.
type env struct {
	h        Harness
	overGRPC bool // the nodes are reached through an in-process gRPC pair
	job      plugin.Job
	nodes    []plugin.Full
	info     *plugin.BackendInfo // node 0's GetInfo
}

func newEnv(t *testing.T, h Harness, overGRPC bool) *env {
	t.Helper()
	ns := fmt.Sprintf("conformance-%d-%d", time.Now().UnixNano(), jobSeq.Add(1))
	job := plugin.Job{
		Nspace:       ns,
		Size:         4,
		UniverseSize: 4,
		Nodes: []plugin.Node{
			{ID: 0, Name: "n0", Ranks: []int32{0, 1}},
			{ID: 1, Name: "n1", Ranks: []int32{2, 3}},
		},
		Apps: []plugin.App{{FirstRank: 0, Size: 4, Cmd: "conformance-app"}},
	}
	e := &env{h: h, overGRPC: overGRPC, job: job}
	for _, n := range job.Nodes {
		b := h.NewNode(t, job, n.ID)
		if b == nil {
			t.Fatalf("NewNode(%s, node %d) returned nil", ns, n.ID)
		}
		if overGRPC {
			e.nodes = append(e.nodes, NewPair(t, b))
		} else {
			e.nodes = append(e.nodes, plugin.Complete(b))
		}
	}
	// The host's start-up sequence: GetInfo, then Configure, on each node.
	ctx, cancel := e.ctx()
	defer cancel()
	for i, b := range e.nodes {
		info, err := b.GetInfo(ctx)
		if err != nil {
			t.Fatalf("node %d: GetInfo: %v", i, err)
		}
		if info == nil {
			t.Fatalf("node %d: GetInfo returned nil info and no error", i)
		}
		if i == 0 {
			e.info = info
		}
		if _, err := b.Configure(ctx, e.configureRequest(int32(i))); err != nil {
			t.Fatalf("node %d: Configure: %v", i, err)
		}
	}
	return e
}

func (e *env) configureRequest(node int32) *plugin.ConfigureRequest {
	return &plugin.ConfigureRequest{APIVersion: plugin.APIVersion1, Job: e.job, NodeID: node, Config: e.h.Config}
}

// ctx bounds a call that should succeed: generously, so a slow CI machine
// does not fail the suite, but never unbounded.
func (e *env) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 4*e.h.Timeout+10*time.Second)
}

func (e *env) proc(rank int32) plugin.Proc { return plugin.Proc{Nspace: e.job.Nspace, Rank: rank} }

func (e *env) localProcs(node int) []plugin.Proc {
	var ps []plugin.Proc
	for _, r := range e.job.Nodes[node].Ranks {
		ps = append(ps, e.proc(r))
	}
	return ps
}

func (e *env) fenceRequest(id string, node int, data []byte, collect bool) *plugin.FenceRequest {
	return &plugin.FenceRequest{
		ID:         id,
		Procs:      []plugin.Proc{e.proc(plugin.RankWildcard)},
		LocalProcs: e.localProcs(node),
		Node:       e.job.Nodes[node].Name,
		Data:       data,
		Collect:    collect,
		Timeout:    e.h.Timeout,
	}
}

func (e *env) has(capName string) bool { return slices.Contains(e.info.Capabilities, capName) }

// explain adds the process model to a time-out between nodes that run in
// processes of their own.
func (e *env) explain(err error) string {
	if e.h.processes && errors.Is(err, plugin.ErrTimeout) {
		return "\n\t" + processModel
	}
	return ""
}

// fenceAll calls Fence from every node at once and returns each node's
// response, failing t on any error.
func (e *env) fenceAll(t *testing.T, id string, data [][]byte, collect bool) []*plugin.FenceResponse {
	t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	resps := make([]*plugin.FenceResponse, len(e.nodes))
	errs := make([]error, len(e.nodes))
	var wg sync.WaitGroup
	for i, b := range e.nodes {
		wg.Go(func() {
			resps[i], errs[i] = b.Fence(ctx, e.fenceRequest(id, i, data[i], collect))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fence %s: node %d: %v%s", id, i, err, e.explain(err))
		}
		if resps[i] == nil {
			t.Fatalf("fence %s: node %d: nil response and no error", id, i)
		}
	}
	return resps
}

func testGetInfo(t *testing.T, e *env) {
	info := e.info
	if info.Name == "" {
		t.Error("GetInfo: empty Name")
	}
	if !slices.Contains(info.APIVersions, plugin.APIVersion1) {
		t.Errorf("GetInfo: APIVersions %q do not include %q", info.APIVersions, plugin.APIVersion1)
	}
	seen := map[string]bool{}
	for _, c := range info.Capabilities {
		if !slices.Contains(knownCaps, c) {
			t.Errorf("GetInfo: unknown capability %q (known: %q)", c, knownCaps)
		}
		if seen[c] {
			t.Errorf("GetInfo: capability %q listed twice", c)
		}
		seen[c] = true
	}
	ctx, cancel := e.ctx()
	defer cancel()
	other, err := e.nodes[1].GetInfo(ctx)
	if err != nil {
		t.Fatalf("node 1: GetInfo: %v", err)
	}
	if other.Name != info.Name || !slices.Equal(other.Capabilities, info.Capabilities) {
		t.Errorf("GetInfo differs between nodes: %+v and %+v", info, other)
	}
}

func testConfigure(t *testing.T, e *env) {
	// newEnv configured both nodes already; a second Configure of the
	// same node (a restarted shim) must not break the job.
	ctx, cancel := e.ctx()
	defer cancel()
	for i, b := range e.nodes {
		if _, err := b.Configure(ctx, e.configureRequest(int32(i))); err != nil {
			t.Errorf("node %d: second Configure: %v", i, err)
		}
	}
	e.fenceAll(t, "after-configure", [][]byte{[]byte("a"), []byte("b")}, true)
}

func testClients(t *testing.T, e *env) {
	ctx, cancel := e.ctx()
	defer cancel()
	// The host batches: one call may name one task or all of a node's.
	for i, b := range e.nodes {
		procs := e.localProcs(i)
		req := &plugin.ClientRequest{Procs: procs[:1], Info: []plugin.Info{{Key: "pmi-version", Value: "2"}}}
		if err := b.ClientConnected(ctx, req); err != nil {
			t.Errorf("node %d: ClientConnected(%v): %v", i, req.Procs, err)
		}
		req = &plugin.ClientRequest{Procs: procs[1:]}
		if err := b.ClientConnected(ctx, req); err != nil {
			t.Errorf("node %d: ClientConnected(%v): %v", i, req.Procs, err)
		}
	}
	for i, b := range e.nodes {
		req := &plugin.ClientRequest{Procs: e.localProcs(i)}
		if err := b.ClientFinalized(ctx, req); err != nil {
			t.Errorf("node %d: ClientFinalized(%v): %v", i, req.Procs, err)
		}
	}
}

// isConcat reports whether got is the concatenation of parts in some
// order.
func isConcat(got []byte, parts [][]byte) bool {
	if len(parts) == 0 {
		return len(got) == 0
	}
	for i, p := range parts {
		if bytes.HasPrefix(got, p) {
			rest := slices.Delete(slices.Clone(parts), i, i+1)
			if isConcat(got[len(p):], rest) {
				return true
			}
		}
	}
	return false
}

func testFenceCollect(t *testing.T, e *env) {
	data := [][]byte{[]byte("node0:rank0=a;rank1=b;"), []byte("node1:rank2=c;rank3=d;")}
	for i, r := range e.fenceAll(t, "world/1", data, true) {
		if !isConcat(r.Data, data) {
			t.Errorf("fence world/1: node %d got %q, want the concatenation of %q in any order", i, r.Data, data)
		}
	}
}

func testFenceTwice(t *testing.T, e *env) {
	first := [][]byte{[]byte("first-0;"), []byte("first-1;")}
	e.fenceAll(t, "world/1", first, true)
	second := [][]byte{[]byte("second-0;"), []byte("second-1;")}
	for i, r := range e.fenceAll(t, "world/2", second, true) {
		if !isConcat(r.Data, second) {
			t.Errorf("fence world/2: node %d got %q, want the concatenation of %q in any order", i, r.Data, second)
		}
	}
}

// testFenceBarrier: a fence without Collect returns no data, but it is
// still a barrier: node n0's call returns only once node n1 arrived.
func testFenceBarrier(t *testing.T, e *env) {
	ctx, cancel := e.ctx()
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.nodes[0].Fence(ctx, e.fenceRequest("world/1", 0, []byte("n0"), false))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("fence without Collect: node n0 returned (%v) before node n1 arrived; want a barrier", err)
	case <-time.After(e.h.Timeout / 3):
	}
	if _, err := e.nodes[1].Fence(ctx, e.fenceRequest("world/1", 1, []byte("n1"), false)); err != nil {
		t.Fatalf("fence without Collect: node n1: %v%s", err, e.explain(err))
	}
	if err := <-done; err != nil {
		t.Errorf("fence without Collect: node n0: %v", err)
	}
}

// testFenceTimeout: a fence one node never joins fails on the other with
// ErrTimeout within about its Timeout, naming the missing node or ranks.
func testFenceTimeout(t *testing.T, e *env) {
	// Bounded well below the suite's usual limit: a backend that ignores
	// Timeout costs seconds here, not the whole context.
	limit := 2*e.h.Timeout + time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	_, err := e.nodes[0].Fence(ctx, e.fenceRequest("world/1", 0, []byte("lonely"), true))
	elapsed := time.Since(start)
	switch {
	case err == nil:
		t.Fatal("fence with node n1 missing: no error")
	case ctx.Err() != nil:
		t.Fatalf("fence with node n1 missing returned only when its context ended after %s (%v); want ErrTimeout after its Timeout %s", elapsed.Round(time.Millisecond), err, e.h.Timeout)
	case !errors.Is(err, plugin.ErrTimeout):
		t.Errorf("fence with node n1 missing: %v; want an error wrapping plugin.ErrTimeout", err)
	}
	if !namesMissing(err.Error(), e.job.Nspace) {
		t.Errorf("fence with node n1 missing: message %q names neither node n1 nor ranks 2-3", err)
	}
}

// namesMissing reports whether msg, its namespace (whose digits prove
// nothing) taken out, names node n1 or ranks 2-3.
func namesMissing(msg, nspace string) bool {
	msg = strings.ReplaceAll(msg, nspace, "")
	for _, w := range []string{"n1", "2-3", "2,3", "ranks 2 and 3", "rank 2", "rank 3"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// testFenceLateArrival: once a fence has timed out, a node that arrives
// late fails at once with the time-out, instead of completing the fence
// or waiting out another Timeout.
func testFenceLateArrival(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.h.Timeout+time.Second)
	defer cancel()
	if _, err := e.nodes[0].Fence(ctx, e.fenceRequest("world/1", 0, []byte("early"), true)); !errors.Is(err, plugin.ErrTimeout) || ctx.Err() != nil {
		t.Fatalf("fence with node n1 missing: %v; want ErrTimeout after its Timeout %s", err, e.h.Timeout)
	}
	start := time.Now()
	_, err := e.nodes[1].Fence(ctx, e.fenceRequest("world/1", 1, []byte("late"), true))
	elapsed := time.Since(start)
	if !errors.Is(err, plugin.ErrTimeout) {
		t.Errorf("late arrival at a timed-out fence: %v; want ErrTimeout at once", err)
	}
	if elapsed > e.h.Timeout/2 {
		t.Errorf("late arrival at a timed-out fence took %s; want the time-out at once", elapsed.Round(time.Millisecond))
	}
}

// testFenceTwoJobs: two jobs running a fence of the same ID at once each
// get their own job's data: fences are matched by (nspace, ID).
func testFenceTwoJobs(t *testing.T, e *env) {
	other := newEnv(t, e.h, e.overGRPC)
	var wg sync.WaitGroup
	got := make([][]*plugin.FenceResponse, 2)
	for i, env := range []*env{e, other} {
		data := [][]byte{[]byte("job" + strconv.Itoa(i) + "-n0;"), []byte("job" + strconv.Itoa(i) + "-n1;")}
		wg.Go(func() { got[i] = env.fenceAll(t, "world/1", data, true) })
	}
	wg.Wait()
	for i := range got {
		want := [][]byte{[]byte("job" + strconv.Itoa(i) + "-n0;"), []byte("job" + strconv.Itoa(i) + "-n1;")}
		for n, r := range got[i] {
			if r != nil && !isConcat(r.Data, want) {
				t.Errorf("job %d node %d got %q from fence world/1; want only its own job's data, %q", i, n, r.Data, want)
			}
		}
	}
}

// testZeroTimeouts: a zero Timeout is the contract's default (minutes:
// plugin.DefaultFenceTimeout, DefaultLookupTimeout), not "give up at once":
// a fence, a direct modex and a waiting lookup whose counterpart comes a
// moment later all succeed.
func testZeroTimeouts(t *testing.T, e *env) {
	ctx, cancel := e.ctx()
	defer cancel()
	delay := e.h.Timeout / 5
	late := func(f func()) *time.Timer { return time.AfterFunc(delay, f) }

	// A direct modex with Timeout 0 of rank 2, whose node contributes a
	// moment later, to a fence where node 0 waits with Timeout 0.
	modex := make(chan error, 1)
	go func() {
		_, err := e.nodes[0].DirectModex(ctx, &plugin.ModexRequest{Proc: e.proc(2), Requestor: e.proc(0), Timeout: 0})
		modex <- err
	}()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range e.nodes {
		req := e.fenceRequest("world/1", i, []byte("zero-"+strconv.Itoa(i)+";"), false)
		req.Timeout = 0
		wg.Add(1)
		call := func() { defer wg.Done(); _, errs[i] = b.Fence(ctx, req) }
		if i == 0 {
			go call()
		} else {
			defer late(call).Stop()
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fence world/1 with a zero Timeout, node n1 arriving %s after node n0: node %d: %v; a zero Timeout means plugin.DefaultFenceTimeout", delay, i, err)
		}
	}
	if err := <-modex; err != nil {
		t.Errorf("DirectModex of rank 2 with a zero Timeout, its node contributing %s later: %v; a zero Timeout means plugin.DefaultFenceTimeout", delay, err)
	}

	// A waiting lookup with Timeout 0 of a name published a moment later.
	if !e.has(plugin.CapPublish) {
		return
	}
	key := "zero-" + e.job.Nspace
	found := make(chan error, 1)
	go func() {
		_, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}, Wait: true, Timeout: 0})
		found <- err
	}()
	defer late(func() {
		_ = e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port"}}})
	}).Stop()
	if err := <-found; err != nil {
		t.Errorf("waiting Lookup(%s) with a zero Timeout, published %s later: %v; a zero Timeout means plugin.DefaultLookupTimeout", key, delay, err)
	}
	_ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}})
}

func testFenceCancel(t *testing.T, e *env) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := e.fenceRequest("world/1", 0, []byte("waiting"), true)
	// Long enough that only the cancellation can end the call.
	req.Timeout = time.Hour
	var cancelled atomic.Int64
	// Cancel shortly after the call starts; whether the backend sees it
	// while waiting or on entry, the call must return promptly.
	timer := time.AfterFunc(e.h.Timeout/10, func() {
		cancelled.Store(time.Now().UnixNano())
		cancel()
	})
	defer timer.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := e.nodes[0].Fence(ctx, req)
		done <- err
	}()
	limit := e.h.Timeout + 2*time.Second
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("cancelled fence: no error")
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, plugin.ErrAborted) {
			t.Errorf("cancelled fence: %v; want an error wrapping context.Canceled or plugin.ErrAborted", err)
		}
		if at := cancelled.Load(); at != 0 {
			if lag := time.Since(time.Unix(0, at)); lag > time.Second {
				t.Errorf("cancelled fence returned %s after the cancellation; want promptly", lag)
			}
		}
	case <-time.After(limit):
		t.Fatalf("cancelled fence did not return in %s", limit)
	}
}

func testFenceModex(t *testing.T, e *env) {
	data := [][]byte{[]byte("modex-node0;"), []byte("modex-node1;")}
	for i, r := range e.fenceAll(t, "world/1", data, false) {
		if len(r.Data) != 0 {
			t.Errorf("non-collecting fence: node %d got %q; want no data", i, r.Data)
		}
	}
	ctx, cancel := e.ctx()
	defer cancel()
	for _, c := range []struct {
		from   int
		target int32
		want   []byte
	}{{0, 2, data[1]}, {0, 3, data[1]}, {1, 0, data[0]}} {
		resp, err := e.nodes[c.from].DirectModex(ctx, &plugin.ModexRequest{
			Requestor: e.localProcs(c.from)[0],
			Proc:      e.proc(c.target),
			Timeout:   e.h.Timeout,
		})
		if err != nil {
			t.Errorf("node %d: DirectModex(rank %d): %v%s", c.from, c.target, err, e.explain(err))
			continue
		}
		if !bytes.Equal(resp.Data, c.want) {
			t.Errorf("node %d: DirectModex(rank %d) = %q; want %q (its node's fence data)", c.from, c.target, resp.Data, c.want)
		}
	}
}

// testModexTimeout: a direct modex of a rank whose node never
// contributed fails with ErrTimeout after about its Timeout, naming the
// node or the rank.
func testModexTimeout(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.h.Timeout+time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.nodes[0].DirectModex(ctx, &plugin.ModexRequest{Requestor: e.proc(0), Proc: e.proc(2), Timeout: e.h.Timeout})
	switch {
	case ctx.Err() != nil:
		t.Fatalf("DirectModex(rank 2) of a node that never contributed returned only when its context ended after %s (%v); want ErrTimeout after its Timeout %s",
			time.Since(start).Round(time.Millisecond), err, e.h.Timeout)
	case !errors.Is(err, plugin.ErrTimeout):
		t.Errorf("DirectModex(rank 2) of a node that never contributed: %v; want an error wrapping plugin.ErrTimeout", err)
	case !namesMissing(err.Error(), e.job.Nspace):
		t.Errorf("DirectModex(rank 2) of a node that never contributed: message %q names neither node n1 nor rank 2", err)
	}
}

// testModexWholeJob: a direct modex of RankWildcard (a PMI-1 get names no
// owner) brings every other node's data.
func testModexWholeJob(t *testing.T, e *env) {
	data := [][]byte{[]byte("whole-n0;"), []byte("whole-n1;")}
	e.fenceAll(t, "world/1", data, false)
	ctx, cancel := e.ctx()
	defer cancel()
	resp, err := e.nodes[0].DirectModex(ctx, &plugin.ModexRequest{Requestor: e.proc(0), Proc: e.proc(plugin.RankWildcard), Timeout: e.h.Timeout})
	if err != nil {
		t.Fatalf("DirectModex(the whole job): %v%s", err, e.explain(err))
	}
	if !bytes.Contains(resp.Data, data[1]) {
		t.Errorf("DirectModex(the whole job) from node n0 = %q; want node n1's data %q in it", resp.Data, data[1])
	}
}

// testModexUnknownJob: a direct modex of a job the backend never heard of
// fails at once with ErrNotFound naming it.
func testModexUnknownJob(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.h.Timeout+time.Second)
	defer cancel()
	unknown := "unknown-" + e.job.Nspace
	start := time.Now()
	_, err := e.nodes[0].DirectModex(ctx, &plugin.ModexRequest{Requestor: e.proc(0), Proc: plugin.Proc{Nspace: unknown, Rank: 0}, Timeout: e.h.Timeout})
	elapsed := time.Since(start)
	if !errors.Is(err, plugin.ErrNotFound) || !strings.Contains(err.Error(), unknown) {
		t.Errorf("DirectModex of unknown job %s: %v; want an error wrapping plugin.ErrNotFound that names the job", unknown, err)
	}
	if elapsed > e.h.Timeout/2 {
		t.Errorf("DirectModex of unknown job %s took %s; want the answer at once", unknown, elapsed.Round(time.Millisecond))
	}
}

func testNameService(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	// Keys carry the namespace: names may be visible to every job.
	key := "service-" + e.job.Nspace
	pub := &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port-0"}}}
	if err := e.nodes[0].Publish(ctx, pub); err != nil {
		t.Fatalf("Publish(%s): %v", key, err)
	}
	dup := &plugin.PublishRequest{Proc: e.proc(2), Data: []plugin.Info{{Key: key, Value: "port-2"}}}
	if err := e.nodes[1].Publish(ctx, dup); !errors.Is(err, plugin.ErrAlreadyExists) {
		t.Errorf("Publish(%s) again: %v; want an error wrapping plugin.ErrAlreadyExists", key, err)
	}

	// From the other node, as a daemon-style backend must allow.
	resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}})
	if err != nil {
		t.Fatalf("Lookup(%s): %v", key, err)
	}
	want := []plugin.Published{{Key: key, Value: "port-0", Publisher: e.proc(0)}}
	if !slices.Equal(resp.Data, want) {
		t.Errorf("Lookup(%s) = %+v; want %+v", key, resp.Data, want)
	}

	missing := "missing-" + e.job.Nspace
	if _, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(0), Keys: []string{missing}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) of a name never published: %v; want an error wrapping plugin.ErrNotFound", missing, err)
	}

	// A waiting lookup gets a name published after it started (or, if the
	// publish wins the race, before: both must work).
	later := "later-" + e.job.Nspace
	type result struct {
		resp *plugin.LookupResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		r, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(3), Keys: []string{later}, Wait: true, Timeout: 2 * e.h.Timeout})
		got <- result{r, err}
	}()
	published := make(chan error, 1)
	timer := time.AfterFunc(e.h.Timeout/10, func() {
		published <- e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(1), Data: []plugin.Info{{Key: later, Value: "port-1"}}})
	})
	defer timer.Stop()
	if err := <-published; err != nil {
		t.Fatalf("Publish(%s): %v", later, err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiting Lookup(%s): %v", later, r.err)
		}
		want := []plugin.Published{{Key: later, Value: "port-1", Publisher: e.proc(1)}}
		if !slices.Equal(r.resp.Data, want) {
			t.Errorf("waiting Lookup(%s) = %+v; want %+v", later, r.resp.Data, want)
		}
	case <-ctx.Done():
		t.Fatalf("waiting Lookup(%s) did not return", later)
	}

	if err := e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}}); err != nil {
		t.Fatalf("Unpublish(%s): %v", key, err)
	}
	if _, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) after Unpublish: %v; want an error wrapping plugin.ErrNotFound", key, err)
	}
	// Leave nothing behind in a long-lived daemon.
	if err := e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(1), Keys: []string{later}}); err != nil {
		t.Errorf("Unpublish(%s): %v", later, err)
	}
}

// unknownInfo is a directive no backend knows.
const unknownInfo = "gopmi.conformance.no-such-directive"

// testNameUnknownInfo: a directive the backend does not know is refused
// with ErrNotSupported naming it, by Publish (which then publishes
// nothing), Lookup and Unpublish; none is silently ignored.
func testNameUnknownInfo(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	key := "directive-" + e.job.Nspace
	info := []plugin.Info{{Key: unknownInfo, Value: "1"}}
	refused := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, plugin.ErrNotSupported) || !strings.Contains(err.Error(), unknownInfo) {
			t.Errorf("%s with info key %q: %v; want an error wrapping plugin.ErrNotSupported that names the key", call, unknownInfo, err)
		}
	}
	refused("Publish", e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port"}}, Info: info}))
	if resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) after a refused Publish: %+v, %v; want an error wrapping plugin.ErrNotFound", key, resp, err)
		_ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}})
	}
	_, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}, Info: info})
	refused("Lookup", err)
	refused("Unpublish", e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}, Info: info}))
}

// publishOrRefuse publishes req. A backend may refuse a Range or
// Persistence it does not implement, with ErrNotSupported: then the case
// has nothing more to check and publishOrRefuse reports false.
func publishOrRefuse(t *testing.T, ctx context.Context, b plugin.Full, what string, req *plugin.PublishRequest) bool {
	t.Helper()
	err := b.Publish(ctx, req)
	switch {
	case err == nil:
		return true
	case errors.Is(err, plugin.ErrNotSupported):
		t.Logf("the backend refuses %s, as it may: %v", what, err)
		return false
	default:
		t.Fatalf("Publish with %s: %v; want success, or an error wrapping plugin.ErrNotSupported", what, err)
		return false
	}
}

// testNamePersistFirstRead: a PersistFirstRead name is gone after the
// first lookup that returns it.
func testNamePersistFirstRead(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	key := "once-" + e.job.Nspace
	if !publishOrRefuse(t, ctx, e.nodes[0], "PersistFirstRead", &plugin.PublishRequest{
		Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port-0"}}, Persistence: plugin.PersistFirstRead}) {
		return
	}
	resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}})
	if err != nil || len(resp.Data) != 1 || resp.Data[0].Value != "port-0" {
		t.Fatalf("first Lookup(%s) of a PersistFirstRead name: %+v, %v; want port-0", key, resp, err)
	}
	if resp, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(1), Keys: []string{key}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("second Lookup(%s) of a PersistFirstRead name: %+v, %v; want an error wrapping plugin.ErrNotFound: the first read removes it", key, resp, err)
		_ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}})
	}
}

// testNameRangeNamespace: a RangeNamespace name is seen by its job, on
// every node, and by no other job.
func testNameRangeNamespace(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	other := newEnv(t, e.h, e.overGRPC)
	key := "job-only-" + e.job.Nspace
	if !publishOrRefuse(t, ctx, e.nodes[0], "RangeNamespace", &plugin.PublishRequest{
		Proc: e.proc(0), Data: []plugin.Info{{Key: key, Value: "port-0"}}, Range: plugin.RangeNamespace}) {
		return
	}
	defer func() { _ = e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0), Keys: []string{key}}) }()
	resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(2), Keys: []string{key}, Range: plugin.RangeNamespace})
	if err != nil || len(resp.Data) != 1 || resp.Data[0].Value != "port-0" {
		t.Errorf("Lookup(%s) by its own job on the other node: %+v, %v; want port-0", key, resp, err)
	}
	resp, err = other.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: other.proc(2), Keys: []string{key}})
	if !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Lookup(%s) by job %s, another job: %+v, %v; want an error wrapping plugin.ErrNotFound: the name's range is its publisher's job", key, other.job.Nspace, resp, err)
	}
}

// testUnpublishWithoutKeys: an Unpublish that names no key removes every
// name its Proc published, and only those.
func testUnpublishWithoutKeys(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	mine := []string{"all-a-" + e.job.Nspace, "all-b-" + e.job.Nspace}
	theirs := "all-c-" + e.job.Nspace
	if err := e.nodes[0].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(0), Data: []plugin.Info{{Key: mine[0], Value: "a"}, {Key: mine[1], Value: "b"}}}); err != nil {
		t.Fatalf("Publish(%v): %v", mine, err)
	}
	if err := e.nodes[1].Publish(ctx, &plugin.PublishRequest{Proc: e.proc(2), Data: []plugin.Info{{Key: theirs, Value: "c"}}}); err != nil {
		t.Fatalf("Publish(%s): %v", theirs, err)
	}
	defer func() {
		_ = e.nodes[1].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(2), Keys: []string{theirs}})
	}()
	if err := e.nodes[0].Unpublish(ctx, &plugin.UnpublishRequest{Proc: e.proc(0)}); err != nil {
		t.Fatalf("Unpublish of every name of %s: %v", e.proc(0), err)
	}
	for _, k := range mine {
		if resp, err := e.nodes[1].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(3), Keys: []string{k}}); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("Lookup(%s) after its publisher unpublished without keys: %+v, %v; want an error wrapping plugin.ErrNotFound", k, resp, err)
		}
	}
	if resp, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(1), Keys: []string{theirs}}); err != nil || len(resp.Data) != 1 {
		t.Errorf("Lookup(%s), published by %s, after %s unpublished without keys: %+v, %v; want it still published", theirs, e.proc(2), e.proc(0), resp, err)
	}
}

// testLookupWaitTimeout: a waiting lookup of a name nobody publishes
// fails with ErrTimeout naming the name, after about its Timeout.
func testLookupWaitTimeout(t *testing.T, e *env) {
	if !e.has(plugin.CapPublish) {
		t.Skipf("backend does not advertise %q", plugin.CapPublish)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.h.Timeout+time.Second)
	defer cancel()
	never := "never-" + e.job.Nspace
	start := time.Now()
	_, err := e.nodes[0].Lookup(ctx, &plugin.LookupRequest{Proc: e.proc(0), Keys: []string{never}, Wait: true, Timeout: e.h.Timeout})
	switch {
	case ctx.Err() != nil:
		t.Fatalf("waiting Lookup(%s) returned only when its context ended after %s (%v); want ErrTimeout after its Timeout %s",
			never, time.Since(start).Round(time.Millisecond), err, e.h.Timeout)
	case !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), never):
		t.Errorf("waiting Lookup(%s) of a name nobody publishes: %v; want an error wrapping plugin.ErrTimeout that names it", never, err)
	}
}

// testConnect connects the case's job with a second job made the same
// way, as PMI-2 job-connect does from each side, and disconnects them;
// a job the backend never heard of must be named in an ErrNotFound.
func testConnect(t *testing.T, e *env) {
	if !e.has(plugin.CapConnect) {
		t.Skipf("backend does not advertise %q", plugin.CapConnect)
	}
	other := newEnv(t, e.h, e.overGRPC)
	ctx, cancel := e.ctx()
	defer cancel()
	whole := func(nss ...string) []plugin.Proc {
		var ps []plugin.Proc
		for _, ns := range nss {
			ps = append(ps, plugin.Proc{Nspace: ns, Rank: plugin.RankWildcard})
		}
		return ps
	}

	unknown := "unknown-" + e.job.Nspace
	_, err := e.nodes[0].Connect(ctx, &plugin.ConnectRequest{Procs: whole(e.job.Nspace, unknown), Timeout: e.h.Timeout})
	if !errors.Is(err, plugin.ErrNotFound) || !strings.Contains(err.Error(), unknown) {
		t.Errorf("Connect of unknown job %s: %v; want an error wrapping plugin.ErrNotFound that names the job", unknown, err)
	}

	// Each side connects on its own: job-connect is not a collective.
	sides := []struct {
		b     plugin.Full
		procs []plugin.Proc
	}{
		{e.nodes[0], whole(e.job.Nspace, other.job.Nspace)},
		{other.nodes[1], whole(other.job.Nspace, e.job.Nspace)},
	}
	for _, s := range sides {
		resp, err := s.b.Connect(ctx, &plugin.ConnectRequest{Procs: s.procs, Timeout: e.h.Timeout})
		if err != nil {
			t.Fatalf("Connect(%v): %v", s.procs, err)
		}
		if resp == nil || resp.ID == "" {
			t.Errorf("Connect(%v) = %+v; want a response with an ID", s.procs, resp)
		}
	}
	for _, s := range sides {
		if err := s.b.Disconnect(ctx, &plugin.DisconnectRequest{Procs: s.procs, Timeout: e.h.Timeout}); err != nil {
			t.Errorf("Disconnect(%v) after Connect: %v", s.procs, err)
		}
	}
}

func testCapabilities(t *testing.T, e *env) {
	b := e.nodes[0]
	p := e.proc(0)
	unknown := "conformance-" + e.job.Nspace
	calls := []struct {
		capName string
		name    string
		call    func(ctx context.Context) error
	}{
		{plugin.CapPublish, "Publish", func(ctx context.Context) error {
			// A name another case will not look for; removed below.
			return b.Publish(ctx, &plugin.PublishRequest{Proc: p, Data: []plugin.Info{{Key: unknown, Value: "v"}}})
		}},
		{plugin.CapPublish, "Lookup", func(ctx context.Context) error {
			_, err := b.Lookup(ctx, &plugin.LookupRequest{Proc: p, Keys: []string{unknown}})
			return err
		}},
		{plugin.CapPublish, "Unpublish", func(ctx context.Context) error {
			return b.Unpublish(ctx, &plugin.UnpublishRequest{Proc: p, Keys: []string{unknown}})
		}},
		// Requests a backend cannot carry out (no apps, no procs) so that
		// an advertised capability does nothing but answer.
		{plugin.CapSpawn, "Spawn", func(ctx context.Context) error {
			_, err := b.Spawn(ctx, &plugin.SpawnRequest{Requestor: p, Timeout: e.h.Timeout})
			return err
		}},
		{plugin.CapConnect, "Connect", func(ctx context.Context) error {
			_, err := b.Connect(ctx, &plugin.ConnectRequest{Timeout: e.h.Timeout})
			return err
		}},
		{plugin.CapConnect, "Disconnect", func(ctx context.Context) error {
			return b.Disconnect(ctx, &plugin.DisconnectRequest{Timeout: e.h.Timeout})
		}},
		{plugin.CapQuery, "Query", func(ctx context.Context) error {
			_, err := b.Query(ctx, &plugin.QueryRequest{Proc: p, Queries: []plugin.Query{{Keys: []string{unknown}}}})
			return err
		}},
		{plugin.CapLog, "Log", func(ctx context.Context) error {
			return b.Log(ctx, &plugin.LogRequest{Proc: p, Data: []plugin.Info{{Key: "conformance", Value: "log line from the gopmi conformance suite"}}})
		}},
		{plugin.CapNotify, "NotifyEvent", func(ctx context.Context) error {
			return b.NotifyEvent(ctx, &plugin.EventRequest{Code: plugin.EventCode(unknown), Source: p})
		}},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 2*e.h.Timeout+5*time.Second)
		err := c.call(ctx)
		cancel()
		if e.has(c.capName) {
			if errors.Is(err, plugin.ErrNotSupported) {
				t.Errorf("%s: %v; capability %q is advertised, so it must not answer plugin.ErrNotSupported", c.name, err, c.capName)
			}
		} else if !errors.Is(err, plugin.ErrNotSupported) {
			t.Errorf("%s: %v; capability %q is not advertised, so it must answer plugin.ErrNotSupported", c.name, err, c.capName)
		}
	}
}

// testAbortFailsWaits: an Abort of a job fails its pending waits at once
// with ErrAborted; nothing of an aborted job may hang until its time-out.
func testAbortFailsWaits(t *testing.T, e *env) {
	ctx, cancel := e.ctx()
	defer cancel()
	req := e.fenceRequest("world/1", 0, []byte("waiting"), true)
	req.Timeout = 10 * e.h.Timeout
	done := make(chan error, 1)
	go func() {
		_, err := e.nodes[0].Fence(ctx, req)
		done <- err
	}()
	time.Sleep(e.h.Timeout / 5) // let the fence start waiting
	if err := e.nodes[1].Abort(ctx, &plugin.AbortRequest{Proc: e.proc(2), Status: 3, Message: "conformance: abort"}); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, plugin.ErrAborted) {
			t.Errorf("fence pending when its job aborted: %v; want an error wrapping plugin.ErrAborted", err)
		}
	case <-time.After(2 * e.h.Timeout):
		t.Errorf("fence pending when its job aborted was still waiting %s later; want ErrAborted at once", 2*e.h.Timeout)
	}

	// Later calls of the aborted job that would wait fail at once too.
	later := e.fenceRequest("world/2", 0, []byte("after the abort"), true)
	later.Timeout = 10 * e.h.Timeout
	modex := &plugin.ModexRequest{Proc: e.proc(2), Requestor: e.proc(0), Timeout: 10 * e.h.Timeout}
	calls := []struct {
		what string
		call func(context.Context) error
	}{
		{"fence world/2 after its job aborted", func(ctx context.Context) error { _, err := e.nodes[0].Fence(ctx, later); return err }},
		{"DirectModex of rank 2 after its job aborted", func(ctx context.Context) error { _, err := e.nodes[0].DirectModex(ctx, modex); return err }},
	}
	for _, c := range calls {
		cctx, ccancel := context.WithTimeout(ctx, 2*e.h.Timeout)
		err := c.call(cctx)
		ccancel()
		if !errors.Is(err, plugin.ErrAborted) {
			t.Errorf("%s: %v; want an error wrapping plugin.ErrAborted at once", c.what, err)
		}
	}
}

func testAbort(t *testing.T, e *env) {
	ctx, cancel := e.ctx()
	defer cancel()
	err := e.nodes[1].Abort(ctx, &plugin.AbortRequest{
		Proc:    e.proc(2),
		Status:  3,
		Message: "abort from the gopmi conformance suite",
	})
	if err != nil {
		t.Errorf("Abort: %v", err)
	}
}
