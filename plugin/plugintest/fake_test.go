package plugintest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestFakeDefaults(t *testing.T) {
	ctx := context.Background()
	f := &plugintest.Fake{}
	info, err := f.GetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &plugin.BackendInfo{Name: "fake", Version: "0", APIVersions: []string{plugin.APIVersion1}}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("default info (-want +got):\n%s", diff)
	}
	errs := map[string]error{
		"ClientConnected": f.ClientConnected(ctx, nil),
		"ClientFinalized": f.ClientFinalized(ctx, nil),
		"Abort":           f.Abort(ctx, nil),
		"Publish":         f.Publish(ctx, nil),
		"Unpublish":       f.Unpublish(ctx, nil),
		"Disconnect":      f.Disconnect(ctx, nil),
		"Log":             f.Log(ctx, nil),
		"NotifyEvent":     f.NotifyEvent(ctx, nil),
	}
	_, errs["Configure"] = f.Configure(ctx, nil)
	_, errs["Fence"] = f.Fence(ctx, nil)
	_, errs["DirectModex"] = f.DirectModex(ctx, nil)
	_, errs["Lookup"] = f.Lookup(ctx, nil)
	_, errs["Spawn"] = f.Spawn(ctx, nil)
	_, errs["Connect"] = f.Connect(ctx, nil)
	_, errs["Query"] = f.Query(ctx, nil)
	if len(errs) != 15 {
		t.Fatalf("checked %d methods; want the 15 besides GetInfo", len(errs))
	}
	for name, err := range errs {
		if !errors.Is(err, plugin.ErrNotSupported) {
			t.Errorf("%s with a nil field: %v; want ErrNotSupported", name, err)
		}
	}
}

func TestFakeCapabilitiesFollowFields(t *testing.T) {
	f := &plugintest.Fake{
		LookupF: func(context.Context, *plugin.LookupRequest) (*plugin.LookupResponse, error) { return nil, nil },
		LogF:    func(context.Context, *plugin.LogRequest) error { return nil },
	}
	info, err := f.GetInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{plugin.CapPublish, plugin.CapLog}, info.Capabilities); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
}

// TestPairCarriesCallsAndErrors drives a Fake through NewPair: requests
// arrive converted, answers and errors come back intact.
func TestPairCarriesCallsAndErrors(t *testing.T) {
	// The race detector does not see the socket between the two sides as
	// synchronisation, so the request comes back through a channel.
	seen := make(chan *plugin.FenceRequest, 2)
	f := &plugintest.Fake{
		FenceF: func(_ context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			seen <- req
			if req.ID == "late" {
				return nil, fmt.Errorf("fence late: rank 3 (node n1) did not arrive in 1s: %w", plugin.ErrTimeout)
			}
			return &plugin.FenceResponse{Data: append([]byte("all:"), req.Data...)}, nil
		},
	}
	b := plugintest.NewPair(t, f)
	ctx := context.Background()
	req := &plugin.FenceRequest{ID: "world/1", Procs: []plugin.Proc{{Nspace: "j", Rank: plugin.RankWildcard}}, Node: "n0", Data: []byte("x"), Collect: true}
	resp, err := b.Fence(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Data) != "all:x" {
		t.Errorf("Fence data %q; want all:x", resp.Data)
	}
	if diff := cmp.Diff(req, <-seen); diff != "" {
		t.Errorf("request as the backend saw it (-sent +got):\n%s", diff)
	}
	_, err = b.Fence(ctx, &plugin.FenceRequest{ID: "late"})
	if !errors.Is(err, plugin.ErrTimeout) || err.Error() != "fence late: rank 3 (node n1) did not arrive in 1s: timed out" {
		t.Errorf("Fence late: %v; want the backend's ErrTimeout and message", err)
	}
	if _, err := b.Spawn(ctx, &plugin.SpawnRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Spawn: %v; want ErrNotSupported", err)
	}
}
