package plugintest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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
	plugin.CapQuery, plugin.CapLog, plugin.CapNotify, plugin.CapEvents, plugin.CapDepart,
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
	{"DepartKeepsData", testDepart},
	{"HandOverIsRead", testHandOver},
}, nameServiceCases, []conformanceCase{
	{"Connect", testConnect},
	{"Capabilities", testCapabilities},
	{"QueryVocabulary", testQueryVocabulary},
	{"Abort", testAbort},
	{"AbortFailsWaits", testAbortFailsWaits},
	{"Events", testEvents},
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

// RunQueries runs the query vocabulary's case alone (contract 1.1),
// against a backend reached for queries: the node daemon, say, through
// a run's client. Each node NewNode returns needs GetInfo (advertising
// CapQuery and listing APIVersion11), Configure and Query.
func RunQueries(t *testing.T, h Harness) {
	if h.NewNode == nil {
		t.Fatal("conformance: Harness.NewNode is nil")
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultTimeout
	}
	runCases(t, h, []conformanceCase{{"QueryVocabulary", testQueryVocabulary}})
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
	raw      []plugin.Backend    // what NewNode returned, per node
	info     *plugin.BackendInfo // node 0's GetInfo
}

// end ends node i's backend as its host's end would: a backend process
// (Plugin.Harness) is stopped, one NewNode returned that is an io.Closer
// is closed; a backend shared by the nodes in this process (a daemon's
// view) lives on, as it does for real.
func (e *env) end(t *testing.T, i int) {
	t.Helper()
	if c, ok := e.raw[i].(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Logf("node %d: close: %v", i, err)
		}
	}
}

func newEnv(t *testing.T, h Harness, overGRPC bool) *env {
	t.Helper()
	ns := fmt.Sprintf("conformance-%d-%d", time.Now().UnixNano(), jobSeq.Add(1))
	job := plugin.Job{
		Nspace:       ns,
		Size:         4,
		UniverseSize: 4,
		Nodes: []plugin.Node{
			// Both on this machine: a backend that links its nodes
			// to each other dials their Addr.
			{ID: 0, Name: "n0", Ranks: []int32{0, 1}, Addr: "127.0.0.1"},
			{ID: 1, Name: "n1", Ranks: []int32{2, 3}, Addr: "127.0.0.1"},
		},
		Apps: []plugin.App{{FirstRank: 0, Size: 4, Cmd: "conformance-app"}},
	}
	e := &env{h: h, overGRPC: overGRPC, job: job}
	for _, n := range job.Nodes {
		b := h.NewNode(t, job, n.ID)
		if b == nil {
			t.Fatalf("NewNode(%s, node %d) returned nil", ns, n.ID)
		}
		e.raw = append(e.raw, b)
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
		{plugin.CapEvents, "AwaitEvents", func(ctx context.Context) error {
			_, err := b.AwaitEvents(ctx, &plugin.AwaitEventsRequest{Nspace: e.job.Nspace, After: ^uint64(0)})
			return err
		}},
		{plugin.CapDepart, "Depart", func(ctx context.Context) error {
			return b.Depart(ctx, &plugin.DepartRequest{Procs: e.localProcs(0), Node: e.job.Nodes[0].Name})
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
