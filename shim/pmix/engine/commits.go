package engine

// The clients' committed data: asked of libpmix, handed to the backend
// at a client's first commit and at its later ones until it fences, and
// carried by a fence that collects nothing.

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// dataWait bounds how long the engine waits for libpmix's direct-modex
// data of a local client it hands the backend (at a connect, and in a
// fence that collects nothing). libpmix answers at once for a client that
// committed; one that committed nothing is answered only when it does, so
// its data is left out after this.
const dataWait = 2 * time.Second

// handOverDelay gathers the first commits of a node's clients into one
// hand-over to the backend: clients that start together commit together.
const handOverDelay = 10 * time.Millisecond

// lateCommitChecks are when, after a hand-over, the clients' data is
// asked again: a client that commits again soon (Open MPI does, once its
// transports are up, and then reads its peers with no fence between)
// has the newer data handed over too, so that a reader elsewhere finds
// the keys of its later commit (DirectModex waits keyWait for them).
var lateCommitChecks = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond,
	160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond, 1280 * time.Millisecond}

// commits are the asks of libpmix for the clients' data and what was
// handed to the backend of it.
type commits struct {
	*base
	mu sync.Mutex
	// asks are the requests libpmix has not answered yet, by id: a
	// wait's channel, or the client whose first commit is watched.
	next    uint64
	asks    map[uint64]chan answer
	watches map[uint64]plugin.Proc
	// version numbers libpmix's answers in the order they came (frames.go).
	version uint64
	// sent is, per client that committed, a digest of the data last
	// handed to the backend: unchanged data is not sent again (the
	// backend keeps every contribution).
	sent map[plugin.Proc][sha256.Size]byte
	// handing is the data of the clients that committed first since the
	// last hand-over, framed, with whose it is: a hand-over is armed
	// while it holds any.
	handing handing
	// fenced are the clients that entered a fence after their first
	// commit: what they committed before it went with it (fenced).
	fenced map[plugin.Proc]bool
}

// answer is one of libpmix's answers and its version; ok false when
// libpmix had no data.
type answer struct {
	data    []byte
	version uint64
	ok      bool
}

type handing struct {
	data  []byte
	procs []plugin.Proc
}

func newCommits(b *base) *commits {
	return &commits{base: b, asks: map[uint64]chan answer{}, watches: map[uint64]plugin.Proc{},
		sent: map[plugin.Proc][sha256.Size]byte{}, fenced: map[plugin.Proc]bool{}}
}

// watch asks libpmix for the data of each of a multi-node job's local
// clients before any committed: libpmix answers once the client commits,
// which is how the server learns of a commit. The first commit's data is
// handed to the backend at once (handOver), so that a client on another
// node may read it by direct modex with no fence between (Open MPI's
// async modex); a fence that collects nothing carries the newer data of
// every client that committed (Engine.Fence). Data of a later commit
// reaches other nodes only through such a fence: PMIx clients fence
// between their rounds of puts.
func (c *commits) watch(nspace string, ranks []int32) {
	for _, r := range ranks {
		p := plugin.Proc{Nspace: nspace, Rank: r}
		c.mu.Lock()
		c.next++
		id := c.next
		c.watches[id] = p
		c.mu.Unlock()
		if err := c.lib.AskData(p, id); err != nil {
			c.mu.Lock()
			delete(c.watches, id)
			c.mu.Unlock()
			c.log.Warn().Str("proc", p.String()).Err(err).
				Msg("pmix: cannot watch for the client's commit: its data reaches other nodes only through collecting fences")
		}
	}
}

// DataAnswer is libpmix's answer to Lib.AskData id: data (the engine
// keeps it) or, with ok false, none.
func (e *Engine) DataAnswer(id uint64, data []byte, ok bool) {
	c := e.commits
	c.mu.Lock()
	c.version++
	a := answer{data: data, version: c.version, ok: ok}
	ch := c.asks[id]
	delete(c.asks, id)
	p, first := c.watches[id]
	if !first {
		c.mu.Unlock()
		if ch != nil { // else given up on
			ch <- a
		}
		return
	}
	// A client's first commit: what it committed, or none (nothing for
	// other nodes, which a reader elsewhere is then told at once).
	delete(c.watches, id)
	arm := len(c.handing.procs) == 0
	c.handing.data = appendDmodex(c.handing.data, p.Nspace, uint32(p.Rank), a.version, a.data)
	c.handing.procs = append(c.handing.procs, p)
	c.sent[p] = sha256.Sum256(a.data)
	c.mu.Unlock()
	if arm {
		c.crew.After(handOverDelay, c.handOver)
	}
}

// handOver gives the backend the data of the clients that committed for
// the first time since the last: a fence of theirs alone, which
// completes at once and keeps its data for DirectModex as every fence's.
// Their later commits are checked for next (later).
func (c *commits) handOver() {
	c.mu.Lock()
	h := c.handing
	c.handing = handing{}
	c.mu.Unlock()
	if len(h.procs) == 0 {
		return
	}
	if !c.crew.Spawn(func(ctx context.Context) {
		nctx, cancel := news(ctx)
		defer cancel()
		if err := c.hand(nctx, h.procs, h.data, c.fenceTimeout); err != nil {
			c.log.Warn().Err(err).Int("clients", len(h.procs)).Msg("pmix: hand the committed data to the backend")
			return
		}
		c.later(h.procs, 0)
	}) {
		c.log.Debug().Int("clients", len(h.procs)).Msg("pmix: commits while the server closes are not handed over")
	}
}

