package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

// The handle asks its host once, whoever needs it first, and forwards
// every call once the backend is up.
func TestBackendOnDemand(t *testing.T) {
	asked := 0
	var b *Backend
	fake := &plugintest.Fake{PublishF: func(context.Context, *plugin.PublishRequest) error { return nil }}
	b = NewBackend("gopmi-rm-x", func() {
		asked++
		go b.Up(fake, &plugin.BackendInfo{Name: "x", Capabilities: []string{plugin.CapPublish}},
			[]plugin.Info{{Key: "k", Value: "v"}})
	})
	if b.Known() || b.IsUp() || b.Has(plugin.CapPublish) || b.Name() != "gopmi-rm-x" {
		t.Fatalf("before Up: known %v up %v name %q", b.Known(), b.IsUp(), b.Name())
	}
	if err := b.Publish(context.Background(), &plugin.PublishRequest{}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	b.Need()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if asked != 1 {
		t.Errorf("host asked %d times, want 1", asked)
	}
	if !b.IsUp() || !b.Has(plugin.CapPublish) || b.Has(plugin.CapSpawn) || b.Name() != "x" {
		t.Errorf("after Up: up %v name %q", b.IsUp(), b.Name())
	}
	if v, ok := b.Attr("k"); !ok || v != "v" {
		t.Errorf("Attr(k) = %q, %v", v, ok)
	}
	b.Fail(errors.New("late"))
	if b.Err() != nil {
		t.Errorf("a Fail after Up counted: %v", b.Err())
	}
}

func TestBackendFailed(t *testing.T) {
	b := NewBackend("gopmi-rm-x", nil)
	b.Fail(errors.New("it exited"))
	b.Up(&plugintest.Fake{}, nil, nil)
	err := b.Wait(context.Background())
	if !errors.Is(err, plugin.ErrBackendGone) || !strings.Contains(err.Error(), "backend not available: backend gone: it exited") {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := b.Lookup(context.Background(), &plugin.LookupRequest{}); !errors.Is(err, plugin.ErrBackendGone) {
		t.Fatalf("Lookup: %v", err)
	}
	if b.IsUp() || b.Has(plugin.CapPublish) || b.Name() != "gopmi-rm-x" {
		t.Errorf("failed backend: up %v name %q", b.IsUp(), b.Name())
	}
}

// A call waits for the backend no longer than its own context.
func TestBackendWaitHonoursContext(t *testing.T) {
	b := NewBackend("gopmi-rm-x", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := b.Spawn(ctx, &plugin.SpawnRequest{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "spawn: waiting for the backend to start") {
		t.Fatalf("Spawn: %v", err)
	}
}

// The host names the step of a backend's error once.
func TestInStep(t *testing.T) {
	for _, c := range []struct{ step, msg, want string }{
		{"fence world/1", "fence world/1 of job j: rank 3 (node n1) did not arrive in 2s", "fence world/1 of job j: rank 3 (node n1) did not arrive in 2s"},
		{"lookup svc", "not found", "lookup svc: not found"},
		{"lookup svc", "lookup svc: not found", "lookup svc: not found"},
	} {
		err := inStep(c.step, plugin.Errorf(plugin.ErrNotFound, "%s", c.msg))
		if err.Error() != c.want || !errors.Is(err, plugin.ErrNotFound) {
			t.Errorf("inStep(%q, %q) = %q, want %q", c.step, c.msg, err, c.want)
		}
	}
}
