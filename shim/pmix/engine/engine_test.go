package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The engine's tests run without libpmix (fakeLib), a network or a real
// clock (crew.Fake): the backend is a fake that hands each call to the
// test, which answers it.

// ask is one of the engine's asks of libpmix for a client's data.
type ask struct {
	p  plugin.Proc
	id uint64
}

// fakeLib records what the engine asks of libpmix.
type fakeLib struct {
	asks      chan ask
	mu        sync.Mutex
	registers []string
	delivered []plugin.Event
}

func (l *fakeLib) AskData(p plugin.Proc, id uint64) error {
	l.asks <- ask{p, id}
	return nil
}

func (l *fakeLib) Register(job plugin.Job, ni int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.registers = append(l.registers, fmt.Sprintf("%s@%d", job.Nspace, ni))
	return nil
}

func (l *fakeLib) Deliver(code int, e plugin.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delivered = append(l.delivered, e)
	return nil
}

// call is a backend call the test answers.
type call struct {
	req    any
	answer chan any // a response or an error
}

// fakeBackend hands each call to the test (calls) and returns what the
// test answers. It does not keep events (AwaitEvents).
type fakeBackend struct {
	plugin.Unimplemented
	calls chan call
}

func (b *fakeBackend) do(ctx context.Context, req any) (any, error) {
	c := call{req: req, answer: make(chan any, 1)}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-c.answer:
		if err, ok := a.(error); ok {
			return nil, err
		}
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reply is do's answer as a response of type T.
func reply[T any](b *fakeBackend, ctx context.Context, req any) (*T, error) {
	a, err := b.do(ctx, req)
	if err != nil {
		return nil, err
	}
	return a.(*T), nil
}

func (b *fakeBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "fake"}, nil
}

func (b *fakeBackend) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	return reply[plugin.FenceResponse](b, ctx, req)
}

func (b *fakeBackend) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	return reply[plugin.ModexResponse](b, ctx, req)
}

func (b *fakeBackend) ClientConnected(ctx context.Context, req *plugin.ClientRequest) error {
	_, err := b.do(ctx, clientCall{"connected", req.Procs})
	return err
}

func (b *fakeBackend) ClientFinalized(ctx context.Context, req *plugin.ClientRequest) error {
	_, err := b.do(ctx, clientCall{"finalized", req.Procs})
	return err
}

func (b *fakeBackend) Depart(ctx context.Context, req *plugin.DepartRequest) error {
	_, err := b.do(ctx, req)
	return err
}

func (b *fakeBackend) AwaitEvents(context.Context, *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
	return nil, plugin.Errorf(plugin.ErrNotSupported, "no events here")
}

// clientCall is a ClientConnected or ClientFinalized call.
type clientCall struct {
	what  string
	procs []plugin.Proc
}

// rig is an engine on a fake libpmix, backend and clock.
type rig struct {
	t     *testing.T
	e     *Engine
	lib   *fakeLib
	be    *fakeBackend
	clock *crew.Fake
	crew  *crew.Crew
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, lib: &fakeLib{asks: make(chan ask, 64)}, be: &fakeBackend{calls: make(chan call)}, clock: crew.NewFake()}
	r.crew = crew.New(r.clock)
	r.e = New(Config{Backend: r.be, Lib: r.lib, Crew: r.crew, FenceTimeout: time.Minute, Logger: zerolog.Nop()})
	t.Cleanup(r.crew.Close)
	return r
}

// next is the backend's next call, within a real-time bound (a goroutine
// of the engine's makes it).
func (r *rig) next() call {
	r.t.Helper()
	select {
	case c := <-r.be.calls:
		return c
	case <-time.After(10 * time.Second):
		r.t.Fatal("the engine made no backend call")
		return call{}
	}
}

// none checks that the engine makes no backend call for a while.
func (r *rig) none(when string) {
	r.t.Helper()
	select {
	case c := <-r.be.calls:
		r.t.Fatalf("%s: the engine called the backend with %+v", when, c.req)
	case <-time.After(50 * time.Millisecond):
	}
}

// nextAsk is the engine's next ask of libpmix.
func (r *rig) nextAsk() ask {
	r.t.Helper()
	select {
	case a := <-r.lib.asks:
		return a
	case <-time.After(10 * time.Second):
		r.t.Fatal("the engine asked libpmix for no data")
		return ask{}
	}
}

