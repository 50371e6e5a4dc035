package plugintest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

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

// testDepart: data put in a job stays readable until the job ends,
// whichever node finishes first. Node n1 gives its part of a barrier (no
// collect), departs (Depart, contract 1.2) and ends: its backend process
// is gone, as its host's is; node n0 then reads n1's ranks by direct
// modex and gets their data. A backend without "depart" is not asked.
func testDepart(t *testing.T, e *env) {
	if !e.has(plugin.CapDepart) {
		t.Skipf("the backend does not list capability %q", plugin.CapDepart)
	}
	if !slices.Contains(e.info.APIVersions, plugin.APIVersion12) {
		t.Errorf("GetInfo: capability %q is contract %s, which APIVersions %q do not list", plugin.CapDepart, plugin.APIVersion12, e.info.APIVersions)
	}
	data := [][]byte{[]byte("stays-node0;"), []byte("stays-node1;")}
	e.fenceAll(t, "world/1", data, false)
	ctx, cancel := e.ctx()
	defer cancel()
	if err := e.nodes[1].Depart(ctx, &plugin.DepartRequest{Procs: e.localProcs(1), Node: e.job.Nodes[1].Name}); err != nil {
		t.Fatalf("node 1: Depart: %v", err)
	}
	e.end(t, 1)
	for _, target := range []int32{2, 3} {
		resp, err := e.nodes[0].DirectModex(ctx, &plugin.ModexRequest{Requestor: e.proc(0), Proc: e.proc(target), Timeout: e.h.Timeout})
		if err != nil {
			t.Fatalf("node 0: DirectModex(rank %d) after its node departed: %v%s", target, err, e.explain(err))
		}
		if !bytes.Equal(resp.Data, data[1]) {
			t.Errorf("node 0: DirectModex(rank %d) after its node departed = %q; want %q", target, resp.Data, data[1])
		}
	}
}

// testHandOver: a node's hand-over of its own processes' data (a fence
// with HandOver, contract 1.3) is answered without the other nodes, and
// another node then reads the data by direct modex. A backend that does
// not list 1.3 is not asked.
func testHandOver(t *testing.T, e *env) {
	if !slices.Contains(e.info.APIVersions, plugin.APIVersion13) {
		t.Skipf("the backend does not list contract %s", plugin.APIVersion13)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	data := []byte("handed-over-by-node0;")
	local := e.localProcs(0)
	if _, err := e.nodes[0].Fence(ctx, &plugin.FenceRequest{ID: "handover/1", Procs: local, LocalProcs: local,
		Node: e.job.Nodes[0].Name, Data: data, Timeout: e.h.Timeout, HandOver: true}); err != nil {
		t.Fatalf("node 0: a hand-over of its own data: %v%s", err, e.explain(err))
	}
	resp, err := e.nodes[1].DirectModex(ctx, &plugin.ModexRequest{Requestor: e.proc(2), Proc: e.proc(0), Timeout: e.h.Timeout})
	if err != nil {
		t.Fatalf("node 1: DirectModex(rank 0) after node 0's hand-over: %v%s", err, e.explain(err))
	}
	if !bytes.Equal(resp.Data, data) {
		t.Errorf("node 1: DirectModex(rank 0) after node 0's hand-over = %q; want %q", resp.Data, data)
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
