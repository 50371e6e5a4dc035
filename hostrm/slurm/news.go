package slurm

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// The job's news: its clients' events for other nodes and its abort. A
// node must learn of its job's abort, which the coordinator decides: the
// fences it gathers and the reads of its data it answers must fail; and
// its PMIx clients hear the events other nodes' clients raise. Both come
// down through the contract's AwaitEvents, which the coordinator answers
// with the job's events and fails at once for an aborted job: each node
// keeps one such wait up its link (watchNews), and keeps what it hears
// (news), from which it answers the AwaitEvents of its own host and of
// its children. So the coordinator holds at most width waits per job,
// whatever its size, and an abort reaches every node down the tree.

const (
	// newsWait is how long one wait up lasts when nothing happens: a
	// wait made on a link the node then left (rejoin moved its calls to a
	// parent that came up late) holds a place at its old end no longer
	// than that, and a wait costs one call a minute per node, on its
	// parent.
	newsWait = time.Minute
	// newsKept bounds the events a node keeps, as the coordinator's
	// universe bounds its own: a reader further behind is told it
	// missed some.
	newsKept = 1024
	// newsPause is the pause between tries when the link up fails.
	newsPause = time.Second
)

// news is the job's events as this node heard them. Guarded by the
// tree's mu.
type news struct {
	events []plugin.Event // in Seq order, as the coordinator numbered them
	// complete: every event of the job's after this Seq is in events.
	complete uint64
	changed  wake.Cond
}

// add keeps the events of one answer from up the tree.
func (n *news) add(resp *plugin.AwaitEventsResponse) {
	if resp.Missed && len(resp.Events) > 0 {
		n.complete = max(n.complete, resp.Events[0].Seq-1)
	}
	n.events = append(n.events, resp.Events...)
	if drop := len(n.events) - newsKept; drop > 0 {
		n.complete = max(n.complete, n.events[drop-1].Seq)
		n.events = append(n.events[:0:0], n.events[drop:]...)
	}
	if len(resp.Events) > 0 {
		n.changed.Broadcast()
	}
}

// after is the events after seq, and whether some of them are lost.
func (n *news) after(seq uint64) *plugin.AwaitEventsResponse {
	i, _ := slices.BinarySearchFunc(n.events, seq, func(e plugin.Event, s uint64) int {
		if e.Seq <= s {
			return -1
		}
		return 1
	})
	return &plugin.AwaitEventsResponse{Events: slices.Clone(n.events[i:]), Missed: seq < n.complete}
}

// watchNews waits up the node's link (at its parent, or at the
// coordinator for a top node) for the job's events, keeps them, and
// learns there of the job's abort: then every fence gathered here fails,
// and every later one, and every read of this node's data, and every
// wait for news here.
func (t *tree) watchNews(ctx context.Context) {
	var seq uint64
	for ctx.Err() == nil {
		// Bounded beyond the wait it asks for: a link that stopped
		// answering without breaking ends the call, and the loop asks
		// again.
		cctx, cancel := context.WithTimeout(ctx, newsWait+sendGrace)
		resp, err := t.toRoot.AwaitEvents(cctx, &plugin.AwaitEventsRequest{Nspace: t.Job.Nspace, After: seq, Timeout: newsWait})
		expired := cctx.Err() != nil // the bound, not an answer, ended it
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, plugin.ErrAborted) && !expired:
			t.aborted(plugin.Wrapf(err, plugin.ErrAborted, "fence"))
			return
		case err != nil:
			// The coordinator is unreachable: the fences will say so.
			// A pause between tries; close cuts it short.
			t.log.Debug().Err(err).Msg("fence tree: waiting for the job's news")
			t.crew.Sleep(ctx, newsPause)
			continue
		}
		for _, e := range resp.Events {
			seq = max(seq, e.Seq)
		}
		t.mu.Lock()
		t.news.add(resp)
		t.mu.Unlock()
	}
}

// awaitNews answers an AwaitEvents of the node's job (its own host's, or
// a child's) from what this node heard: the events after req.After,
// waiting up to req.Timeout for one; ErrAborted once the job was aborted.
func (t *tree) awaitNews(ctx context.Context, req *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
	passed, stop := t.crew.Alarm(req.Timeout)
	defer stop()
	for {
		t.mu.Lock()
		if t.end.err != nil {
			err := t.end.err
			t.mu.Unlock()
			return nil, err
		}
		if t.end.closed {
			t.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrUnavailable, "node %s has left the job", t.Name())
		}
		resp := t.news.after(req.After)
		ch := t.news.changed.C()
		t.mu.Unlock()
		if len(resp.Events) > 0 || req.Timeout <= 0 {
			return resp, nil
		}
		select {
		case <-ch:
		case <-t.end.seen.C():
		case <-passed:
			return &plugin.AwaitEventsResponse{Missed: resp.Missed}, nil
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrAborted, "await events of %s: caller went away: %v", req.Nspace, ctx.Err())
		}
	}
}
