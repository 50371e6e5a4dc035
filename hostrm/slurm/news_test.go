package slurm

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// awaitCounter is the coordinator, counting the waits for news it holds
// at once, and the most it held.
type awaitCounter struct {
	plugin.Full
	now, most atomic.Int64
}

func (c *awaitCounter) AwaitEvents(ctx context.Context, req *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	return c.Full.AwaitEvents(ctx, req)
}

// A job's news comes down the tree: an event one node's client raised
// reaches every node's host, the coordinator holding one wait for the
// whole job (the top node's), and the job's abort ends every node's
// waits and fences at once, each node having heard it from its parent.
func TestNewsDownTheTree(t *testing.T) {
	var root *awaitCounter
	step := newTestStep(t, 14, 3, 1, func(f plugin.Full) plugin.Full {
		root = &awaitCounter{Full: f}
		return root
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes := step.nodes(ctx, t) // n1, n2 under it, n3 under n2
	job := step.job
	// Every node's fence tree serves once the job's first fence is done.
	done := make(chan error, len(nodes))
	for i, n := range nodes {
		go func() {
			_, err := n.Fence(ctx, &plugin.FenceRequest{ID: "first", Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}},
				LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: int32(i)}}, Node: job.Nodes[i].Name, Timeout: 10 * time.Second})
			done <- err
		}()
	}
	for range nodes {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	type heard struct {
		resp *plugin.AwaitEventsResponse
		err  error
	}
	wait := func(after uint64) []chan heard {
		var out []chan heard
		for _, n := range nodes {
			ch := make(chan heard, 1)
			go func() {
				resp, err := n.AwaitEvents(ctx, &plugin.AwaitEventsRequest{Nspace: job.Nspace, After: after, Timeout: 10 * time.Second})
				ch <- heard{resp, err}
			}()
			out = append(out, ch)
		}
		return out
	}
	waits := wait(0)
	code := plugin.EventCode(plugin.EventClientPrefix + "-131")
	if err := nodes[2].NotifyEvent(ctx, &plugin.EventRequest{Code: code, Source: plugin.Proc{Nspace: job.Nspace, Rank: 2},
		Range: plugin.RangeNamespace, Node: "n3"}); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for i, ch := range waits {
		h := <-ch
		if h.err != nil || len(h.resp.Events) != 1 || h.resp.Events[0].Code != code || h.resp.Missed {
			t.Fatalf("node %d heard %+v, %v; want the one event", i, h.resp, h.err)
		}
		seq = h.resp.Events[0].Seq
	}
	if m := root.most.Load(); m != 1 {
		t.Errorf("the coordinator held %d waits for news at once; want 1, the top node's", m)
	}

	// The abort, asked on n2, reaches every node: their waits for news
	// fail, and so does a fence.
	waits = wait(seq)
	if err := nodes[1].Abort(ctx, &plugin.AbortRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 1}, Status: 7, Message: "bye"}); err != nil {
		t.Fatal(err)
	}
	for i, ch := range waits {
		if h := <-ch; !errors.Is(h.err, plugin.ErrAborted) {
			t.Errorf("node %d's wait for news after the abort: %+v, %v; want it aborted", i, h.resp, h.err)
		}
	}
	_, err := nodes[2].Fence(ctx, &plugin.FenceRequest{ID: "after", Procs: []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}},
		LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: 2}}, Node: "n3", Timeout: 10 * time.Second})
	if !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("n3's fence after the abort: %v; want it aborted", err)
	}
}
