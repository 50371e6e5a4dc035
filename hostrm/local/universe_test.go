package local

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/plugin"
)

// waitLimit bounds every wait for a goroutine's result in these tests.
const waitLimit = 10 * time.Second

// testUniverse returns a universe with one job of size ranks, ppn per
// node, on host "vm".
func testUniverse(t *testing.T, opts UniverseOptions, size, ppn int32) (*Universe, plugin.Job) {
	t.Helper()
	if opts.Hostname == "" {
		opts.Hostname = "vm"
	}
	if opts.Prefix == "" {
		opts.Prefix = "gopmi.test"
	}
	opts.PPN = int(ppn)
	if opts.Stderr == nil {
		opts.Stderr = &bytes.Buffer{}
	}
	u := NewUniverse(opts)
	t.Cleanup(u.Close)
	spec, err := u.NewJob([]AppSpec{{Path: "/bin/app", Procs: size}}, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u, spec.Job
}

func procs(ns string, ranks ...int32) []plugin.Proc {
	var ps []plugin.Proc
	for _, r := range ranks {
		ps = append(ps, plugin.Proc{Nspace: ns, Rank: r})
	}
	return ps
}

func world(ns string) []plugin.Proc { return procs(ns, plugin.RankWildcard) }

// waitFence waits, within waitLimit, until a fence with this ID has an
// arrival in the universe.
func waitFence(t *testing.T, u *Universe, id string) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		u.mu.Lock()
		found := false
		for _, f := range u.fences {
			found = found || (f.id == id && f.narrived > 0)
		}
		// An arrival broadcasts the change.
		changed := u.changed.C()
		u.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("fence %s never registered", id)
		}
	}
}

// async runs f in a goroutine; the returned function waits for its result.
func async[T any](t *testing.T, f func() (T, error)) func() (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	return func() (T, error) {
		t.Helper()
		select {
		case r := <-ch:
			return r.v, r.err
		case <-time.After(waitLimit):
			t.Fatalf("call did not return in %s", waitLimit)
			var zero T
			return zero, nil
		}
	}
}