// armed waits until n timers are armed on the fake clock (a goroutine of
// the engine's arms them).
func (r *rig) armed(n int) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.clock.Armed() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d timers armed, want %d", r.clock.Armed(), n)
		}
	}
}

// twoNodes is a job of 4 ranks, 0-1 on node a (this one), 2-3 on b.
func twoNodes(ns string) plugin.Job {
	return plugin.Job{Nspace: ns, Size: 4, UniverseSize: 4, Nodes: []plugin.Node{
		{ID: 0, Name: "a", Ranks: []int32{1, 0}}, {ID: 1, Name: "b", Ranks: []int32{2, 3}}}}
}

func proc(ns string, r int32) plugin.Proc { return plugin.Proc{Nspace: ns, Rank: r} }

// Every node names a fence alike: by its set of processes and how many
// fences of that set came before, a fence whose local part failed
// counted too; its local procs are this node's among them.
func TestFenceNaming(t *testing.T) {
	r := newRig(t)
	job := twoNodes("names")
	job.Nodes = job.Nodes[:1]
	job.Nodes[0].Ranks = []int32{0, 1, 2, 3}
	r.e.Host(job, 0)
	world := []plugin.Proc{proc("names", plugin.RankWildcard)}
	pair := []plugin.Proc{proc("names", 3), proc("names", 1)}
	answered := make(chan error, 8)
	done := func(_ []Frame, err error) { answered <- err }
	var ids []string
	fence := func(procs []plugin.Proc, skip bool) {
		t.Helper()
		if err := r.e.Fence(FenceCall{Procs: procs, Collect: true, Skip: skip}, done); err != nil {
			t.Fatal(err)
		}
		if skip {
			return
		}
		c := r.next()
		req := c.req.(*plugin.FenceRequest)
		ids = append(ids, req.ID)
		switch {
		case slices.Equal(procs, world) && len(req.LocalProcs) != 4,
			!slices.Equal(procs, world) && !slices.Equal(req.LocalProcs, []plugin.Proc{proc("names", 1), proc("names", 3)}):
			t.Errorf("fence %s: local procs %v", req.ID, req.LocalProcs)
		}
		if req.Node != "a" || req.Timeout != time.Minute || !req.Collect {
			t.Errorf("fence %s: %+v", req.ID, req)
		}
		c.answer <- &plugin.FenceResponse{}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
	}
	fence(world, false)
	fence(pair, false)
	fence(world, true) // its local part failed: counted, not run
	fence(world, false)
	fence([]plugin.Proc{proc("names", 1), proc("names", 3)}, false) // the same set, named in another order
	set := func(id string) string { return id[:strings.LastIndexByte(id, '/')] }
	if len(ids) != 4 || set(ids[0]) != set(ids[2]) || set(ids[1]) != set(ids[3]) || set(ids[0]) == set(ids[1]) {
		t.Fatalf("fence IDs %q: want the world's and the pair's sets apart, each named alike whatever the order", ids)
	}
	for i, want := range []string{"/0", "/0", "/2", "/1"} {
		if !strings.HasSuffix(ids[i], want) {
			t.Errorf("fence %d is %s; want its set's fence %s", i, ids[i], want)
		}
	}
}

