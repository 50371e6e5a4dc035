package slurm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	treev1 "github.com/gopmi/gopmi/proto/gopmi/tree/v1"
)

// A collecting fence of a whole job on a flat tree is exchanged: every
// node gets every node's part, in node order, while the coordinator sees
// a barrier without data; a fence of some ranks only, and a barrier, go
// through the coordinator as before.
func TestExchangeGivesEveryNodeEveryPart(t *testing.T) {
	var count *counting
	step := newTestStep(t, 41, 3, 0, func(root plugin.Full) plugin.Full { count = &counting{Full: root}; return count })
	job := step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := step.nodes(ctx, t)
	fence := func(id string, procs []plugin.Proc, who []int) []*plugin.FenceResponse {
		out := make([]*plugin.FenceResponse, len(nodes))
		var wg sync.WaitGroup
		for _, i := range who {
			wg.Go(func() {
				resp, err := nodes[i].Fence(ctx, &plugin.FenceRequest{
					ID: id, Procs: procs, LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: int32(i)}}, Node: job.Nodes[i].Name,
					Data: fmt.Appendf(nil, "%s.d%d;", id, i), Collect: true, Timeout: 5 * time.Second,
				})
				if err != nil {
					t.Errorf("node %d: fence %s: %v", i, id, err)
				}
				out[i] = resp
			})
		}
		wg.Wait()
		return out
	}
	calls := func() []*plugin.FenceRequest {
		count.mu.Lock()
		defer count.mu.Unlock()
		got := count.fences
		count.fences = nil
		return got
	}
	world := []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}}
	for round := range 3 {
		id := fmt.Sprintf("world/%d", round)
		for i, r := range fence(id, world, []int{0, 1, 2}) {
			if want := fmt.Sprintf("%[1]s.d0;%[1]s.d1;%[1]s.d2;", id); r == nil || string(r.Data) != want {
				t.Fatalf("node %d: fence %s answered %v, want %q", i, id, r, want)
			}
		}
		got := calls()
		if len(got) != 3 {
			t.Fatalf("fence %s: the coordinator saw %d calls, want each node's barrier", id, len(got))
		}
		for _, c := range got {
			if c.Collect || len(c.Data) != 0 || c.ID != id {
				t.Fatalf("fence %s reached the coordinator as %+v, want a barrier of that ID without data", id, c)
			}
		}
	}
	// Two ranks of three: the tree carries their data, as before.
	some := []plugin.Proc{{Nspace: job.Nspace, Rank: 0}, {Nspace: job.Nspace, Rank: 2}}
	answers := fence("some/1", some, []int{0, 2})
	for _, i := range []int{0, 2} {
		if r := answers[i]; r == nil || !strings.Contains(string(r.Data), "some/1.d0;") || !strings.Contains(string(r.Data), "some/1.d2;") {
			t.Fatalf("node %d: a fence of ranks 0 and 2 answered %v", i, r)
		}
	}
	for _, c := range calls() {
		if !c.Collect || len(c.Data) == 0 {
			t.Fatalf("a fence of ranks 0 and 2 reached the coordinator as %+v, want their data", c)
		}
	}
	for i, n := range nodes {
		tr := n.placed()
		tr.ex.mu.Lock()
		if len(tr.ex.boxes) != 0 {
			t.Errorf("node %d keeps %d mailboxes after its fences", i, len(tr.ex.boxes))
		}
		tr.ex.mu.Unlock()
	}
}

// A node that never comes to an exchanged fence is named by the
// coordinator's time-out, as in any fence; a part from a node that is
// not the job's is refused by name.
func TestExchangeNamesWhoNeverCame(t *testing.T) {
	step := newTestStep(t, 42, 3, 0, nil)
	job := step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := step.nodes(ctx, t)
	world := []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			_, err := nodes[i].Fence(ctx, &plugin.FenceRequest{
				ID: "world/1", Procs: world, LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: int32(i)}}, Node: job.Nodes[i].Name,
				Data: []byte("x"), Collect: true, Timeout: 500 * time.Millisecond,
			})
			if !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), "rank 2") {
				t.Errorf("node %d: the fence without node n3 ended with %v, want a time-out naming rank 2", i, err)
			}
		})
	}
	wg.Wait()
	// Over the tree's private service, as another node gives it: the
	// refusal keeps its kind and words across the link.
	conn, err := nodes[1].placed().data.peers.links.Conn(ctx, 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = treev1.NewTreeClient(conn.ClientConn()).Give(ctx, &treev1.GiveRequest{Fence: "world/2", Key: "k", Node: "elsewhere", Data: []byte("y")})
	err = direct.CallError(ctx, "give", err)
	if !errors.Is(err, plugin.ErrInvalidArgument) || !strings.Contains(err.Error(), `"elsewhere"`) {
		t.Errorf("a part from a node outside the job: %v", err)
	}
}