// hand gives the backend data, frames of procs (this node's clients): a
// fence of theirs alone, which completes at once and keeps its data for
// DirectModex as every fence's.
func (c *commits) hand(ctx context.Context, procs []plugin.Proc, data []byte, timeout time.Duration) error {
	id, node := c.jobs.handOver(procs)
	_, err := c.be.Fence(ctx, &plugin.FenceRequest{ID: id, Procs: procs, LocalProcs: procs, Node: node, Data: data, Timeout: timeout, HandOver: true})
	return err
}

// later hands over, at lateCommitChecks[i:], the data of procs that
// changed since it was last handed over, until they entered a fence.
func (c *commits) later(procs []plugin.Proc, i int) {
	if i >= len(lateCommitChecks) {
		return
	}
	c.crew.After(lateCommitChecks[i], func() {
		c.crew.Spawn(func(ctx context.Context) {
			if procs = c.unfenced(procs); len(procs) == 0 {
				return
			}
			nctx, cancel := news(ctx)
			defer cancel()
			if data := c.frames(nctx, procs, true); len(data) > 0 {
				if err := c.hand(nctx, procs, data, c.fenceTimeout); err != nil {
					c.log.Warn().Err(err).Int("clients", len(procs)).Msg("pmix: hand a later commit to the backend")
					return
				}
			}
			c.later(procs, i+1)
		})
	})
}

// fenced notes that req's local participants, this node's clients,
// entered a fence: the ones that committed are asked no more by later. A
// fence that collects nothing hands over what they committed before it,
// and one that collects their whole job's gives it to every node of the
// job; a later commit reaches other nodes through their next fence, as
// between any rounds of puts. (A collecting fence of some ranks only
// leaves readers outside them to the hand-overs, so it marks nobody.)
// Asking a node's every client again and again (64 libpmix answers each
// time) while the job's ranks fence and read cost the job CPU it waits
// for.
func (c *commits) markFenced(req *plugin.FenceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range req.LocalProcs {
		if _, ok := c.sent[p]; !ok {
			continue
		}
		if req.Collect && !slices.Contains(req.Procs, plugin.Proc{Nspace: p.Nspace, Rank: plugin.RankWildcard}) {
			continue
		}
		c.fenced[p] = true
	}
}

// unfenced is procs without those that entered a fence after their first
// commit (markFenced).
func (c *commits) unfenced(procs []plugin.Proc) []plugin.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(procs), func(p plugin.Proc) bool { return c.fenced[p] })
}

// committed is the procs that committed data (watch).
func (c *commits) committed(procs []plugin.Proc) []plugin.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []plugin.Proc
	for _, p := range procs {
		if _, ok := c.sent[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// frames is the data of each of procs that libpmix gives within
// dataWait, as frames; with changed, only the data that differs from what
// was last sent.
func (c *commits) frames(ctx context.Context, procs []plugin.Proc, changed bool) []byte {
	type ask struct {
		p  plugin.Proc
		id uint64
		ch chan answer
	}
	asks := make([]ask, 0, len(procs))
	c.mu.Lock()
	for _, p := range procs {
		c.next++
		a := ask{p: p, id: c.next, ch: make(chan answer, 1)}
		c.asks[a.id] = a.ch
		asks = append(asks, a)
	}
	c.mu.Unlock()
	forget := func(id uint64) {
		c.mu.Lock()
		delete(c.asks, id)
		c.mu.Unlock()
	}
	for i, a := range asks {
		if err := c.lib.AskData(a.p, a.id); err != nil {
			forget(a.id)
			asks[i].ch = nil
			c.log.Debug().Str("proc", a.p.String()).Err(err).Msg("pmix: no direct-modex data")
		}
	}
	// One deadline for all.
	rang, stop := c.crew.Alarm(dataWait)
	defer stop()
	var part []byte
	for _, a := range asks {
		if a.ch == nil {
			continue
		}
		d, ok := c.await(ctx, a.ch, rang)
		if !ok {
			// Not committed: left out, and its late answer dropped.
			forget(a.id)
			c.log.Debug().Str("proc", a.p.String()).Msg("pmix: a client's data is not in the fence: it committed none")
			continue
		}
		if d.ok && (!changed || c.sending(a.p, d.data)) {
			part = appendDmodex(part, a.p.Nspace, uint32(a.p.Rank), d.version, d.data)
		}
	}
	return part
}

// await is the answer on ch, unless rang or ctx ends first; an answer
// there already is taken even then (the wait's end chose at random
// between them, and left out data that had come).
func (c *commits) await(ctx context.Context, ch chan answer, rang <-chan struct{}) (answer, bool) {
	select {
	case d := <-ch:
		return d, true
	case <-rang:
	case <-ctx.Done():
	}
	select {
	case d := <-ch:
		return d, true
	default:
		return answer{}, false
	}
}

// sending records that p's data goes to the backend, and says whether it
// differs from what went last.
func (c *commits) sending(p plugin.Proc, data []byte) bool {
	sum := sha256.Sum256(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.sent[p]; ok && last == sum {
		return false
	}
	c.sent[p] = sum
	return true
}