func TestLayout(t *testing.T) {
	apps := []AppSpec{{Path: "a", Procs: 3}, {Path: "b", Procs: 2}}
	tests := []struct {
		name  string
		ppn   int
		nodes []plugin.Node
	}{
		{"one node", 0, []plugin.Node{{ID: 0, Name: "vm", Ranks: []int32{0, 1, 2, 3, 4}}}},
		{"ppn above size", 9, []plugin.Node{{ID: 0, Name: "vm", Ranks: []int32{0, 1, 2, 3, 4}}}},
		{"ppn 2", 2, []plugin.Node{
			{ID: 0, Name: "vm-0", Ranks: []int32{0, 1}},
			{ID: 1, Name: "vm-1", Ranks: []int32{2, 3}},
			{ID: 2, Name: "vm-2", Ranks: []int32{4}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Layout("j", apps, tc.ppn, "vm", 0)
			want := plugin.Job{
				Nspace: "j", Size: 5, UniverseSize: 5, Nodes: tc.nodes,
				Apps: []plugin.App{{FirstRank: 0, Size: 3, Cmd: "a"}, {FirstRank: 3, Size: 2, Cmd: "b"}},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Layout (-want +got):\n%s", d)
			}
		})
	}
	if got := Layout("j", apps, 0, "vm", 8).UniverseSize; got != 8 {
		t.Errorf("universe size %d, want 8", got)
	}
}

func TestCompressRanks(t *testing.T) {
	tests := []struct {
		in   []int32
		want string
	}{
		{[]int32{9}, "rank 9"},
		{[]int32{4, 5, 6, 7, 9}, "ranks 4-7,9"},
		{[]int32{0, 2, 3, 5}, "ranks 0,2-3,5"},
	}
	for _, tc := range tests {
		if got := plugin.RankList(tc.in); got != tc.want {
			t.Errorf("plugin.RankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConfigure(t *testing.T) {
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	ctx := context.Background()
	other := job
	other.Nodes = []plugin.Node{{ID: 0, Name: "vm", Ranks: []int32{0, 1, 2, 3}}}
	bad := plugin.Job{Nspace: "x", Size: 2, Nodes: []plugin.Node{{ID: 0, Ranks: []int32{0}}}}
	fresh := plugin.Job{Nspace: "fresh", Size: 1, Nodes: []plugin.Node{{ID: 7, Name: "n7", Ranks: []int32{0}}}}
	tests := []struct {
		name string
		req  plugin.ConfigureRequest
		want error
	}{
		{"registered job, node 0", plugin.ConfigureRequest{Job: job, NodeID: 0}, nil},
		{"registered job, node 1 again", plugin.ConfigureRequest{Job: job, NodeID: 1, APIVersion: plugin.APIVersion1}, nil},
		{"layout differs", plugin.ConfigureRequest{Job: other, NodeID: 0}, plugin.ErrInvalidArgument},
		{"unknown node", plugin.ConfigureRequest{Job: job, NodeID: 5}, plugin.ErrInvalidArgument},
		{"rank on no node", plugin.ConfigureRequest{Job: bad, NodeID: 0}, plugin.ErrInvalidArgument},
		{"api version", plugin.ConfigureRequest{Job: job, APIVersion: "9.0"}, plugin.ErrNotSupported},
		{"new job", plugin.ConfigureRequest{Job: fresh, NodeID: 7}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := u.Configure(ctx, &tc.req)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("Configure: %v, want %v", err, tc.want)
			}
		})
	}
	if q := query(t, u, plugin.Proc{}, plugin.QueryNamespaces, nil); q != "gopmi.test.0,fresh" {
		t.Errorf("namespaces %q", q)
	}
}

func fenceReq(job plugin.Job, id string, node int, data string, collect bool, timeout time.Duration) *plugin.FenceRequest {
	n := job.Nodes[node]
	return &plugin.FenceRequest{
		ID: id, Procs: world(job.Nspace), LocalProcs: procs(job.Nspace, n.Ranks...),
		Node: n.Name, Data: []byte(data), Collect: collect, Timeout: timeout,
	}
}

func TestFenceCollect(t *testing.T) {
	for _, collect := range []bool{true, false} {
		t.Run(map[bool]string{true: "collect", false: "barrier"}[collect], func(t *testing.T) {
			u, job := testUniverse(t, UniverseOptions{}, 6, 2)
			ctx := context.Background()
			var waits []func() (*plugin.FenceResponse, error)
			for i := range job.Nodes {
				waits = append(waits, async(t, func() (*plugin.FenceResponse, error) {
					return u.Fence(ctx, fenceReq(job, "world/1", i, "<"+job.Nodes[i].Name+">", collect, waitLimit))
				}))
			}
			for i, w := range waits {
				resp, err := w()
				if err != nil {
					t.Fatalf("node %d: %v", i, err)
				}
				got := string(resp.Data)
				if !collect {
					if got != "" {
						t.Errorf("node %d: barrier returned %q", i, got)
					}
					continue
				}
				if len(got) != len("<vm-0><vm-1><vm-2>") {
					t.Errorf("node %d: data %q", i, got)
				}
				for _, n := range job.Nodes {
					if !strings.Contains(got, "<"+n.Name+">") {
						t.Errorf("node %d: data %q lacks node %s", i, got, n.Name)
					}
				}
			}
			// Every node's data stays for direct modex, collected or not.
			resp, err := u.DirectModex(ctx, &plugin.ModexRequest{Requestor: procs(job.Nspace, 0)[0], Proc: procs(job.Nspace, 5)[0], Timeout: time.Second})
			if err != nil || string(resp.Data) != "<vm-2>" {
				t.Errorf("DirectModex of rank 5: %q, %v", resp, err)
			}
			// The same id can be used again once the fence completed.
			for i := range job.Nodes {
				waits[i] = async(t, func() (*plugin.FenceResponse, error) {
					return u.Fence(ctx, fenceReq(job, "world/1", i, "again", collect, waitLimit))
				})
			}
			for i, w := range waits {
				if _, err := w(); err != nil {
					t.Errorf("second fence, node %d: %v", i, err)
				}
			}
		})
	}
}

func TestFenceTimeoutNamesMissing(t *testing.T) {
	tests := []struct {
		name    string
		procs   func(ns string) []plugin.Proc
		ctxWait time.Duration // a context deadline instead of req.Timeout
		want    string
	}{
		{
			name:  "whole job",
			procs: world,
			want:  "fence world/3 of job gopmi.test.0: ranks 2-3 (node vm-1), ranks 4-5 (node vm-2) did not arrive in 50ms",
		},
		{
			name:  "some ranks",
			procs: func(ns string) []plugin.Proc { return procs(ns, 0, 1, 3, 4) },
			want:  "fence world/3 of job gopmi.test.0: rank 3 (node vm-1), rank 4 (node vm-2) did not arrive in 50ms",
		},
		{
			name:    "context deadline",
			procs:   world,
			ctxWait: 50 * time.Millisecond,
			want:    "fence world/3 of job gopmi.test.0: ranks 2-3 (node vm-1), ranks 4-5 (node vm-2) did not arrive in",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, job := testUniverse(t, UniverseOptions{}, 6, 2)
			ctx := context.Background()
			req := fenceReq(job, "world/3", 0, "x", true, 50*time.Millisecond)
			req.Procs = tc.procs(job.Nspace)
			if tc.ctxWait > 0 {
				req.Timeout = time.Hour
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxWait)
				defer cancel()
			}
			_, err := u.Fence(ctx, req)
			if !errors.Is(err, plugin.ErrTimeout) {
				t.Fatalf("Fence: %v, want ErrTimeout", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("message %q\nwant prefix %q", err, tc.want)
			}
			// A node arriving after the time-out fails at once, the same way.
			late := fenceReq(job, "world/3", 1, "y", true, time.Hour)
			late.Procs = req.Procs
			start := time.Now()
			_, err2 := u.Fence(context.Background(), late)
			if !errors.Is(err2, plugin.ErrTimeout) || err2.Error() != err.Error() {
				t.Errorf("late arrival: %v, want %v", err2, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("late arrival took %s", d)
			}
		})
	}
}

func TestFenceAbortFailsPending(t *testing.T) {
	var events []AbortEvent
	var mu sync.Mutex
	u, job := testUniverse(t, UniverseOptions{OnAbort: func(ev AbortEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}}, 4, 2)
	ctx := context.Background()
	wait := async(t, func() (*plugin.FenceResponse, error) {
		return u.Fence(ctx, fenceReq(job, "world/1", 0, "x", true, time.Hour))
	})
	modex := async(t, func() (*plugin.ModexResponse, error) {
		return u.DirectModex(ctx, &plugin.ModexRequest{Requestor: procs(job.Nspace, 0)[0], Proc: procs(job.Nspace, 3)[0], Timeout: time.Hour})
	})
	lookup := async(t, func() (*plugin.LookupResponse, error) {
		return u.Lookup(ctx, &plugin.LookupRequest{Proc: procs(job.Nspace, 1)[0], Keys: []string{"never"}, Wait: true, Timeout: time.Hour})
	})
	if err := u.Abort(ctx, &plugin.AbortRequest{Proc: procs(job.Nspace, 2)[0], Status: 7, Message: "bye"}); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("pending fence: %v, want ErrAborted", err)
	}
	if _, err := modex(); !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("pending direct modex: %v, want ErrAborted", err)
	}
	if _, err := lookup(); !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("pending lookup: %v, want ErrAborted", err)
	}
	if _, err := u.Fence(ctx, fenceReq(job, "world/2", 1, "x", true, time.Hour)); !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("fence after abort: %v, want ErrAborted", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []AbortEvent{{Proc: procs(job.Nspace, 2)[0], Status: 7, Message: "bye"}}
	if d := cmp.Diff(want, events); d != "" {
		t.Errorf("OnAbort events (-want +got):\n%s", d)
	}
	if s := query(t, u, procs(job.Nspace, 0)[0], plugin.QueryJobStatus, nil); s != "aborted: rank 2 of job gopmi.test.0 aborted with status 7: bye" {
		t.Errorf("job-status %q", s)
	}
}