// A fence that times out at the run's time-out ends the job; one that
// times out at the clients' own (PMIX_TIMEOUT) is theirs to handle.
func TestFenceTimeoutEndsTheJob(t *testing.T) {
	r := newRig(t)
	job := twoNodes("late")
	r.e.Host(job, 0)
	for _, theirs := range []time.Duration{3 * time.Second, 0} {
		answered := make(chan error, 1)
		if err := r.e.Fence(FenceCall{Procs: []plugin.Proc{proc("late", plugin.RankWildcard)}, Collect: true, Timeout: theirs},
			func(_ []Frame, err error) { answered <- err }); err != nil {
			t.Fatal(err)
		}
		c := r.next()
		if req := c.req.(*plugin.FenceRequest); (theirs > 0 && req.Timeout != theirs) || (theirs == 0 && req.Timeout != time.Minute) {
			t.Errorf("a fence with time-out %v went with %v", theirs, req.Timeout)
		}
		c.answer <- plugin.Errorf(plugin.ErrTimeout, "fence: ranks 2-3 never arrived")
		if err := <-answered; !errors.Is(err, plugin.ErrTimeout) {
			t.Fatalf("the clients were answered %v", err)
		}
		if theirs > 0 {
			// The engine answered; it fails the job, if at all, on the
			// same goroutine right after.
			select {
			case <-r.e.Failed():
				t.Fatal("a fence that timed out at the clients' own time-out failed the job")
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case <-r.e.Failed():
			if !errors.Is(r.e.Err(), plugin.ErrTimeout) {
				t.Errorf("the job failed with %v", r.e.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a fence that timed out at the run's time-out left the job running")
		}
	}
}

// A multi-node job's clients' first commits are handed over together,
// handOverDelay after the first; a later commit is handed over at the
// next check, unchanged data not again; a fence that collects nothing
// carries what changed since, and a client that fenced is asked no more.
func TestCommitsHandedOver(t *testing.T) {
	r := newRig(t)
	const ns = "commits"
	r.e.Host(twoNodes(ns), 0)
	watches := map[plugin.Proc]uint64{}
	for range 2 {
		a := r.nextAsk()
		watches[a.p] = a.id
	}
	if len(watches) != 2 {
		t.Fatalf("the engine watched %v; want ranks 0 and 1", watches)
	}
	r.e.DataAnswer(watches[proc(ns, 0)], []byte("r0-a"), true)
	r.e.DataAnswer(watches[proc(ns, 1)], []byte("r1-a"), true)
	r.none("before handOverDelay")
	r.clock.Advance(handOverDelay)
	c := r.next()
	req := c.req.(*plugin.FenceRequest)
	if !req.HandOver || req.Collect || req.Node != "a" || req.ID != "pmix:modex:a/1" || len(req.LocalProcs) != 2 {
		t.Fatalf("the first hand-over: %+v", req)
	}
	for rank, want := range []string{"r0-a", "r1-a"} {
		if got, err := DataOf(req.Data, proc(ns, int32(rank))); err != nil || string(got) != want {
			t.Errorf("rank %d's data in the hand-over: %q (%v); want %q", rank, got, err, want)
		}
	}
	c.answer <- &plugin.FenceResponse{}

	// The first check: rank 1 committed again, rank 0 did not.
	r.armed(1)
	r.clock.Advance(lateCommitChecks[0])
	asked := map[plugin.Proc]uint64{}
	for range 2 {
		a := r.nextAsk()
		asked[a.p] = a.id
	}
	r.e.DataAnswer(asked[proc(ns, 0)], []byte("r0-a"), true)
	r.e.DataAnswer(asked[proc(ns, 1)], []byte("r1-b"), true)
	c = r.next()
	req = c.req.(*plugin.FenceRequest)
	r0, _ := DataOf(req.Data, proc(ns, 0))
	r1, _ := DataOf(req.Data, proc(ns, 1))
	if !req.HandOver || req.ID != "pmix:modex:a/2" || r0 != nil || string(r1) != "r1-b" {
		t.Fatalf("the later commit's hand-over: %+v (rank 0 %q, rank 1 %q); want rank 1's new data alone", req, r0, r1)
	}
	c.answer <- &plugin.FenceResponse{}

	// Rank 0 and 1 fence without collecting: the fence carries what
	// changed (rank 0's), and then neither is asked again.
	r.armed(1)
	answered := make(chan error, 1)
	if err := r.e.Fence(FenceCall{Procs: []plugin.Proc{proc(ns, plugin.RankWildcard)}}, func(_ []Frame, err error) { answered <- err }); err != nil {
		t.Fatal(err)
	}
	asked = map[plugin.Proc]uint64{}
	for range 2 {
		a := r.nextAsk()
		asked[a.p] = a.id
	}
	r.e.DataAnswer(asked[proc(ns, 0)], []byte("r0-c"), true)
	r.e.DataAnswer(asked[proc(ns, 1)], []byte("r1-b"), true)
	c = r.next()
	req = c.req.(*plugin.FenceRequest)
	r0, _ = DataOf(req.Data, proc(ns, 0))
	r1, _ = DataOf(req.Data, proc(ns, 1))
	if req.HandOver || req.Collect || string(r0) != "r0-c" || r1 != nil {
		t.Fatalf("the fence that collects nothing: %+v (rank 0 %q, rank 1 %q); want rank 0's new data alone", req, r0, r1)
	}
	c.answer <- &plugin.FenceResponse{}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(lateCommitChecks[1])
	select {
	case a := <-r.lib.asks:
		t.Fatalf("after their fence, the engine still asked for %v's data", a.p)
	case <-time.After(50 * time.Millisecond):
	}
}

// A fence that collects nothing waits dataWait at most for a client's
// data: one that never answers is left out.
func TestFenceLeavesOutASilentClient(t *testing.T) {
	r := newRig(t)
	const ns = "silent"
	r.e.Host(twoNodes(ns), 0)
	watches := map[plugin.Proc]uint64{}
	for range 2 {
		a := r.nextAsk()
		watches[a.p] = a.id
	}
	r.e.DataAnswer(watches[proc(ns, 0)], []byte("r0"), true)
	r.e.DataAnswer(watches[proc(ns, 1)], []byte("r1"), true)
	r.clock.Advance(handOverDelay)
	c := r.next()
	c.answer <- &plugin.FenceResponse{}
	r.armed(1) // the first late check
	if err := r.e.Fence(FenceCall{Procs: []plugin.Proc{proc(ns, plugin.RankWildcard)}}, func([]Frame, error) {}); err != nil {
		t.Fatal(err)
	}
	asked := map[plugin.Proc]uint64{}
	for range 2 {
		a := r.nextAsk()
		asked[a.p] = a.id
	}
	r.e.DataAnswer(asked[proc(ns, 1)], []byte("r1-new"), true)
	r.armed(2) // the late check (which finds them fenced) and the data's wait
	r.clock.Advance(dataWait)
	c = r.next()
	req := c.req.(*plugin.FenceRequest)
	r0, _ := DataOf(req.Data, proc(ns, 0))
	r1, _ := DataOf(req.Data, proc(ns, 1))
	if r0 != nil || string(r1) != "r1-new" {
		t.Errorf("the fence carried rank 0 %q and rank 1 %q; want rank 1's alone", r0, r1)
	}
	c.answer <- &plugin.FenceResponse{}
	r.e.DataAnswer(asked[proc(ns, 0)], []byte("too late"), true) // dropped
}

// Every local client's finalize is reported after its connect, and only
// once the backend heard it does the client return; the node's last
// client of a multi-node job hands its data over first, and the job's
// wait (Finalized) ends with the last.
func TestFinalizeAccounting(t *testing.T) {
	r := newRig(t)
	const ns = "fin"
	done := r.e.Finalized(ns)
	r.e.Host(twoNodes(ns), 0)
	for range 2 {
		r.nextAsk() // the commit watches
	}
	returned := make(chan plugin.Proc, 2)
	for rank := range int32(2) {
		r.e.ClientConnected(proc(ns, rank))
	}
	c := r.next()
	conn := c.req.(clientCall)
	if !r.e.ClientFinalized(proc(ns, 0), func() { returned <- proc(ns, 0) }) {
		t.Fatal("a finalize was answered at once")
	}
	select {
	case p := <-returned:
		t.Fatalf("%v returned from its finalize before the backend heard its connect", p)
	case <-time.After(20 * time.Millisecond):
	}
	c.answer <- nil
	if conn.what != "connected" {
		t.Fatalf("the first report: %+v", conn)
	}
	if len(conn.procs) == 1 { // the second connect went in a call of its own
		c = r.next()
		c.answer <- nil
	}
	c = r.next()
	if fin := c.req.(clientCall); fin.what != "finalized" || !slices.Equal(fin.procs, []plugin.Proc{proc(ns, 0)}) {
		t.Fatalf("the report after the connects: %+v", fin)
	}
	c.answer <- nil
	if p := <-returned; p != proc(ns, 0) {
		t.Fatalf("%v returned", p)
	}
	select {
	case <-done:
		t.Fatal("the job's wait ended with a client yet to finalize")
	default:
	}
	r.e.ClientFinalized(proc(ns, 1), func() { returned <- proc(ns, 1) })
	c = r.next()
	c.answer <- nil
	c = r.next()
	dep, ok := c.req.(*plugin.DepartRequest)
	if !ok || dep.Node != "a" || len(dep.Procs) != 2 {
		t.Fatalf("the last finalize's call after its report: %+v; want the node's hand-over (Depart)", c.req)
	}
	select {
	case <-returned:
		t.Fatal("the last client returned before its node's data was handed over")
	case <-time.After(20 * time.Millisecond):
	}
	c.answer <- nil
	<-returned
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the job's wait did not end with its last finalize")
	}
}

// A direct modex asks again, backing off on the clock, until the
// process's server handed its data over; data without the key libpmix
// needs is waited on for keyWait, then given as it is.
func TestDirectModexWaitsForData(t *testing.T) {
	r := newRig(t)
	r.e.Host(twoNodes("mine"), 0)
	for range 2 {
		r.nextAsk()
	}
	other := proc("theirs", 5)
	got := make(chan []byte, 1)
	if err := r.e.DirectModex(other, 0, "btl.tcp", func(d []byte, err error) {
		if err != nil {
			t.Error(err)
		}
		got <- d
	}); err != nil {
		t.Fatal(err)
	}
	answer := func(data []byte) {
		t.Helper()
		c := r.next()
		if req := c.req.(*plugin.ModexRequest); req.Proc != other || req.Timeout != time.Minute {
			t.Fatalf("direct modex request %+v", req)
		}
		c.answer <- &plugin.ModexResponse{Data: data}
	}
	answer(nil) // not handed over yet
	r.armed(1)
	r.clock.Advance(modexPoll)
	early := appendDmodex(nil, "theirs", 5, 1, []byte("shm\x00"))
	answer(early) // without the key
	r.armed(1)
	r.clock.Advance(2 * modexPoll)
	answer(appendDmodex(early, "theirs", 5, 2, []byte("shm\x00btl.tcp\x00")))
	if d := <-got; string(d) != "shm\x00btl.tcp\x00" {
		t.Errorf("direct modex gave %q; want the newer data, with the key", d)
	}
	if err := r.e.DirectModex(proc("theirs", plugin.RankWildcard), 0, "", nil); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("a direct modex of another job's job-level data: %v; want not found at once", err)
	}
}

// Once the crew closes, calls are refused (ErrClosed), and a finalize is
// still reported, bounded, before the client is answered.
func TestClosedEngineRefuses(t *testing.T) {
	r := newRig(t)
	r.crew.Close()
	if err := r.e.Fence(FenceCall{Procs: []plugin.Proc{proc("x", plugin.RankWildcard)}}, func([]Frame, error) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("a fence after close: %v", err)
	}
	heard := make(chan struct{})
	go func() {
		c := r.next()
		c.answer <- nil
		close(heard)
	}()
	if r.e.ClientFinalized(proc("x", 0), func() {}) {
		t.Error("a finalize after close was left for later")
	}
	<-heard
}

func (b *fakeBackend) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	return reply[plugin.QueryResponse](b, ctx, req)
}

