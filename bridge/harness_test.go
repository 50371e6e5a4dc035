package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
)

// waitFor bounds the one wait in these tests, for the jobs to be quiet;
// nothing here should take more than a few milliseconds.
const waitFor = 5 * time.Second

// quiet tells when the jobs under test are quiet: nothing of theirs runs
// but backend calls that the fake RM holds until the test does something
// more. The jobs count every goroutine they start (Config.tap: Begin,
// End) and the fake RM the calls it holds (hold, and release by whoever
// lets them go), so a test never waits for a reply that is not coming,
// nor for a window of silence: after wait, every reply the jobs will
// send without more input has been sent.
type quiet struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running int
	held    int
}

func newQuiet() *quiet {
	q := &quiet{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *quiet) Begin() {
	q.mu.Lock()
	q.running++
	q.mu.Unlock()
}

func (q *quiet) End() {
	q.mu.Lock()
	q.running--
	q.cond.Broadcast()
	q.mu.Unlock()
}

// hold counts a call the fake RM holds. Call with the fake RM's lock.
func (q *quiet) hold() {
	q.mu.Lock()
	q.held++
	q.cond.Broadcast()
	q.mu.Unlock()
}

// release counts n held calls let go, by the goroutine that lets them go
// and before it can end, so the jobs never look quiet in between.
func (q *quiet) release(n int) {
	q.mu.Lock()
	q.held -= n
	q.mu.Unlock()
}

// wait returns once the jobs are quiet, failing t after waitFor.
func (q *quiet) wait(t testing.TB) {
	t.Helper()
	timedOut := false
	stop := time.AfterFunc(waitFor, func() {
		q.mu.Lock()
		timedOut = true
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop.Stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.running != q.held {
		if timedOut {
			t.Fatalf("the jobs are not quiet after %s: %d goroutines run, %d calls held", waitFor, q.running, q.held)
		}
		q.cond.Wait()
	}
}

// conn is a Sender that records what the bridge writes to one task and
// decodes it as the task would.
type conn struct {
	mu      sync.Mutex
	buf     []byte
	closed  bool
	notify  chan struct{}
	version int // how to decode: 1 until the test says otherwise
	s1      pmi1.Splitter
	s2      pmi2.Splitter
}

func newConn() *conn { return &conn{notify: make(chan struct{}, 1), version: 1} }

func (c *conn) Send(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("closed")
	}
	c.buf = append(c.buf, b...)
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// take returns the next whole reply already written, or nil.
func (c *conn) take() *wire.Message {
	c.mu.Lock()
	var (
		adv int
		tok []byte
		err error
	)
	if c.version == 2 {
		adv, tok, err = c.s2.Split(c.buf, false)
	} else {
		adv, tok, err = c.s1.Split(c.buf, false)
	}
	if err != nil {
		c.mu.Unlock()
		panic(fmt.Sprintf("reply does not frame: %v in %q", err, c.buf))
	}
	if tok == nil {
		c.mu.Unlock()
		return nil
	}
	tok = append([]byte(nil), tok...)
	c.buf = c.buf[adv:]
	v := c.version
	c.mu.Unlock()
	var m *wire.Message
	if v == 2 {
		m, err = pmi2.Parse(tok)
	} else {
		m, err = pmi1.Parse(tok)
	}
	if err != nil {
		panic(fmt.Sprintf("reply does not parse: %v in %q", err, tok))
	}
	return m
}

// pending reports unread bytes.
func (c *conn) pending() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// task is a test's handle on one rank: its session and its conn.
type tsk struct {
	t    testing.TB
	q    *quiet
	rank int32
	s    *Session
	c    *conn
}

// reply returns the task's next reply once the jobs are quiet; nil when
// none is coming.
func (k *tsk) reply() *wire.Message {
	k.t.Helper()
	k.q.wait(k.t)
	return k.c.take()
}

// send writes one PMI-1 line (newline added) or, once the task spoke
// PMI-2, one PMI-2 command (length prefix added).
func (k *tsk) send(line string) {
	k.t.Helper()
	if k.c.version == 2 {
		k.s.Feed(frame2(line))
		return
	}
	k.s.Feed([]byte(line + "\n"))
}

// frame2 is a PMI-2 command with its length prefix.
func frame2(body string) []byte { return fmt.Appendf(nil, "%-6d%s", len(body), body) }

// raw feeds bytes as they are.
func (k *tsk) raw(b string) { k.s.Feed([]byte(b)) }

// expect reads the next reply and checks it against want, written as a
// PMI-1 line or a PMI-2 body: every pair in want must be in the reply with
// the same value (the reply may carry more); "key=*" only checks presence.
func (k *tsk) expect(want string) *wire.Message {
	k.t.Helper()
	m := k.reply()
	if m == nil {
		k.t.Fatalf("rank %d: no reply, want %q (unread %q)", k.rank, want, k.c.pending())
	}
	checkMsg(k.t, k.rank, m, want)
	return m
}

func checkMsg(t testing.TB, rank int32, m *wire.Message, want string) {
	t.Helper()
	var w *wire.Message
	var err error
	if strings.Contains(want, ";") {
		w, err = pmi2.Parse([]byte(want))
	} else {
		w, err = pmi1.Parse([]byte(want))
	}
	if err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	if m.Cmd != w.Cmd {
		t.Fatalf("rank %d: reply %s, want %s (%+v)", rank, m.Cmd, w.Cmd, m.Args)
	}
	for _, a := range w.Args {
		got, ok := m.Get(a.Key)
		if !ok {
			t.Fatalf("rank %d: %s has no %s= (got %+v)", rank, m.Cmd, a.Key, m.Args)
		}
		if a.Value != "*" && got != a.Value {
			t.Fatalf("rank %d: %s %s=%q, want %q (all %+v)", rank, m.Cmd, a.Key, got, a.Value, m.Args)
		}
	}
}

// silent checks that no reply is coming.
func (k *tsk) silent() {
	k.t.Helper()
	if m := k.reply(); m != nil {
		k.t.Fatalf("rank %d: unexpected reply %s %+v", k.rank, m.Cmd, m.Args)
	}
}

// init1 runs the PMI-1 start-up of a task.
func (k *tsk) init1() {
	k.t.Helper()
	k.send("cmd=init pmi_version=1 pmi_subversion=1")
	k.expect("cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1")
}

// init2 runs the PMI-2 start-up of a task through fullinit.
func (k *tsk) init2() *wire.Message {
	k.t.Helper()
	k.send("cmd=init pmi_version=2 pmi_subversion=0")
	k.expect("cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0")
	k.c.mu.Lock()
	k.c.version = 2
	k.c.mu.Unlock()
	k.send(fmt.Sprintf("cmd=fullinit;pmirank=%d;", k.rank))
	return k.expect(fmt.Sprintf("cmd=fullinit-response;rc=0;rank=%d;", k.rank))
}

// world is a job under test: one engine per simulated node, all sharing
// one fake RM.
type world struct {
	t     testing.TB
	q     *quiet
	rm    *fakeRM
	jobs  []*Job
	tasks []*tsk
	clock *crew.Fake
}

// jobSetup is what a jobOpt may change: the job's Config and how each
// node's backend comes up.
type jobSetup struct {
	Config
	t testing.TB
	// backend makes a node's handle on rm; nil: up at once, named "fake",
	// with every capability the engine asks about.
	backend func(rm plugin.Full) *Backend
}

type jobOpt func(*jobSetup)

func withMode(m FenceMode) jobOpt { return func(c *jobSetup) { c.FenceMode = m } }
func withClock(k Clock) jobOpt    { return func(c *jobSetup) { c.Clock = k } }
func withValMax(n int) jobOpt     { return func(c *jobSetup) { c.Limits.ValMax = n } }
func withParent(p string) jobOpt  { return func(c *jobSetup) { c.Job.Parent = p } }
func withPreput(kv ...string) jobOpt {
	return func(c *jobSetup) {
		for i := 0; i+1 < len(kv); i += 2 {
			c.Preput = append(c.Preput, plugin.Info{Key: kv[i], Value: kv[i+1]})
		}
	}
}

// withCaps gives the job a backend that is up at once with just caps.
func withCaps(caps ...string) jobOpt {
	return func(c *jobSetup) {
		c.backend = func(rm plugin.Full) *Backend {
			return ReadyBackend(rm, &plugin.BackendInfo{Name: "fake", Capabilities: caps}, nil)
		}
	}
}

// lateBackend is a backend the test brings up by hand.
type lateBackend struct {
	info  *plugin.BackendInfo
	attrs []plugin.Info
	bs    []*Backend // one per node
	rm    plugin.Full
	asked bool // a node's job asked for it
	auto  bool // up as soon as asked
}

// up brings every node's backend up, as the hosts do once it started.
func (l *lateBackend) up() {
	for _, b := range l.bs {
		b.Up(l.rm, l.info, l.attrs)
	}
}

// withLateBackend gives the job a backend that comes up, with info and
// attrs, when the test calls up, or with auto as soon as the job asks for
// it.
func withLateBackend(auto bool, info *plugin.BackendInfo, attrs ...plugin.Info) (jobOpt, *lateBackend) {
	l := &lateBackend{info: info, attrs: attrs, auto: auto}
	return func(c *jobSetup) {
		c.backend = func(rm plugin.Full) *Backend {
			l.rm = rm
			var b *Backend
			b = NewBackend("fake", func() {
				l.asked = true
				if l.auto {
					b.Up(l.rm, l.info, l.attrs)
				}
			})
			l.bs = append(l.bs, b)
			return b
		}
	}, l
}

func withTimeouts(t Timeouts) jobOpt { return func(c *jobSetup) { c.Timeouts = t } }

// newWorld builds a job of size ranks on nodes nodes (block distribution)
// with every task attached through PMI_FD.
func newWorld(t testing.TB, size, nodes int, opts ...jobOpt) *world {
	return newWorldRM(t, newFakeRM(), size, nodes, true, opts...)
}

func newWorldRM(t testing.TB, rm *fakeRM, size, nodes int, attach bool, opts ...jobOpt) *world {
	t.Helper()
	w := &world{t: t, rm: rm, q: rm.q}
	job := plugin.Job{Nspace: "job-1", Size: int32(size)}
	per := (size + nodes - 1) / nodes
	for n := 0; n < nodes; n++ {
		node := plugin.Node{ID: int32(n), Name: fmt.Sprintf("n%d", n)}
		for r := n * per; r < (n+1)*per && r < size; r++ {
			node.Ranks = append(node.Ranks, int32(r))
		}
		job.Nodes = append(job.Nodes, node)
	}
	rm.setJob(job)
	for n := 0; n < nodes; n++ {
		setup := jobSetup{t: t, Config: Config{Job: job, NodeID: int32(n), Logger: zerolog.Nop(), tap: w.q}}
		withCaps(plugin.CapPublish, plugin.CapSpawn, plugin.CapConnect, plugin.CapNotify)(&setup)
		for _, o := range opts {
			o(&setup)
		}
		cfg := setup.Config
		cfg.Backend = setup.backend(rm)
		if mc, ok := cfg.Clock.(*crew.Fake); ok {
			w.clock = mc
		}
		j, err := NewJob(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.jobs = append(w.jobs, j)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			if err := j.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
		for _, r := range job.Nodes[n].Ranks {
			k := &tsk{t: t, q: w.q, rank: r, c: newConn()}
			if attach {
				s, err := j.Attach(r, k.c)
				if err != nil {
					t.Fatal(err)
				}
				k.s = s
			}
			w.tasks = append(w.tasks, k)
		}
	}
	return w
}

func (w *world) task(r int) *tsk { return w.tasks[r] }

// init12 initializes every task with PMI 1.2 (group barriers).
func (w *world) init12() {
	for _, k := range w.tasks {
		k.send("cmd=init pmi_version=1 pmi_subversion=2")
		k.expect("cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=2")
	}
}

func (w *world) job(node int) *Job { return w.jobs[node] }

// waitDone checks that a job engine has ended, once the jobs are quiet.
func (w *world) waitDone(node int) Result {
	w.t.Helper()
	w.q.wait(w.t)
	select {
	case <-w.jobs[node].Done():
		return w.jobs[node].Result()
	default:
		w.t.Fatalf("node %d: job did not end", node)
		return Result{}
	}
}

// check checks cond (a fake RM's record of calls the jobs made on their
// own goroutines) once the jobs are quiet.
func (w *world) check(what string, cond func() bool) {
	w.t.Helper()
	w.q.wait(w.t)
	if !cond() {
		w.t.Fatalf("%s: did not happen", what)
	}
}

// fakeRM is an in-memory multi-node backend: fences wait for every node's
// part, direct modex serves the latest data of a node, the name service is
// a map, spawn and abort are recorded. A transcript's "rm<" lines
// script its next answers instead (script, in script_test.go).
type fakeRM struct {
	plugin.Unimplemented

	mu        sync.Mutex
	job       plugin.Job
	fences    map[string]*fakeFence
	data      map[string][]byte // node name -> last contributed data
	names     map[string]string
	spawns    []*plugin.SpawnRequest
	aborts    []*plugin.AbortRequest
	events    []*plugin.EventRequest
	connects  []*plugin.ConnectRequest
	fenceReqs []*plugin.FenceRequest
	modex     []*plugin.ModexRequest
	departs   []*plugin.DepartRequest
	fenceErr  error // when set, every Fence fails with it
	foreign   map[string][]byte
	q         *quiet
	log       []string    // every call, as the golden transcripts record it
	scripts   []*rmAnswer // answers a transcript scripted, used once each
	// killOnAbort, when set, runs as Abort's first step: what an RM does
	// when it hears of an abort (it kills the tasks).
	killOnAbort func()
}

type fakeFence struct {
	nodes map[string]bool
	data  []byte
	done  chan struct{}
	held  int // calls waiting for the other nodes
}

func newFakeRM() *fakeRM {
	return &fakeRM{fences: map[string]*fakeFence{}, data: map[string][]byte{}, names: map[string]string{}, foreign: map[string][]byte{}, q: newQuiet()}
}

// record logs a call. Called with mu held.
func (f *fakeRM) record(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

// calls returns the calls logged since the last time, sorted: calls made
// on several goroutines at once come in any order.
func (f *fakeRM) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = nil
	sort.Strings(out)
	return out
}

// procList writes procs as the golden transcripts show them.
func procList(procs []plugin.Proc) string {
	s := make([]string, len(procs))
	for i, p := range procs {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// records writes a kvs blob as rank:key pairs.
func records(blob []byte) string {
	var s []string
	if err := kvs.Decode(blob, func(r kvs.Record) error {
		s = append(s, fmt.Sprintf("%d:%s", r.Rank, r.Key))
		return nil
	}); err != nil {
		return "undecodable: " + err.Error()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (f *fakeRM) setJob(j plugin.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.job = j
}

func (f *fakeRM) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "fake", APIVersions: []string{plugin.APIVersion1}}, nil
}

func (f *fakeRM) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	f.mu.Lock()
	if f.fenceErr != nil {
		err := f.fenceErr
		f.mu.Unlock()
		return nil, err
	}
	f.fenceReqs = append(f.fenceReqs, req)
	f.record("Fence %s node=%s procs=%s local=%s collect=%v data=%s", req.ID, req.Node, procList(req.Procs), procList(req.LocalProcs), req.Collect, records(req.Data))
	if a := f.scripted("fence", req.ID); a != nil {
		f.mu.Unlock()
		if a.err != nil {
			return nil, a.err
		}
		return &plugin.FenceResponse{Data: a.data()}, nil
	}
	ff := f.fences[req.ID]
	if ff == nil {
		ff = &fakeFence{nodes: map[string]bool{}, done: make(chan struct{})}
		f.fences[req.ID] = ff
	}
	ff.nodes[req.Node] = true
	ff.data = append(ff.data, req.Data...)
	f.data[req.Node] = append([]byte(nil), req.Data...)
	if len(ff.nodes) == f.nodesOf(req.Procs) {
		close(ff.done)
		f.q.release(ff.held)
		ff.held = 0
	} else {
		ff.held++
		f.q.hold()
	}
	f.mu.Unlock()
	select {
	case <-ff.done:
	case <-ctx.Done():
		f.mu.Lock()
		if !isClosed(ff.done) {
			ff.held--
			f.q.release(1)
		}
		f.mu.Unlock()
		return nil, fmt.Errorf("fence %s: %w", req.ID, plugin.ErrTimeout)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !req.Collect {
		return &plugin.FenceResponse{}, nil
	}
	return &plugin.FenceResponse{Data: ff.data}, nil
}

// nodesOf counts the nodes hosting procs. Called with mu held.
func (f *fakeRM) nodesOf(procs []plugin.Proc) int {
	n := 0
	for _, node := range f.job.Nodes {
		for _, p := range procs {
			if p.Rank == plugin.RankWildcard || slices.Contains(node.Ranks, p.Rank) {
				n++
				break
			}
		}
	}
	return n
}

// fenceRequests returns the Fence requests received so far.
func (f *fakeRM) fenceRequests() []*plugin.FenceRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fenceReqs)
}

func (f *fakeRM) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.modex = append(f.modex, req)
	f.record("DirectModex %s by %s", req.Proc, req.Requestor)
	if a := f.scripted("modex", req.Proc.String()); a != nil {
		if a.err != nil {
			return nil, a.err
		}
		return &plugin.ModexResponse{Data: a.data()}, nil
	}
	if req.Proc.Nspace != f.job.Nspace {
		d, ok := f.foreign[req.Proc.Nspace]
		if !ok {
			return nil, fmt.Errorf("job %s: %w", req.Proc.Nspace, plugin.ErrNotFound)
		}
		return &plugin.ModexResponse{Data: d}, nil
	}
	var out []byte
	for _, n := range f.job.Nodes {
		if req.Proc.Rank == plugin.RankWildcard {
			out = append(out, f.data[n.Name]...)
			continue
		}
		for _, r := range n.Ranks {
			if r == req.Proc.Rank {
				out = append(out, f.data[n.Name]...)
			}
		}
	}
	return &plugin.ModexResponse{Data: out}, nil
}

func (f *fakeRM) Abort(ctx context.Context, req *plugin.AbortRequest) error {
	if f.killOnAbort != nil {
		f.killOnAbort()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborts = append(f.aborts, req)
	f.record("Abort by %s status=%d targets=%s: %s", req.Proc, req.Status, procList(req.Targets), req.Message)
	if a := f.scripted("abort", req.Proc.String()); a != nil {
		return a.err
	}
	return nil
}

func (f *fakeRM) NotifyEvent(ctx context.Context, req *plugin.EventRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, req)
	f.record("NotifyEvent %v from %s", req.Code, req.Source)
	if a := f.scripted("notify", req.Source.String()); a != nil {
		return a.err
	}
	return nil
}

func (f *fakeRM) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Publish %v by %s", req.Data, req.Proc)
	if a := f.scripted("publish", firstKey(req.Data)); a != nil {
		return a.err
	}
	for _, d := range req.Data {
		if _, ok := f.names[d.Key]; ok {
			return fmt.Errorf("name %s: %w", d.Key, plugin.ErrAlreadyExists)
		}
		f.names[d.Key] = d.Value
	}
	return nil
}

func (f *fakeRM) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Lookup %v by %s", req.Keys, req.Proc)
	if a := f.scripted("lookup", strings.Join(req.Keys, ",")); a != nil {
		if a.err != nil {
			return nil, a.err
		}
		return &plugin.LookupResponse{Data: a.kv}, nil
	}
	var out []plugin.Published
	for _, k := range req.Keys {
		if v, ok := f.names[k]; ok {
			out = append(out, plugin.Published{Key: k, Value: v})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", strings.Join(req.Keys, ","), plugin.ErrNotFound)
	}
	return &plugin.LookupResponse{Data: out}, nil
}

func (f *fakeRM) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Unpublish %v by %s", req.Keys, req.Proc)
	if a := f.scripted("unpublish", strings.Join(req.Keys, ",")); a != nil {
		return a.err
	}
	for _, k := range req.Keys {
		if _, ok := f.names[k]; !ok {
			return fmt.Errorf("%s: %w", k, plugin.ErrNotFound)
		}
		delete(f.names, k)
	}
	return nil
}

func (f *fakeRM) Spawn(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spawns = append(f.spawns, req)
	f.record("Spawn %d apps by %s preput=%d", len(req.Apps), req.Requestor, len(req.Preput))
	if a := f.scripted("spawn", req.Requestor.String()); a != nil {
		if a.err != nil {
			return nil, a.err
		}
		return &plugin.SpawnResponse{Nspace: a.name}, nil
	}
	for _, a := range req.Apps {
		for _, kv := range a.Info {
			if kv.Key != "path" {
				return nil, fmt.Errorf("spawn: info key %q: %w", kv.Key, plugin.ErrNotSupported)
			}
		}
	}
	return &plugin.SpawnResponse{Nspace: "job-2"}, nil
}

func (f *fakeRM) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects = append(f.connects, req)
	f.record("Connect %s", procList(req.Procs))
	if a := f.scripted("connect", procList(req.Procs)); a != nil {
		if a.err != nil {
			return nil, a.err
		}
		return &plugin.ConnectResponse{ID: a.name}, nil
	}
	return &plugin.ConnectResponse{ID: "c1"}, nil
}