func TestFenceCancelledCaller(t *testing.T) {
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	ctx, cancel := context.WithCancel(context.Background())
	wait := async(t, func() (*plugin.FenceResponse, error) {
		return u.Fence(ctx, fenceReq(job, "world/1", 0, "a", true, time.Hour))
	})
	cancel()
	if _, err := wait(); !errors.Is(err, plugin.ErrAborted) {
		t.Fatalf("cancelled fence: %v, want ErrAborted", err)
	}
	// The cancelled node's arrival and data still count.
	resp, err := u.Fence(context.Background(), fenceReq(job, "world/1", 1, "b", true, waitLimit))
	if err != nil || string(resp.Data) != "ab" {
		t.Errorf("other node: %q, %v", resp, err)
	}
}

func TestFenceBadRequests(t *testing.T) {
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	ns := job.Nspace
	first := fenceReq(job, "dup", 0, "", false, time.Hour)
	first.Procs = procs(ns, 0, 1, 2)
	first.LocalProcs = procs(ns, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pending := async(t, func() (*plugin.FenceResponse, error) { return u.Fence(ctx, first) })
	// The cases below need the first arrival in place.
	waitFence(t, u, "dup")
	tests := []struct {
		name string
		req  plugin.FenceRequest
		want error
		msg  string
	}{
		{"no id", plugin.FenceRequest{LocalProcs: procs(ns, 0)}, plugin.ErrInvalidArgument, "fence: empty id"},
		{"no local procs", plugin.FenceRequest{ID: "a"}, plugin.ErrInvalidArgument, "fence a: no local participants"},
		{"unknown job", plugin.FenceRequest{ID: "a", Procs: world("nope"), LocalProcs: procs("nope", 0)}, plugin.ErrNotFound, `fence a of job nope: participant job "nope" is unknown`},
		{"bad rank", plugin.FenceRequest{ID: "a", Procs: procs(ns, 9), LocalProcs: procs(ns, 9)}, plugin.ErrInvalidArgument, "fence a of job gopmi.test.0: job gopmi.test.0 has no rank 9"},
		{"not a participant", plugin.FenceRequest{ID: "a", Procs: procs(ns, 0, 1), LocalProcs: procs(ns, 2)}, plugin.ErrInvalidArgument, "fence a of job gopmi.test.0: gopmi.test.0:2 is not a participant"},
		{"arrived twice", plugin.FenceRequest{ID: "dup", Procs: procs(ns, 2, 1, 0), LocalProcs: procs(ns, 0)}, plugin.ErrInvalidArgument, "fence dup of job gopmi.test.0: gopmi.test.0:0 arrived twice"},
		{"other participants", plugin.FenceRequest{ID: "dup", Procs: procs(ns, 0, 1), LocalProcs: procs(ns, 1), Node: "vm-0"}, plugin.ErrInvalidArgument, "fence dup of job gopmi.test.0: node vm-0 names other participants than the first node did"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := u.Fence(context.Background(), &tc.req)
			if !errors.Is(err, tc.want) || err.Error() != tc.msg {
				t.Errorf("Fence: %v, want %q (%v)", err, tc.msg, tc.want)
			}
		})
	}
	// The refused requests did not disturb the pending fence.
	r := fenceReq(job, "dup", 0, "", false, waitLimit)
	r.Procs, r.LocalProcs = procs(ns, 0, 1, 2), procs(ns, 1, 2)
	if _, err := u.Fence(context.Background(), r); err != nil {
		t.Errorf("completing fence: %v", err)
	}
	if _, err := pending(); err != nil {
		t.Errorf("pending fence: %v", err)
	}
}