func (b *fakeBackend) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	return reply[plugin.ConnectResponse](b, ctx, req)
}

func (b *fakeBackend) Spawn(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error) {
	return reply[plugin.SpawnResponse](b, ctx, req)
}

func (b *fakeBackend) Abort(ctx context.Context, req *plugin.AbortRequest) error {
	_, err := b.do(ctx, req)
	return err
}

// procTable is the backend's answer to a query of ns's proc table: ranks
// 0 and 1 on node "c".
func procTable(ns string) *plugin.QueryResponse {
	v := plugin.EncodeProcTable([]plugin.ProcInfo{{Rank: 0, Node: "c"}, {Rank: 1, Node: "c"}})
	return &plugin.QueryResponse{Results: []plugin.Info{{Key: plugin.QueryProcTable, Value: v}}}
}

// A connect of processes of one job is a fence of theirs, named apart
// from the job's fences; a connect with another job registers that job
// with libpmix (from the backend's proc table, once), hands this node's
// clients' data over for its members, and then connects.
func TestConnect(t *testing.T) {
	r := newRig(t)
	const ns = "conn"
	job := twoNodes(ns)
	job.Nodes = job.Nodes[:1]
	job.Nodes[0].Ranks = []int32{0, 1}
	r.e.Host(job, 0)
	answered := make(chan error, 4)
	done := func(err error) { answered <- err }

	within := []plugin.Proc{proc(ns, 0), proc(ns, 1)}
	if err := r.e.Connect(within, 0, true, done); err != nil {
		t.Fatal(err)
	}
	c := r.next()
	f, ok := c.req.(*plugin.FenceRequest)
	if !ok || !strings.HasPrefix(f.ID, "connect:pmix:") || f.Timeout != time.Minute || len(f.LocalProcs) != 2 {
		t.Fatalf("a connect within a job: %+v; want a fence of its processes named connect:", c.req)
	}
	c.answer <- &plugin.FenceResponse{}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}

	across := []plugin.Proc{proc(ns, plugin.RankWildcard), proc("other", plugin.RankWildcard)}
	for round := range 2 {
		if err := r.e.Connect(across, 7*time.Second, true, done); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			c = r.next()
			q, ok := c.req.(*plugin.QueryRequest)
			if !ok || len(q.Queries) != 1 || q.Queries[0].Keys[0] != plugin.QueryProcTable {
				t.Fatalf("a connect with another job asked %+v first; want its proc table", c.req)
			}
			c.answer <- procTable("other")
		}
		// The node's clients' data, for the other job's readers.
		for range 2 {
			a := r.nextAsk()
			r.e.DataAnswer(a.id, []byte(fmt.Sprintf("data-%d", a.p.Rank)), true)
		}
		c = r.next()
		h, ok := c.req.(*plugin.FenceRequest)
		if !ok || !h.HandOver || len(h.LocalProcs) != 2 {
			t.Fatalf("round %d: before the connect: %+v; want a hand-over of the node's 2 clients", round, c.req)
		}
		c.answer <- &plugin.FenceResponse{}
		c = r.next()
		if req, ok := c.req.(*plugin.ConnectRequest); !ok || req.Timeout != 7*time.Second || len(req.Procs) != 2 {
			t.Fatalf("round %d: %+v; want the connect, with the clients' time-out", round, c.req)
		}
		c.answer <- &plugin.ConnectResponse{}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
	}
	r.lib.mu.Lock()
	defer r.lib.mu.Unlock()
	if !slices.Equal(r.lib.registers, []string{"other@-1"}) {
		t.Errorf("registered with libpmix: %v; want the other job once, with no local ranks", r.lib.registers)
	}
}

