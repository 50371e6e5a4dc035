package plugin_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

type closer struct{ closed *int }

func (c closer) Close() error { *c.closed++; return nil }

// A Relay dials on the first call, forwards every call, dials again after
// a failed dial or Close, and names the call in a dial's error.
func TestRelay(t *testing.T) {
	ctx := context.Background()
	daemon := &plugintest.Fake{PublishF: func(context.Context, *plugin.PublishRequest) error { return nil }}
	dials, closes := 0, 0
	up := false
	r := plugin.NewRelay(func(context.Context) (plugin.Full, io.Closer, error) {
		dials++
		if !up {
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "daemon: not listening")
		}
		return daemon, closer{&closes}, nil
	})
	err := r.Publish(ctx, &plugin.PublishRequest{})
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.HasPrefix(err.Error(), "publish: daemon: not listening") || r.Connected() {
		t.Fatalf("Publish with the daemon down: %v (connected %v)", err, r.Connected())
	}
	up = true
	if err := r.Publish(ctx, &plugin.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	if info, err := r.GetInfo(ctx); err != nil || info.Name != "fake" {
		t.Fatalf("GetInfo: %+v, %v", info, err)
	}
	if dials != 2 || !r.Connected() {
		t.Errorf("%d dials, connected %v; want 2, true", dials, r.Connected())
	}
	if err := r.Close(); err != nil || closes != 1 || r.Connected() {
		t.Errorf("Close: %v, %d closes", err, closes)
	}
	if err := r.Publish(ctx, &plugin.PublishRequest{}); err != nil || dials != 3 {
		t.Errorf("after Close: %v, %d dials", err, dials)
	}
}

// Replace moves later calls to a new connection without closing the one
// in use (its calls in flight finish there), and only if that is still
// the one the caller saw.
func TestRelayReplace(t *testing.T) {
	ctx := context.Background()
	var got []string
	backend := func(name string) *plugintest.Fake {
		return &plugintest.Fake{PublishF: func(context.Context, *plugin.PublishRequest) error {
			got = append(got, name)
			return nil
		}}
	}
	firstCloses, secondCloses := 0, 0
	first := closer{&firstCloses}
	r := plugin.NewRelay(func(context.Context) (plugin.Full, io.Closer, error) { return backend("first"), first, nil })
	second := closer{&secondCloses}
	if r.Replace(first, backend("second"), second) {
		t.Fatal("Replace before any dial replaced")
	}
	if err := r.Publish(ctx, &plugin.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	if r.Replace(second, backend("second"), second) {
		t.Fatal("Replace of a connection not in use replaced")
	}
	if !r.Replace(first, backend("second"), second) {
		t.Fatal("Replace of the connection in use did not replace")
	}
	if err := r.Publish(ctx, &plugin.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "first second"; strings.Join(got, " ") != want || firstCloses != 0 || secondCloses != 1 {
		t.Errorf("calls went to %q, want %q; closes: first %d, second %d, want 0 and 1", got, want, firstCloses, secondCloses)
	}
}