func (f *fakeRM) Disconnect(ctx context.Context, req *plugin.DisconnectRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Disconnect %s", procList(req.Procs))
	if a := f.scripted("disconnect", procList(req.Procs)); a != nil {
		return a.err
	}
	return nil
}

func (f *fakeRM) ClientConnected(ctx context.Context, req *plugin.ClientRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("ClientConnected %s", procList(req.Procs))
	if a := f.scripted("connected", procList(req.Procs)); a != nil {
		return a.err
	}
	return nil
}

func (f *fakeRM) ClientFinalized(ctx context.Context, req *plugin.ClientRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("ClientFinalized %s", procList(req.Procs))
	if a := f.scripted("finalized", procList(req.Procs)); a != nil {
		return a.err
	}
	return nil
}

func (f *fakeRM) Depart(ctx context.Context, req *plugin.DepartRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Depart %s %s", req.Node, procList(req.Procs))
	f.departs = append(f.departs, req)
	return nil
}

// departed names the nodes that departed, in order.
func (f *fakeRM) departed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, d := range f.departs {
		out = append(out, d.Node)
	}
	return out
}

func (f *fakeRM) snapshot() (aborts []*plugin.AbortRequest, events []*plugin.EventRequest, spawns []*plugin.SpawnRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(aborts, f.aborts...), append(events, f.events...), append(spawns, f.spawns...)
}
