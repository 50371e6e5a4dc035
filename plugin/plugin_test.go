package plugin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/plugin"
)

// core implements only the required Backend.
type core struct{ plugin.Unimplemented }

func (core) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "core"}, nil
}

// withPublish adds one optional capability without embedding Unimplemented.
type withPublish struct {
	bare
	published []plugin.Info
}

type bare struct{}

func (bare) GetInfo(context.Context) (*plugin.BackendInfo, error) { return &plugin.BackendInfo{}, nil }
func (bare) Configure(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	return &plugin.ConfigureResponse{}, nil
}
func (bare) ClientConnected(context.Context, *plugin.ClientRequest) error { return nil }
func (bare) ClientFinalized(context.Context, *plugin.ClientRequest) error { return nil }
func (bare) Abort(context.Context, *plugin.AbortRequest) error            { return nil }
func (bare) Fence(context.Context, *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	return &plugin.FenceResponse{}, nil
}
func (bare) DirectModex(context.Context, *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	return &plugin.ModexResponse{}, nil
}

func (p *withPublish) Publish(_ context.Context, r *plugin.PublishRequest) error {
	p.published = append(p.published, r.Data...)
	return nil
}
func (p *withPublish) Lookup(context.Context, *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	return &plugin.LookupResponse{}, nil
}
func (p *withPublish) Unpublish(context.Context, *plugin.UnpublishRequest) error { return nil }

func TestCompleteFillsMissingCapabilities(t *testing.T) {
	ctx := context.Background()
	p := &withPublish{}
	f := plugin.Complete(p)
	if err := f.Publish(ctx, &plugin.PublishRequest{Data: []plugin.Info{{Key: "k", Value: "v"}}}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if len(p.published) != 1 {
		t.Fatal("Publish did not reach the backend")
	}
	calls := map[string]error{}
	_, calls["spawn"] = f.Spawn(ctx, &plugin.SpawnRequest{})
	_, calls["connect"] = f.Connect(ctx, &plugin.ConnectRequest{})
	calls["disconnect"] = f.Disconnect(ctx, &plugin.DisconnectRequest{})
	_, calls["query"] = f.Query(ctx, &plugin.QueryRequest{})
	calls["log"] = f.Log(ctx, &plugin.LogRequest{})
	calls["notify event"] = f.NotifyEvent(ctx, &plugin.EventRequest{})
	for name, err := range calls {
		if !errors.Is(err, plugin.ErrNotSupported) {
			t.Errorf("%s: err = %v, want ErrNotSupported", name, err)
		}
	}
}

func TestCompleteKeepsAFullBackend(t *testing.T) {
	var c plugin.Full = core{}
	if got := plugin.Complete(core{}); got != c {
		t.Fatalf("Complete wrapped a backend that was already Full")
	}
}

func TestUnimplemented(t *testing.T) {
	ctx := context.Background()
	var u plugin.Unimplemented
	if _, err := u.Configure(ctx, &plugin.ConfigureRequest{}); err != nil {
		t.Errorf("Configure: %v", err)
	}
	if err := u.ClientConnected(ctx, &plugin.ClientRequest{}); err != nil {
		t.Errorf("ClientConnected: %v", err)
	}
	if _, err := u.Fence(ctx, &plugin.FenceRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Fence: %v", err)
	}
	if err := u.Abort(ctx, &plugin.AbortRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Abort: %v", err)
	}
}

func TestProcString(t *testing.T) {
	if s := (plugin.Proc{Nspace: "j", Rank: 3}).String(); s != "j:3" {
		t.Errorf("got %q", s)
	}
	if s := (plugin.Proc{Nspace: "j", Rank: plugin.RankWildcard}).String(); s != "j:*" {
		t.Errorf("got %q", s)
	}
}

func TestRankList(t *testing.T) {
	for _, tc := range []struct {
		in   []int32
		want string
	}{
		{nil, "no ranks"},
		{[]int32{9}, "rank 9"},
		{[]int32{7, 4, 5, 6, 9}, "ranks 4-7,9"},
		{[]int32{0, 2, 2, 3}, "ranks 0,2-3"},
	} {
		if got := plugin.RankList(tc.in); got != tc.want {
			t.Errorf("RankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDeferredForwardsAndFails(t *testing.T) {
	ctx := context.Background()
	p := &withPublish{}
	var calls []string
	d := plugin.Deferred{Resolve: func(_ context.Context, call string) (plugin.Full, error) {
		calls = append(calls, call)
		if call == "spawn" {
			return nil, errors.New("backend still starting")
		}
		return plugin.Complete(p), nil
	}}
	if err := d.Publish(ctx, &plugin.PublishRequest{Data: []plugin.Info{{Key: "k"}}}); err != nil || len(p.published) != 1 {
		t.Fatalf("Publish: %v (published %v)", err, p.published)
	}
	if _, err := d.Spawn(ctx, &plugin.SpawnRequest{}); err == nil || err.Error() != "backend still starting" {
		t.Fatalf("Spawn: %v", err)
	}
	if _, err := d.Query(ctx, &plugin.QueryRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Fatalf("Query: %v", err)
	}
	if strings.Join(calls, ",") != "publish,spawn,query" {
		t.Fatalf("Resolve saw %v", calls)
	}
}