func TestFenceAcrossJobs(t *testing.T) {
	u, a := testUniverse(t, UniverseOptions{}, 2, 0)
	spec, err := u.NewJob([]AppSpec{{Path: "b", Procs: 3}}, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := spec.Job
	all := []plugin.Proc{{Nspace: b.Nspace, Rank: plugin.RankWildcard}, {Nspace: a.Nspace, Rank: plugin.RankWildcard}}
	ctx := context.Background()
	wa := async(t, func() (*plugin.FenceResponse, error) {
		return u.Fence(ctx, &plugin.FenceRequest{ID: "c/1", Procs: all, LocalProcs: world(a.Nspace), Data: []byte("A"), Collect: true, Timeout: waitLimit})
	})
	// Listed in another order by the other job: still the same collective.
	rb, err := u.Fence(ctx, &plugin.FenceRequest{ID: "c/1", Procs: []plugin.Proc{all[1], all[0]}, LocalProcs: procs(b.Nspace, 0, 1, 2), Data: []byte("B"), Collect: true, Timeout: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	ra, err := wa()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*plugin.FenceResponse{ra, rb} {
		if got := string(r.Data); got != "AB" && got != "BA" {
			t.Errorf("data %q", got)
		}
	}
	// A cross-job time-out names the job of each missing group.
	_, err = u.Fence(ctx, &plugin.FenceRequest{ID: "c/2", Procs: all, LocalProcs: world(a.Nspace), Timeout: 20 * time.Millisecond})
	want := "fence c/2 of jobs gopmi.test.0,gopmi.test.1: job gopmi.test.1 ranks 0-2 (node vm) did not arrive in 20ms"
	if !errors.Is(err, plugin.ErrTimeout) || err.Error() != want {
		t.Errorf("cross-job time-out: %v\nwant %q", err, want)
	}
}

func TestDirectModex(t *testing.T) {
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	ctx := context.Background()
	me := procs(job.Nspace, 0)[0]
	// Waits for the first contribution of the node hosting rank 3.
	wait := async(t, func() (*plugin.ModexResponse, error) {
		return u.DirectModex(ctx, &plugin.ModexRequest{Requestor: me, Proc: procs(job.Nspace, 3)[0], Timeout: waitLimit})
	})
	fence := async(t, func() (*plugin.FenceResponse, error) {
		return u.Fence(ctx, fenceReq(job, "world/1", 1, "node1-data", false, time.Hour))
	})
	resp, err := wait()
	if err != nil || string(resp.Data) != "node1-data" {
		t.Errorf("DirectModex: %q, %v", resp, err)
	}
	if _, err := u.Fence(ctx, fenceReq(job, "world/1", 0, "", false, waitLimit)); err != nil {
		t.Fatal(err)
	}
	if _, err := fence(); err != nil {
		t.Fatal(err)
	}
	// Node 0 contributed nothing (empty data counts as a contribution).
	resp, err = u.DirectModex(ctx, &plugin.ModexRequest{Requestor: me, Proc: procs(job.Nspace, 1)[0], Timeout: time.Second})
	if err != nil || len(resp.Data) != 0 {
		t.Errorf("DirectModex of node 0: %q, %v", resp, err)
	}

	// Each fence adds to a node's data: a host sends only the puts made
	// since the previous fence.
	w2 := async(t, func() (*plugin.FenceResponse, error) {
		return u.Fence(ctx, fenceReq(job, "world/2", 1, "+more", false, waitLimit))
	})
	if _, err := u.Fence(ctx, fenceReq(job, "world/2", 0, "n0", false, waitLimit)); err != nil {
		t.Fatal(err)
	}
	if _, err := w2(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rank int32
		want string
	}{{3, "node1-data+more"}, {0, "n0"}, {plugin.RankWildcard, "n0node1-data+more"}} {
		resp, err := u.DirectModex(ctx, &plugin.ModexRequest{Requestor: me, Proc: plugin.Proc{Nspace: job.Nspace, Rank: c.rank}, Timeout: time.Second})
		if err != nil || string(resp.Data) != c.want {
			t.Errorf("DirectModex of rank %d: %q, %v; want %q", c.rank, resp, err, c.want)
		}
	}

	tests := []struct {
		name string
		req  plugin.ModexRequest
		want error
		msg  string
	}{
		{"unknown job", plugin.ModexRequest{Requestor: me, Proc: plugin.Proc{Nspace: "x", Rank: 0}}, plugin.ErrNotFound, `direct modex of x:0 for gopmi.test.0:0: no job "x"`},
		{"bad rank", plugin.ModexRequest{Requestor: me, Proc: procs(job.Nspace, 4)[0]}, plugin.ErrInvalidArgument, "direct modex of gopmi.test.0:4 for gopmi.test.0:0: job gopmi.test.0 has no rank 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := u.DirectModex(ctx, &tc.req)
			if !errors.Is(err, tc.want) || err.Error() != tc.msg {
				t.Errorf("DirectModex: %v, want %q", err, tc.msg)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		u, job := testUniverse(t, UniverseOptions{}, 4, 2)
		_, err := u.DirectModex(ctx, &plugin.ModexRequest{Requestor: procs(job.Nspace, 0)[0], Proc: procs(job.Nspace, 2)[0], Timeout: 30 * time.Millisecond})
		want := "direct modex of gopmi.test.0:2 for gopmi.test.0:0: node vm-1 contributed no data in 30ms"
		if !errors.Is(err, plugin.ErrTimeout) || err.Error() != want {
			t.Errorf("DirectModex: %v, want %q", err, want)
		}
		// For the whole job, the requestor's own node is not waited for.
		_, err = u.DirectModex(ctx, &plugin.ModexRequest{Requestor: procs(job.Nspace, 0)[0], Proc: world(job.Nspace)[0], Timeout: 30 * time.Millisecond})
		want = "direct modex of gopmi.test.0:* for gopmi.test.0:0: node vm-1 contributed no data in 30ms"
		if !errors.Is(err, plugin.ErrTimeout) || err.Error() != want {
			t.Errorf("DirectModex of the job: %v, want %q", err, want)
		}
		_, err = u.DirectModex(ctx, &plugin.ModexRequest{Requestor: plugin.Proc{Nspace: "other", Rank: 0}, Proc: world(job.Nspace)[0], Timeout: 30 * time.Millisecond})
		want = "direct modex of gopmi.test.0:* for other:0: nodes vm-0,vm-1 contributed no data in 30ms"
		if !errors.Is(err, plugin.ErrTimeout) || err.Error() != want {
			t.Errorf("DirectModex of the job from another job: %v, want %q", err, want)
		}
	})
	t.Run("single node job", func(t *testing.T) {
		u, job := testUniverse(t, UniverseOptions{}, 2, 0)
		resp, err := u.DirectModex(ctx, &plugin.ModexRequest{Requestor: procs(job.Nspace, 1)[0], Proc: world(job.Nspace)[0], Timeout: time.Hour})
		if err != nil || len(resp.Data) != 0 {
			t.Errorf("DirectModex of a one-node job from inside: %q, %v", resp, err)
		}
	})
}

// query asks u one key and returns its value ("" when not answered).
func query(t *testing.T, u *Universe, who plugin.Proc, key string, quals []plugin.Info) string {
	t.Helper()
	resp, err := u.Query(context.Background(), &plugin.QueryRequest{Proc: who, Queries: []plugin.Query{{Keys: []string{key}, Qualifiers: quals}}})
	if err != nil {
		if errors.Is(err, plugin.ErrNotFound) {
			return ""
		}
		t.Fatalf("Query %s: %v", key, err)
	}
	return resp.Results[0].Value
}

func TestQuery(t *testing.T) {
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	ctx := context.Background()
	ns := job.Nspace
	p := func(r int32) plugin.Proc { return plugin.Proc{Nspace: ns, Rank: r} }
	u.TaskStarted(p(0), 100)
	u.TaskStarted(p(1), 101)
	u.TaskStarted(p(2), 102)
	if err := u.ClientConnected(ctx, &plugin.ClientRequest{Procs: []plugin.Proc{p(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := u.ClientFinalized(ctx, &plugin.ClientRequest{Procs: []plugin.Proc{p(2)}}); err != nil {
		t.Fatal(err)
	}
	u.TaskExited(p(0), "exited(0)")

	tests := []struct {
		name  string
		who   plugin.Proc
		key   string
		quals []plugin.Info
		want  string
	}{
		{"namespaces", p(0), plugin.QueryNamespaces, nil, ns},
		{"job status", p(0), plugin.QueryJobStatus, nil, "running"},
		{"job status by qualifier", plugin.Proc{}, plugin.QueryJobStatus, []plugin.Info{{Key: plugin.QualNspace, Value: ns}}, "running"},
		{"proc table", p(3), plugin.QueryProcTable, nil, `[{"rank":0,"node":"vm-0","pid":100,"state":"exited","app":"/bin/app"},{"rank":1,"node":"vm-0","pid":101,"state":"connected","app":"/bin/app"},{"rank":2,"node":"vm-1","pid":102,"state":"finalized","app":"/bin/app"},{"rank":3,"node":"vm-1","state":"pending","app":"/bin/app"}]`},
		{"proc table by its 1.0 name", p(3), "proc-table", []plugin.Info{{Key: "nspace", Value: ns}}, `[{"rank":0,"node":"vm-0","pid":100,"state":"exited","app":"/bin/app"},{"rank":1,"node":"vm-0","pid":101,"state":"connected","app":"/bin/app"},{"rank":2,"node":"vm-1","pid":102,"state":"finalized","app":"/bin/app"},{"rank":3,"node":"vm-1","state":"pending","app":"/bin/app"}]`},
		{"local proc table by host name", p(0), plugin.QueryLocalProcTable, []plugin.Info{{Key: plugin.QualHostname, Value: "vm-1"}}, `[{"rank":2,"node":"vm-1","pid":102,"state":"finalized","app":"/bin/app"},{"rank":3,"node":"vm-1","state":"pending","app":"/bin/app"}]`},
		{"node list", p(0), plugin.QueryNodeList, nil, "vm-0,vm-1"},
		{"local peers by host name", p(0), plugin.QueryLocalPeers, []plugin.Info{{Key: plugin.QualHostname, Value: "vm-1"}}, "2,3"},
		{"local peers by the 1.0 qualifier", p(0), "local-peers", []plugin.Info{{Key: "nodeid", Value: "1"}}, "2,3"},
		{"local peers of the requestor", p(3), plugin.QueryLocalPeers, nil, "2,3"},
		{"local peers by node id", p(3), plugin.QueryLocalPeers, []plugin.Info{{Key: plugin.QualNodeID, Value: "0"}}, "0,1"},
		{"unknown node id", p(3), plugin.QueryLocalPeers, []plugin.Info{{Key: plugin.QualNodeID, Value: "9"}}, ""},
		{"unknown job", p(3), plugin.QueryProcTable, []plugin.Info{{Key: plugin.QualNspace, Value: "nope"}}, ""},
		{"unknown key", p(3), "pmix.qry.unknown", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := query(t, u, tc.who, tc.key, tc.quals); got != tc.want {
				t.Errorf("Query %s = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
	// Known keys are answered, unknown ones left out.
	resp, err := u.Query(ctx, &plugin.QueryRequest{Proc: p(0), Queries: []plugin.Query{{Keys: []string{"nope", plugin.QueryJobStatus}}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]plugin.Info{{Key: plugin.QueryJobStatus, Value: "running"}}, resp.Results); d != "" {
		t.Errorf("mixed query (-want +got):\n%s", d)
	}
	u.EndJob(ns, "")
	if got := query(t, u, p(0), plugin.QueryJobStatus, nil); got != "finished" {
		t.Errorf("job status after EndJob: %q", got)
	}
}

func TestLog(t *testing.T) {
	var buf bytes.Buffer
	u, job := testUniverse(t, UniverseOptions{Stderr: &buf}, 2, 0)
	err := u.Log(context.Background(), &plugin.LogRequest{
		Proc: plugin.Proc{Nspace: job.Nspace, Rank: 1},
		Data: []plugin.Info{{Key: "stderr", Value: "two\nlines\n"}, {Key: "color", Value: "blue"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "gopmi: [gopmi.test.0:1] two\ngopmi: [gopmi.test.0:1] lines\ngopmi: [gopmi.test.0:1] color=blue\n"
	if got := buf.String(); got != want {
		t.Errorf("log output %q, want %q", got, want)
	}
}

func TestNotifyEvent(t *testing.T) {
	type failure struct {
		proc   plugin.Proc
		reason string
	}
	failures := make(chan failure, 1)
	u, job := testUniverse(t, UniverseOptions{OnProcFailed: func(p plugin.Proc, reason string) {
		failures <- failure{p, reason}
	}}, 4, 2)
	ctx := context.Background()
	ns := job.Nspace
	wait := async(t, func() (*plugin.FenceResponse, error) {
		return u.Fence(ctx, fenceReq(job, "world/1", 0, "x", true, time.Hour))
	})
	// A terminated proc loses its PersistProc names.
	if err := u.Publish(ctx, &plugin.PublishRequest{Proc: plugin.Proc{Nspace: ns, Rank: 3}, Data: []plugin.Info{{Key: "p", Value: "v"}}, Persistence: plugin.PersistProc}); err != nil {
		t.Fatal(err)
	}
	if err := u.NotifyEvent(ctx, &plugin.EventRequest{Code: plugin.EventProcTerminated, Source: plugin.Proc{Nspace: ns, Rank: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Lookup(ctx, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: ns, Rank: 0}, Keys: []string{"p"}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("lookup of a terminated proc's name: %v, want ErrNotFound", err)
	}
	err := u.NotifyEvent(ctx, &plugin.EventRequest{
		Code: plugin.EventProcAborted, Source: plugin.Proc{Nspace: ns, Rank: 2},
		Info: []plugin.Info{{Key: "reason", Value: "closed its PMI connection before finalize"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-failures:
		want := failure{plugin.Proc{Nspace: ns, Rank: 2}, "closed its PMI connection before finalize"}
		if f != want {
			t.Errorf("OnProcFailed(%v), want %v", f, want)
		}
	case <-time.After(waitLimit):
		t.Fatal("OnProcFailed not called")
	}
	if _, err := wait(); !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("pending fence: %v, want ErrAborted", err)
	}
	if got := query(t, u, plugin.Proc{Nspace: ns}, plugin.QueryJobStatus, nil); got != "failed: rank 2: closed its PMI connection before finalize" {
		t.Errorf("job status %q", got)
	}
	if err := u.NotifyEvent(ctx, &plugin.EventRequest{Code: "x-unknown", Source: plugin.Proc{Nspace: ns, Rank: 0}}); err != nil {
		t.Errorf("unknown event: %v, want it ignored", err)
	}
}

func TestNameService(t *testing.T) {
	ctx := context.Background()
	// Two jobs: A (4 ranks, nodes vm-0 and vm-1) and B (2 ranks on vm-0).
	setup := func(t *testing.T) (*Universe, func(ns string, r int32) plugin.Proc, string, string) {
		u, a := testUniverse(t, UniverseOptions{}, 4, 2)
		spec, err := u.NewJob([]AppSpec{{Path: "b", Procs: 2}}, a.Nspace, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return u, func(ns string, r int32) plugin.Proc { return plugin.Proc{Nspace: ns, Rank: r} }, a.Nspace, spec.Job.Nspace
	}
	pub := func(u *Universe, p plugin.Proc, key string, rng plugin.Range, persist plugin.Persistence) error {
		return u.Publish(ctx, &plugin.PublishRequest{Proc: p, Data: []plugin.Info{{Key: key, Value: key + "-value"}}, Range: rng, Persistence: persist})
	}
	look := func(u *Universe, p plugin.Proc, keys ...string) (*plugin.LookupResponse, error) {
		return u.Lookup(ctx, &plugin.LookupRequest{Proc: p, Keys: keys})
	}

	t.Run("session range is seen by every job", func(t *testing.T) {
		u, p, a, b := setup(t)
		if err := pub(u, p(a, 0), "svc", plugin.RangeDefault, plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
		resp, err := look(u, p(b, 1), "svc", "other")
		if err != nil {
			t.Fatal(err)
		}
		want := []plugin.Published{{Key: "svc", Value: "svc-value", Publisher: p(a, 0)}}
		if d := cmp.Diff(want, resp.Data); d != "" {
			t.Errorf("lookup (-want +got):\n%s", d)
		}
		err = pub(u, p(b, 0), "svc", plugin.RangeGlobal, plugin.PersistDefault)
		if !errors.Is(err, plugin.ErrAlreadyExists) || err.Error() != `publish: "svc" is already published by gopmi.test.0:0` {
			t.Errorf("duplicate publish: %v", err)
		}
	})
	t.Run("namespace range", func(t *testing.T) {
		u, p, a, b := setup(t)
		if err := pub(u, p(a, 0), "ns", plugin.RangeNamespace, plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
		if _, err := look(u, p(a, 3), "ns"); err != nil {
			t.Errorf("same job: %v", err)
		}
		if _, err := look(u, p(b, 0), "ns"); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("other job: %v, want ErrNotFound", err)
		}
		// Another job may use the same name in its own namespace.
		if err := pub(u, p(b, 0), "ns", plugin.RangeNamespace, plugin.PersistDefault); err != nil {
			t.Errorf("same name in another job's namespace: %v", err)
		}
	})
	t.Run("local range", func(t *testing.T) {
		u, p, a, b := setup(t)
		if err := pub(u, p(a, 2), "loc", plugin.RangeLocal, plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
		if _, err := look(u, p(a, 3), "loc"); err != nil {
			t.Errorf("same node: %v", err)
		}
		if _, err := look(u, p(a, 0), "loc"); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("other node: %v, want ErrNotFound", err)
		}
		if _, err := look(u, p(b, 0), "loc"); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("other job's node vm: %v, want ErrNotFound", err)
		}
	})
	t.Run("first read", func(t *testing.T) {
		u, p, a, _ := setup(t)
		if err := pub(u, p(a, 0), "once", plugin.RangeDefault, plugin.PersistFirstRead); err != nil {
			t.Fatal(err)
		}
		if _, err := look(u, p(a, 1), "once"); err != nil {
			t.Errorf("first lookup: %v", err)
		}
		if _, err := look(u, p(a, 1), "once"); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("second lookup: %v, want ErrNotFound", err)
		}
	})
	t.Run("persistence ends with the process or job", func(t *testing.T) {
		u, p, a, b := setup(t)
		for _, c := range []struct {
			key     string
			who     plugin.Proc
			persist plugin.Persistence
		}{{"proc", p(a, 1), plugin.PersistProc}, {"app", p(b, 0), plugin.PersistApp}, {"session", p(b, 1), plugin.PersistSession}} {
			if err := pub(u, c.who, c.key, plugin.RangeDefault, c.persist); err != nil {
				t.Fatal(err)
			}
		}
		u.TaskExited(p(a, 1), "exited(0)")
		u.EndJob(b, "")
		for key, want := range map[string]error{"proc": plugin.ErrNotFound, "app": plugin.ErrNotFound, "session": nil} {
			if _, err := look(u, p(a, 0), key); !errors.Is(err, want) || (want == nil && err != nil) {
				t.Errorf("lookup %s: %v, want %v", key, err, want)
			}
		}
	})
	t.Run("wait", func(t *testing.T) {
		u, p, a, b := setup(t)
		wait := async(t, func() (*plugin.LookupResponse, error) {
			return u.Lookup(ctx, &plugin.LookupRequest{Proc: p(b, 0), Keys: []string{"late", "later"}, Wait: true, Timeout: waitLimit})
		})
		if err := pub(u, p(a, 0), "late", plugin.RangeDefault, plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
		if err := pub(u, p(a, 1), "later", plugin.RangeDefault, plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
		resp, err := wait()
		if err != nil || len(resp.Data) != 2 {
			t.Errorf("waiting lookup: %v, %v", resp, err)
		}
		_, err = u.Lookup(ctx, &plugin.LookupRequest{Proc: p(b, 0), Keys: []string{"late", "never"}, Wait: true, Timeout: 30 * time.Millisecond})
		if !errors.Is(err, plugin.ErrTimeout) || err.Error() != "lookup of never: not published within 30ms" {
			t.Errorf("lookup time-out: %v", err)
		}
	})
	t.Run("unpublish", func(t *testing.T) {
		u, p, a, b := setup(t)
		for _, k := range []string{"x", "y", "z"} {
			if err := pub(u, p(a, 0), k, plugin.RangeDefault, plugin.PersistDefault); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub(u, p(a, 1), "w", plugin.RangeDefault, plugin.PersistDefault); err != nil {
			t.Fatal(err)
		}
		err := u.Unpublish(ctx, &plugin.UnpublishRequest{Proc: p(b, 0), Keys: []string{"x"}})
		if !errors.Is(err, plugin.ErrPermission) {
			t.Errorf("unpublish by another job: %v, want ErrPermission", err)
		}
		if err := u.Unpublish(ctx, &plugin.UnpublishRequest{Proc: p(a, 3), Keys: []string{"x"}}); err != nil {
			t.Errorf("unpublish by the same job: %v", err)
		}
		if err := u.Unpublish(ctx, &plugin.UnpublishRequest{Proc: p(a, 3), Keys: []string{"x"}}); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("unpublish twice: %v, want ErrNotFound", err)
		}
		if err := u.Unpublish(ctx, &plugin.UnpublishRequest{Proc: p(a, 0)}); err != nil {
			t.Errorf("unpublish all: %v", err)
		}
		if _, err := look(u, p(a, 0), "y", "z"); !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("after unpublish all: %v, want ErrNotFound", err)
		}
		if _, err := look(u, p(a, 0), "w"); err != nil {
			t.Errorf("another proc's name: %v", err)
		}
	})
	t.Run("directives are refused by name", func(t *testing.T) {
		u, p, a, _ := setup(t)
		err := u.Publish(ctx, &plugin.PublishRequest{Proc: p(a, 0), Data: []plugin.Info{{Key: "k", Value: "v"}}, Info: []plugin.Info{{Key: "pmix.timeout"}}})
		if !errors.Is(err, plugin.ErrNotSupported) || !strings.Contains(err.Error(), `"pmix.timeout"`) {
			t.Errorf("publish with info: %v", err)
		}
		_, err = u.Lookup(ctx, &plugin.LookupRequest{Proc: p(a, 0), Keys: []string{"k"}, Info: []plugin.Info{{Key: "weird"}}})
		if !errors.Is(err, plugin.ErrNotSupported) || !strings.Contains(err.Error(), `"weird"`) {
			t.Errorf("lookup with info: %v", err)
		}
	})
}

// exe writes an executable script and returns its path.
func exe(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpawn(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	bin := filepath.Join(base, "bin")
	work := filepath.Join(base, "work")
	for _, d := range []string{bin, work, filepath.Join(work, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	child := exe(t, bin, "child")
	onPath := exe(t, bin, "onpath")
	local := exe(t, work, "local")

	tests := []struct {
		name    string
		apps    []plugin.SpawnApp
		jobInfo []plugin.Info
		want    []AppSpec // nil when an error is expected
		err     error
		msg     string
	}{
		{
			name: "path info key, wdir, env",
			apps: []plugin.SpawnApp{{Cmd: "child", Argv: []string{"-x"}, MaxProcs: 2, Env: []string{"A=1"}, Info: []plugin.Info{
				{Key: "path", Value: "/nonexistent:" + bin}, {Key: "wdir", Value: "sub"}, {Key: "env", Value: "B=2 C=3"},
			}}},
			want: []AppSpec{{Path: child, Args: []string{"-x"}, Env: []string{"A=1", "B=2", "C=3"}, Dir: filepath.Join(work, "sub"), Procs: 2}},
		},
		{
			name: "PATH, relative command, newline env, this host",
			apps: []plugin.SpawnApp{
				{Cmd: "onpath", MaxProcs: 1, Info: []plugin.Info{{Key: "env", Value: "X=a b\nY=c\n"}, {Key: "host", Value: "vm"}}},
				{Cmd: "./local", MaxProcs: 3, Info: []plugin.Info{{Key: "hosts", Value: "localhost:2,vm-1,127.0.0.1"}}},
			},
			want: []AppSpec{
				{Path: onPath, Env: []string{"X=a b", "Y=c"}, Dir: work, Procs: 1},
				{Path: local, Dir: work, Procs: 3},
			},
		},
		{
			name: "unknown info key",
			apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1, Info: []plugin.Info{{Key: "map_by", Value: "core"}}}},
			err:  plugin.ErrNotSupported,
			msg:  `spawn: info key "map_by" is not supported by gopmi run`,
		},
		{
			name:    "job info key",
			apps:    []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1}},
			jobInfo: []plugin.Info{{Key: "pmix.timeout", Value: "5"}},
			err:     plugin.ErrNotSupported,
			msg:     `spawn: job info key "pmix.timeout" is not supported by gopmi run`,
		},
		{
			name: "another host",
			apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1, Info: []plugin.Info{{Key: "host", Value: "vm,node7"}}}},
			err:  plugin.ErrNotSupported,
			msg:  `spawn: host "node7" is not this machine (gopmi-rm-local runs every job on vm)`,
		},
		{
			name: "command not found",
			apps: []plugin.SpawnApp{{Cmd: "nosuch", MaxProcs: 1}},
			err:  plugin.ErrNotFound,
			msg:  `spawn: command "nosuch" not found in PATH or the working directory ` + work,
		},
		{
			name: "bad env",
			apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1, Info: []plugin.Info{{Key: "env", Value: "novalue"}}}},
			err:  plugin.ErrInvalidArgument,
			msg:  `spawn: info key "env": "novalue" is not KEY=VALUE`,
		},
		{
			name: "no procs",
			apps: []plugin.SpawnApp{{Cmd: "child"}},
			err:  plugin.ErrInvalidArgument,
			msg:  "spawn child: maxprocs 0",
		},
		{
			name: "second app fails",
			apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1}, {Cmd: "child", MaxProcs: 1, Info: []plugin.Info{{Key: "soft", Value: "1"}}}},
			err:  plugin.ErrNotSupported,
			msg:  `spawn: app 1: spawn: info key "soft" is not supported by gopmi run`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var launched []*JobSpec
			u, job := testUniverse(t, UniverseOptions{
				Wdir: work, Env: []string{"PATH=" + bin}, UniverseSize: 8,
				Launch: func(ctx context.Context, spec *JobSpec) error {
					launched = append(launched, spec)
					return nil
				},
			}, 2, 0)
			requestor := plugin.Proc{Nspace: job.Nspace, Rank: 1}
			preput := []plugin.Info{{Key: "PARENT_ROOT_PORT_NAME", Value: "tag#0$"}}
			resp, err := u.Spawn(ctx, &plugin.SpawnRequest{Requestor: requestor, Apps: tc.apps, JobInfo: tc.jobInfo, Preput: preput})
			if tc.want == nil {
				if !errors.Is(err, tc.err) || err.Error() != tc.msg {
					t.Fatalf("Spawn: %v\nwant %q (%v)", err, tc.msg, tc.err)
				}
				if len(launched) != 0 {
					t.Errorf("launched %d jobs after a refused spawn", len(launched))
				}
				return
			}
			if err != nil {
				t.Fatalf("Spawn: %v", err)
			}
			if len(launched) != 1 {
				t.Fatalf("launched %d jobs", len(launched))
			}
			spec := launched[0]
			if resp.Nspace != "gopmi.test.1" || spec.Job.Nspace != resp.Nspace {
				t.Errorf("new job %q, spec %q", resp.Nspace, spec.Job.Nspace)
			}
			if !spec.Spawned || spec.Job.Parent != job.Nspace || spec.Job.UniverseSize != 8 {
				t.Errorf("spec: spawned %v parent %q universe size %d", spec.Spawned, spec.Job.Parent, spec.Job.UniverseSize)
			}
			if d := cmp.Diff(tc.want, spec.Apps); d != "" {
				t.Errorf("apps (-want +got):\n%s", d)
			}
			if d := cmp.Diff(preput, spec.Preput); d != "" {
				t.Errorf("preput (-want +got):\n%s", d)
			}
			if got := query(t, u, requestor, plugin.QueryNamespaces, nil); got != "gopmi.test.0,gopmi.test.1" {
				t.Errorf("namespaces %q", got)
			}
		})
	}

	t.Run("launch fails", func(t *testing.T) {
		u, job := testUniverse(t, UniverseOptions{Wdir: work, Env: []string{"PATH=" + bin},
			Launch: func(ctx context.Context, spec *JobSpec) error {
				return errors.New("gopmi-shim for job gopmi.test.1 node 0 failed to start: boom")
			}}, 1, 0)
		_, err := u.Spawn(ctx, &plugin.SpawnRequest{Requestor: plugin.Proc{Nspace: job.Nspace}, Apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1}}})
		want := "spawn of gopmi.test.1: gopmi-shim for job gopmi.test.1 node 0 failed to start: boom"
		if !errors.Is(err, plugin.ErrUnavailable) || err.Error() != want {
			t.Errorf("Spawn: %v\nwant %q", err, want)
		}
		if got := query(t, u, plugin.Proc{Nspace: "gopmi.test.1"}, plugin.QueryJobStatus, nil); !strings.HasPrefix(got, "failed: launch failed") {
			t.Errorf("spawned job status %q", got)
		}
	})
	t.Run("launch times out", func(t *testing.T) {
		u, job := testUniverse(t, UniverseOptions{Wdir: work, Env: []string{"PATH=" + bin},
			Launch: func(ctx context.Context, spec *JobSpec) error {
				<-ctx.Done()
				return ctx.Err()
			}}, 1, 0)
		_, err := u.Spawn(ctx, &plugin.SpawnRequest{Requestor: plugin.Proc{Nspace: job.Nspace}, Apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1}}, Timeout: 30 * time.Millisecond})
		if !errors.Is(err, plugin.ErrTimeout) || !strings.HasPrefix(err.Error(), "spawn of gopmi.test.1: not started within 30ms") {
			t.Errorf("Spawn: %v", err)
		}
	})
	t.Run("no launcher", func(t *testing.T) {
		u, job := testUniverse(t, UniverseOptions{}, 1, 0)
		_, err := u.Spawn(ctx, &plugin.SpawnRequest{Requestor: plugin.Proc{Nspace: job.Nspace}, Apps: []plugin.SpawnApp{{Cmd: "child", MaxProcs: 1}}})
		if !errors.Is(err, plugin.ErrNotSupported) {
			t.Errorf("Spawn: %v", err)
		}
		info, _ := u.GetInfo(ctx)
		if slices.Contains(info.Capabilities, plugin.CapSpawn) {
			t.Errorf("capabilities %v advertise spawn without a launcher", info.Capabilities)
		}
	})
}

// With LayoutByRM the resource manager places a spawned job's ranks: the
// first Configure replaces NewJob's provisional layout, the other nodes
// must agree with it, and Configured says when every node is in.
func TestLayoutByRM(t *testing.T) {
	ctx := context.Background()
	for _, byRM := range []bool{false, true} {
		u := NewUniverse(UniverseOptions{Hostname: "h", LayoutByRM: byRM})
		spec, err := u.NewJob([]AppSpec{{Path: "/bin/app", Procs: 2}}, "parent", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		placed := plugin.Job{Nspace: spec.Job.Nspace, Size: 2, Nodes: []plugin.Node{
			{ID: 0, Name: "n1", Ranks: []int32{0}}, {ID: 1, Name: "n2", Ranks: []int32{1}},
		}}
		_, err = u.Configure(ctx, &plugin.ConfigureRequest{Job: placed, NodeID: 0})
		if !byRM {
			if !errors.Is(err, plugin.ErrInvalidArgument) || !strings.Contains(err.Error(), "layout differs") {
				t.Fatalf("without LayoutByRM: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if all, nodes := u.Configured(spec.Job.Nspace); all || nodes != 2 {
			t.Fatalf("after one node: all=%v nodes=%d", all, nodes)
		}
		other := placed
		other.Nodes = []plugin.Node{{ID: 0, Name: "n1", Ranks: []int32{0, 1}}}
		if _, err := u.Configure(ctx, &plugin.ConfigureRequest{Job: other, NodeID: 0}); !errors.Is(err, plugin.ErrInvalidArgument) {
			t.Fatalf("a second, different layout: %v", err)
		}
		if _, err := u.Configure(ctx, &plugin.ConfigureRequest{Job: placed, NodeID: 1}); err != nil {
			t.Fatal(err)
		}
		if all, _ := u.Configured(spec.Job.Nspace); !all {
			t.Fatal("every node configured, Configured says not")
		}
		u.Close()
	}
}
