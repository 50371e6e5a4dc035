package engine

// A client's life as libpmix tells it: connected, finalized or lost, each
// reported to the backend; and when every local client finalized.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// connectWait bounds how long a client's finalize waits for the report of
// its connect.
const connectWait = 5 * time.Second

// clients are the local clients' reports and finalizes.
type clients struct {
	*base
	mu sync.Mutex
	// connects holds, per client, what is closed once the backend heard
	// of its connect: its finalize is reported after.
	connects map[plugin.Proc]chan struct{}
	queue    notices
	// done is, per job, closed once its every local rank (left) has
	// finalized.
	done map[string]chan struct{}
	left map[string]map[int32]bool
}

func newClients(b *base) *clients {
	return &clients{base: b, connects: map[plugin.Proc]chan struct{}{}, done: map[string]chan struct{}{}, left: map[string]map[int32]bool{}}
}

// notices batches the reports of the clients' connects and finalizes to
// the backend: while one call is on its way, the next clients' reports
// queue and go together in the next, connects first (a client's connect
// is always reported before its finalize). A client waits in
// PMIx_Finalize until the backend heard of it (ClientFinalized), and
// under Slurm each report was a round trip to the coordinator: a node's
// 64 clients finalizing together made 64 calls and waited 14-17 ms each
// (median, a 128-rank job on two nodes) while the CPUs idled at the end
// of the job. Batched, a node makes a few calls.
type notices struct {
	connected, finalized []notice
	busy                 bool // a sender is at work
}

// notice is one client's report and what to do once the backend heard
// it (or the call failed: a report is not retried).
type notice struct {
	p    plugin.Proc
	done func()
}

// ClientConnected reports p's connect.
func (e *Engine) ClientConnected(p plugin.Proc) {
	c := e.clients
	reported := make(chan struct{})
	c.mu.Lock()
	c.connects[p] = reported
	c.mu.Unlock()
	c.notify(false, p, func() { close(reported) })
}

// ClientFinalized reports p's finalize and calls done once the backend
// heard it, after its connect: a task that ended after PMIx_Finalize
// returned is never taken for one that left without it. Only then is the
// finalize counted (Finalized). It reports whether done comes later
// (false: the server is closing, and the report was made already).
func (e *Engine) ClientFinalized(p plugin.Proc, done func()) bool {
	c := e.clients
	c.mu.Lock()
	connected := c.connects[p]
	delete(c.connects, p)
	c.mu.Unlock()
	finalize := func(ctx context.Context, done func()) {
		if connected != nil {
			rang, stop := c.crew.Alarm(connectWait)
			select {
			case <-connected:
			case <-rang:
			}
			stop()
		}
		if d, ok := c.be.(plugin.FinalizeDrainer); ok {
			// The backend passes other nodes' answers through this
			// process: the client exits only once they left.
			nctx, cancel := news(ctx)
			d.DrainBeforeFinalize(nctx)
			cancel()
		}
		c.notify(true, p, func() {
			// The node's last client of a job on several nodes hands
			// the node's data over before it may exit (its server
			// ends with it), as the PMI face does (bridge).
			c.departIfLast(ctx, p)
			c.finalized(p)
			done()
		})
	}
	if !c.crew.Spawn(func(ctx context.Context) { finalize(ctx, done) }) {
		// The server is closing: still heard, bounded, here; the
		// caller answers the client (done is not called).
		finalize(context.Background(), func() {})
		return false
	}
	return true
}

// ClientLost reports p's connection closed before PMIx_Finalize (the
// task died, or exited without it), why as libpmix and the guard tell
// it. Under a step daemon that is not the shim's parent (slurmstepd)
// nothing else sees it, and its job would wait in its next fence until
// the time-out: the backend hears of it as a failed process, as a PMI
// task's closed fd is reported.
func (e *Engine) ClientLost(p plugin.Proc, why string) {
	if _, ours := e.jobs.of(p.Nspace); !ours || p.Rank == plugin.RankWildcard {
		return
	}
	lost := func(ctx context.Context) {
		nctx, cancel := news(ctx)
		defer cancel()
		err := e.be.NotifyEvent(nctx, &plugin.EventRequest{Code: plugin.EventProcAborted, Source: p,
			Info: []plugin.Info{{Key: "reason", Value: "ended before PMIx_Finalize (its PMIx connection closed: " + why + ")"}}})
		if err != nil {
			e.log.Warn().Err(err).Str("proc", p.String()).Msg("pmix: report a client that left before PMIx_Finalize")
		}
	}
	e.mustRun(lost)
}

