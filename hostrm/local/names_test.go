package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// fakeNames is a name service beyond the run that records what reaches it.
type fakeNames struct {
	mu    sync.Mutex
	names map[string]string
	calls []string
}

func (f *fakeNames) Publish(_ context.Context, req *plugin.PublishRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range req.Data {
		f.calls = append(f.calls, "publish "+d.Key)
		f.names[d.Key] = d.Value
	}
	return nil
}

func (f *fakeNames) Lookup(_ context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &plugin.LookupResponse{}
	for _, k := range req.Keys {
		f.calls = append(f.calls, "lookup "+k)
		if v, ok := f.names[k]; ok {
			resp.Data = append(resp.Data, plugin.Published{Key: k, Value: v})
		}
	}
	if len(resp.Data) == 0 {
		return nil, plugin.Errorf(plugin.ErrNotFound, "not published")
	}
	return resp, nil
}

func (f *fakeNames) Unpublish(_ context.Context, req *plugin.UnpublishRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range req.Keys {
		f.calls = append(f.calls, "unpublish "+k)
		delete(f.names, k)
	}
	if len(req.Keys) == 0 {
		f.calls = append(f.calls, "unpublish all")
	}
	return nil
}

func (f *fakeNames) Connect(context.Context, *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	return nil, plugin.Errorf(plugin.ErrNotSupported, "fake")
}

func (f *fakeNames) DirectModex(context.Context, *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	return nil, plugin.Errorf(plugin.ErrNotSupported, "fake")
}

func (f *fakeNames) Fence(_ context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("fence %s %d local %q", req.ID, len(req.LocalProcs), req.Data))
	return &plugin.FenceResponse{Data: append([]byte("beyond:"), req.Data...)}, nil
}

func (f *fakeNames) Query(_ context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &plugin.QueryResponse{}
	for _, q := range req.Queries {
		ns, _ := plugin.Qualifier(q.Qualifiers, plugin.QualNspace)
		for _, k := range q.Keys {
			f.calls = append(f.calls, "query "+k+" "+ns)
			resp.Results = append(resp.Results, plugin.Info{Key: k, Value: "beyond:" + ns})
		}
	}
	return resp, nil
}

// With a name service beyond the run, a job's own names (RangeNamespace)
// stay in the universe and every other name goes there; a lookup finds
// both, an unpublish removes each where it lives.
func TestNamesBeyondTheRun(t *testing.T) {
	f := &fakeNames{names: map[string]string{}}
	u, job := testUniverse(t, UniverseOptions{Beyond: f}, 2, 0)
	ctx := context.Background()
	p := plugin.Proc{Nspace: job.Nspace, Rank: 0}
	if err := u.Publish(ctx, &plugin.PublishRequest{Proc: p, Data: []plugin.Info{{Key: "shared", Value: "s"}}}); err != nil {
		t.Fatal(err)
	}
	if err := u.Publish(ctx, &plugin.PublishRequest{Proc: p, Data: []plugin.Info{{Key: "own", Value: "o"}}, Range: plugin.RangeNamespace}); err != nil {
		t.Fatal(err)
	}
	resp, err := u.Lookup(ctx, &plugin.LookupRequest{Proc: plugin.Proc{Nspace: job.Nspace, Rank: 1}, Keys: []string{"own", "shared"}})
	if err != nil || len(resp.Data) != 2 {
		t.Fatalf("lookup of both: %+v, %v", resp, err)
	}
	if err := u.Unpublish(ctx, &plugin.UnpublishRequest{Proc: p, Keys: []string{"own", "shared"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Lookup(ctx, &plugin.LookupRequest{Proc: p, Keys: []string{"own"}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Fatalf("own after unpublish: %v", err)
	}
	want := []string{"publish shared", "lookup shared", "unpublish shared", "lookup own"}
	if !slices.Equal(f.calls, want) {
		t.Fatalf("calls beyond the run %q, want %q (a job's own names never leave it)", f.calls, want)
	}
}

// A query about a job of another run goes to the node daemon; the rest
// is answered by the universe, in one answer.
func TestQueryBeyondTheRun(t *testing.T) {
	f := &fakeNames{names: map[string]string{}}
	u, job := testUniverse(t, UniverseOptions{Beyond: f}, 2, 0)
	resp, err := u.Query(context.Background(), &plugin.QueryRequest{Proc: plugin.Proc{Nspace: job.Nspace}, Queries: []plugin.Query{
		{Keys: []string{plugin.QueryProcTable}, Qualifiers: []plugin.Info{{Key: plugin.QualNspace, Value: "other.run.0"}}},
		{Keys: []string{plugin.QueryJobStatus}, Qualifiers: []plugin.Info{{Key: plugin.QualNspace, Value: job.Nspace}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range resp.Results {
		got[r.Key] = r.Value
	}
	if got[plugin.QueryProcTable] != "beyond:other.run.0" || got[plugin.QueryJobStatus] != "running" {
		t.Errorf("answers %v", got)
	}
	if want := []string{"query " + plugin.QueryProcTable + " other.run.0"}; !slices.Equal(f.calls, want) {
		t.Errorf("the daemon was asked %q, want %q", f.calls, want)
	}
}

// A fence whose participants include a job of another run completes in
// the universe once its own participants arrived and the node daemon's
// fence answered: one call there, with all of this run's participants
// and their data.
func TestFenceBeyondTheRun(t *testing.T) {
	f := &fakeNames{names: map[string]string{}}
	u, job := testUniverse(t, UniverseOptions{Beyond: f}, 2, 0)
	procs := []plugin.Proc{{Nspace: job.Nspace, Rank: plugin.RankWildcard}, {Nspace: "other.run.0", Rank: plugin.RankWildcard}}
	var wg sync.WaitGroup
	results := make([]*plugin.FenceResponse, 2)
	errs := make([]error, 2)
	for r := range int32(2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r], errs[r] = u.Fence(context.Background(), &plugin.FenceRequest{ID: "x", Procs: procs,
				LocalProcs: []plugin.Proc{{Nspace: job.Nspace, Rank: r}}, Data: []byte{'a' + byte(r)}, Collect: true, Timeout: 5 * time.Second})
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if got := string(results[r].Data); got != "beyond:ab" && got != "beyond:ba" {
			t.Errorf("rank %d got %q", r, got)
		}
	}
	if len(f.calls) != 1 || !strings.HasPrefix(f.calls[0], "fence x 2 local") {
		t.Errorf("the daemon was called %q; want one fence with both local ranks", f.calls)
	}
	// A fence of no job of this run is refused.
	_, err := u.Fence(context.Background(), &plugin.FenceRequest{ID: "y", Procs: procs[1:], LocalProcs: procs[:1]})
	if !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("a fence of no job of the run: %v", err)
	}
}