// A part that cannot be given fails the giver's fence, naming the node
// that refused it, and the node that never got it fails when the time is
// up, naming the node whose data it lacks; with WithoutExchange the
// collecting fence goes up the tree with its data.
func TestExchangeFailsByName(t *testing.T) {
	var count *counting
	step := newTestStep(t, 43, 2, 0, func(root plugin.Full) plugin.Full { count = &counting{Full: root}; return count })
	job := step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := step.nodes(ctx, t)
	// Node n2 takes itself for a node the job does not have, and gives
	// its part as that node.
	tr := nodes[1].placed()
	tr.Job.Nodes = slices.Clone(tr.Job.Nodes)
	tr.Job.Nodes[1].Name = "impostor"
	world := []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}}
	fence := func(id string, node []string) []error {
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() {
				_, errs[i] = n.Fence(ctx, &plugin.FenceRequest{
					ID: id, Procs: world, LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: int32(i)}}, Node: node[i],
					Data: []byte("x"), Collect: true, Timeout: 300 * time.Millisecond,
				})
			})
		}
		wg.Wait()
		return errs
	}
	// n1 refuses its part, and never gets n2's data.
	errs := fence("world/1", []string{"n1", "impostor"})
	if err := errs[1]; !errors.Is(err, plugin.ErrInvalidArgument) || !strings.Contains(err.Error(), "could not give its ranks' data to node n1") {
		t.Errorf("the giver whose part was refused: %v", err)
	}
	if err := errs[0]; !errors.Is(err, plugin.ErrTimeout) || !strings.Contains(err.Error(), "did not get the data of node n2") {
		t.Errorf("the node that never got the part: %v", err)
	}

	// Without the exchange, the tree carries the data.
	count.mu.Lock()
	count.fences = nil
	count.mu.Unlock()
	step = newTestStep(t, 44, 2, 0, func(root plugin.Full) plugin.Full { count = &counting{Full: root}; return count })
	job = step.job
	nodes = step.nodes(ctx, t, WithoutExchange())
	world = []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}}
	for i, err := range fence("world/1", []string{"n1", "n2"}) {
		if err != nil {
			t.Errorf("node %d without the exchange: %v", i, err)
		}
	}
	count.mu.Lock()
	defer count.mu.Unlock()
	for _, c := range count.fences {
		if !c.Collect || len(c.Data) == 0 {
			t.Errorf("WithoutExchange: a collecting fence reached the coordinator as %+v, want its data", c)
		}
	}
}

// A node older than the tree's service gives its part as a Fence whose ID
// begins with the legacy prefix: a node takes it into the same mailbox a
// Give fills, so an exchange across a step's nodes mid-way through an
// upgrade still completes.
func TestExchangeTakesALegacyPart(t *testing.T) {
	step := newTestStep(t, 44, 2, 0, nil)
	job := step.job
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := step.nodes(ctx, t)
	to, err := nodes[1].placed().data.peers.links.Link(ctx, 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	world := []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}}
	if _, err := to.Fence(ctx, &plugin.FenceRequest{ID: legacyPartPrefix + "world/9", Procs: world, Node: job.Nodes[1].Name,
		Data: []byte("old;"), Collect: true, Timeout: 5 * time.Second}); err != nil {
		t.Fatalf("a legacy part: %v", err)
	}
	x := nodes[0].placed().ex
	x.mu.Lock()
	b := x.boxes[fencetree.Key(&plugin.FenceRequest{ID: "world/9", Procs: world})]
	var got []byte
	if b != nil {
		got = b.parts[1]
	}
	x.mu.Unlock()
	if string(got) != "old;" {
		t.Errorf("node 0's mailbox for world/9 holds %q from node 1, want the legacy part", got)
	}
}