// notify queues p's connect (finalize false) or finalize report, and
// calls done once it was made. It never waits for the backend itself,
// unless the server has closed: then a finalize is reported at once, on
// its own (a sender at work is waited for by the close, and makes what it
// finds queued), and a connect not at all.
func (c *clients) notify(finalize bool, p plugin.Proc, done func()) {
	if c.crew.Closed() {
		if finalize {
			c.sendNotice(context.Background(), "client finalized", []notice{{p, done}}, plugin.Full.ClientFinalized)
		} else {
			done()
		}
		return
	}
	c.mu.Lock()
	if finalize {
		c.queue.finalized = append(c.queue.finalized, notice{p, done})
	} else {
		c.queue.connected = append(c.queue.connected, notice{p, done})
	}
	start := !c.queue.busy
	c.queue.busy = true
	c.mu.Unlock()
	if start {
		c.mustRun(c.sendNotices)
	}
}

// sendNotices makes the queued reports, a call of each kind per round,
// until none is queued.
func (c *clients) sendNotices(ctx context.Context) {
	for {
		c.mu.Lock()
		conn, fin := c.queue.connected, c.queue.finalized
		c.queue.connected, c.queue.finalized = nil, nil
		if len(conn) == 0 && len(fin) == 0 {
			c.queue.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.sendNotice(ctx, "client connected", conn, plugin.Full.ClientConnected)
		c.sendNotice(ctx, "client finalized", fin, plugin.Full.ClientFinalized)
	}
}

// sendNotice makes one report of ns, within a bound of its own (also
// while the server closes: it is news the backend must hear), and then
// calls their done.
func (c *clients) sendNotice(ctx context.Context, what string, ns []notice, call func(plugin.Full, context.Context, *plugin.ClientRequest) error) {
	if len(ns) == 0 {
		return
	}
	procs := make([]plugin.Proc, len(ns))
	for i, n := range ns {
		procs[i] = n.p
	}
	nctx, cancel := news(ctx)
	err := call(c.be, nctx, &plugin.ClientRequest{Procs: procs})
	cancel()
	if err != nil {
		who := procs[0].String()
		if len(procs) > 1 {
			who = fmt.Sprintf("%s and %d more", who, len(procs)-1)
		}
		c.log.Warn().Err(err).Str("procs", who).Msg("pmix: " + what)
	}
	for _, n := range ns {
		n.done()
	}
}

// watch returns a channel closed once every local rank of the job nspace
// (hosted next) finalized.
func (c *clients) watch(nspace string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.done[nspace] = ch
	return ch
}

// expect sets which local clients of nspace must finalize.
func (c *clients) expect(nspace string, ranks []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done[nspace] == nil {
		return
	}
	c.left[nspace] = map[int32]bool{}
	for _, r := range ranks {
		c.left[nspace][r] = true
	}
	if len(ranks) == 0 {
		close(c.done[nspace])
	}
}

// departIfLast hands the node's data over (plugin.Departer) when p is
// the last local client of a job on several nodes to finalize: data put in
// a job stays readable until the job ends, and the node's server, with
// what a backend in its process holds of the clients' data, ends with
// its clients. A backend without "depart" answers ErrNotSupported: its
// data does not live here.
func (c *clients) departIfLast(ctx context.Context, p plugin.Proc) {
	j, ok := c.jobs.of(p.Nspace)
	c.mu.Lock()
	left := c.left[p.Nspace]
	last := ok && j.multi && len(left) == 1 && left[p.Rank]
	c.mu.Unlock()
	if !last {
		return
	}
	req := &plugin.DepartRequest{Node: j.node}
	for _, r := range j.ranks {
		req.Procs = append(req.Procs, plugin.Proc{Nspace: p.Nspace, Rank: r})
	}
	nctx, cancel := news(ctx)
	defer cancel()
	if err := c.be.Depart(nctx, req); err != nil && !errors.Is(err, plugin.ErrNotSupported) {
		c.log.Warn().Err(err).Msg("pmix: handing this node's data over at its last finalize failed: other nodes may not read it once this server has ended")
	}
}

// finalized counts p's finalize.
func (c *clients) finalized(p plugin.Proc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	left := c.left[p.Nspace]
	if !left[p.Rank] {
		return
	}
	delete(left, p.Rank)
	if len(left) == 0 {
		close(c.done[p.Nspace])
	}
}