// A spawn answers the new job's namespace once libpmix knows its layout;
// a spawned job that cannot be registered fails the spawn and is ended,
// so that its children do not wait for parents that gave up.
func TestSpawn(t *testing.T) {
	r := newRig(t)
	r.e.Host(twoNodes("parent"), 0)
	for range 2 {
		r.nextAsk()
	}
	type result struct {
		ns  string
		err error
	}
	got := make(chan result, 1)
	spawn := func() {
		t.Helper()
		req := &plugin.SpawnRequest{Requestor: proc("parent", 0), Apps: []plugin.SpawnApp{{Cmd: "/bin/true", MaxProcs: 2}}}
		if err := r.e.Spawn(req, func(ns string, err error) { got <- result{ns, err} }); err != nil {
			t.Fatal(err)
		}
		c := r.next()
		if s, ok := c.req.(*plugin.SpawnRequest); !ok || s.Timeout != time.Minute {
			t.Fatalf("%+v; want the spawn, bounded by the run's time-out", c.req)
		}
		c.answer <- &plugin.SpawnResponse{Nspace: "child"}
	}
	spawn()
	c := r.next()
	c.answer <- procTable("child")
	if res := <-got; res.ns != "child" || res.err != nil {
		t.Fatalf("spawn answered %+v; want the child's namespace", res)
	}

	// The second child's layout cannot be read.
	r2 := newRig(t)
	r2.e.Host(twoNodes("parent"), 0)
	for range 2 {
		r2.nextAsk()
	}
	r = r2
	spawn()
	c = r.next()
	c.answer <- plugin.Errorf(plugin.ErrNotFound, "no such job")
	c = r.next()
	ab, ok := c.req.(*plugin.AbortRequest)
	if !ok || len(ab.Targets) != 1 || ab.Targets[0] != proc("child", plugin.RankWildcard) {
		t.Fatalf("after a spawn whose job cannot be registered: %+v; want the child job aborted", c.req)
	}
	c.answer <- nil
	if res := <-got; res.err == nil {
		t.Fatalf("spawn answered %+v; want its failure", res)
	}
}
