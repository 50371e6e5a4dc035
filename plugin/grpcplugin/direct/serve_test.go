package direct_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// served is a backend served by Serve on a unix socket.
type served struct {
	target string
	cancel context.CancelFunc
	done   chan error
}

func serve(t *testing.T, b plugin.Backend, opts ...direct.ServeOption) *served {
	t.Helper()
	// Short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "gopmi-gp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "rm.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{target: "unix://" + sock, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- direct.Serve(ctx, l, b, opts...) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok && err != nil {
			t.Errorf("Serve: %v", err)
		}
		if ok {
			close(s.done)
		}
	case <-time.After(20 * time.Second):
		t.Error("Serve did not return 20s after its context ended")
	}
}

func dial(t *testing.T, target string, opts ...direct.DialOption) *direct.Conn {
	t.Helper()
	c, err := direct.Dial(testCtx(t), target, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestListenerErrors(t *testing.T) {
	s := serve(t, testBackend{})
	b := dial(t, s.target).Backend()
	ctx := testCtx(t)
	for id, want := range errByID {
		t.Run(id, func(t *testing.T) {
			_, err := b.Fence(ctx, &plugin.FenceRequest{ID: id})
			if err == nil || err.Error() != want.Error() {
				t.Fatalf("Fence = %v; want %q", err, want)
			}
			if s := errors.Unwrap(want); s != nil && !errors.Is(err, s) {
				t.Errorf("errors.Is(%v, %v) = false", err, s)
			}
		})
	}
	// Optional interfaces the backend lacks answer ErrNotSupported.
	if err := b.Publish(ctx, &plugin.PublishRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Publish: %v; want ErrNotSupported", err)
	}
	if _, err := b.Spawn(ctx, &plugin.SpawnRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Spawn: %v; want ErrNotSupported", err)
	}
}

// bare implements Backend only: no optional interface at all, not even
// through Unimplemented, so the server's own type assertions answer.
type bare struct{}

func (bare) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "bare"}, nil
}
func (bare) Configure(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	return nil, nil // a nil response is an empty one
}
func (bare) ClientConnected(context.Context, *plugin.ClientRequest) error { return nil }
func (bare) ClientFinalized(context.Context, *plugin.ClientRequest) error { return nil }
func (bare) Abort(context.Context, *plugin.AbortRequest) error            { return nil }
func (bare) Fence(context.Context, *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	return nil, nil
}
func (bare) DirectModex(context.Context, *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	return nil, nil
}

func TestListenerBareBackend(t *testing.T) {
	s := serve(t, bare{})
	b := dial(t, s.target).Backend()
	ctx := testCtx(t)
	if _, err := b.Configure(ctx, nil); err != nil {
		t.Errorf("Configure: %v", err)
	}
	if r, err := b.Fence(ctx, &plugin.FenceRequest{}); err != nil || r == nil {
		t.Errorf("Fence = %v, %v; want an empty response", r, err)
	}
	calls := map[string]error{
		"publish":      b.Publish(ctx, nil),
		"unpublish":    b.Unpublish(ctx, nil),
		"disconnect":   b.Disconnect(ctx, nil),
		"log":          b.Log(ctx, nil),
		"notify event": b.NotifyEvent(ctx, nil),
	}
	_, calls["lookup"] = b.Lookup(ctx, nil)
	_, calls["spawn"] = b.Spawn(ctx, nil)
	_, calls["connect"] = b.Connect(ctx, nil)
	_, calls["query"] = b.Query(ctx, nil)
	for name, err := range calls {
		if !errors.Is(err, plugin.ErrNotSupported) || err.Error() != name+": not supported" {
			t.Errorf("%s: %v; want %q wrapping ErrNotSupported", name, err, name+": not supported")
		}
	}
}

func TestListenerLargeMessage(t *testing.T) {
	// Over gRPC's 4 MiB default in both directions.
	blob := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	s := serve(t, testBackend{})
	b := dial(t, s.target).Backend()
	resp, err := b.Fence(testCtx(t), &plugin.FenceRequest{ID: "echo", Data: blob})
	if err != nil {
		t.Fatalf("Fence of %d bytes: %v", len(blob), err)
	}
	if !bytes.Equal(resp.Data, blob) {
		t.Errorf("echo of %d bytes came back as %d bytes", len(blob), len(resp.Data))
	}

	small := serve(t, testBackend{}, direct.WithMaxMessageSize(1<<20))
	_, err = dial(t, small.target).Backend().Fence(testCtx(t), &plugin.FenceRequest{ID: "echo", Data: blob})
	if err == nil {
		t.Fatal("Fence over the server's 1 MiB limit succeeded")
	}
	t.Logf("over the limit: %v", err)
	if errors.Is(err, plugin.ErrBackendGone) {
		t.Errorf("over the limit: %v; the backend is not gone", err)
	}

	// The same limit on the caller's side: the big answer is refused.
	_, err = dial(t, s.target, direct.WithDialMaxMessageSize(1<<20)).Backend().Fence(testCtx(t), &plugin.FenceRequest{ID: "echo", Data: blob})
	if err == nil {
		t.Fatal("Fence over the caller's 1 MiB limit succeeded")
	}
	t.Logf("over the caller's limit: %v", err)
	if errors.Is(err, plugin.ErrBackendGone) {
		t.Errorf("over the caller's limit: %v; the backend is not gone", err)
	}
}

// entering is testBackend that reports the Fence calls it starts, as many
// as entered has room for.
type entering struct {
	testBackend
	entered chan string
}

func (b entering) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	select {
	case b.entered <- req.ID:
	default:
	}
	return b.testBackend.Fence(ctx, req)
}

func TestListenerShutdown(t *testing.T) {
	be := entering{entered: make(chan string, 1)}
	s := serve(t, be, direct.WithGracePeriod(100*time.Millisecond))
	b := dial(t, s.target).Backend()
	pending := make(chan error, 1)
	go func() {
		_, err := b.Fence(testCtx(t), &plugin.FenceRequest{ID: "block"})
		pending <- err
	}()
	// The call must be running in the backend before the server stops, or
	// the test would not see the grace period end it.
	select {
	case id := <-be.entered:
		if id != "block" {
			t.Fatalf("backend saw Fence %q; want block", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocking Fence did not reach the backend in 10s")
	}
	start := time.Now()
	s.stop(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Serve took %s to stop with a 100ms grace period", d)
	}
	select {
	case err := <-pending:
		if err == nil {
			t.Error("blocked call succeeded after the server stopped")
		}
		t.Logf("blocked call: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("blocked call still pending 10s after the server stopped")
	}
	if _, err := b.Fence(testCtx(t), &plugin.FenceRequest{ID: "echo"}); !errors.Is(err, plugin.ErrBackendGone) {
		t.Errorf("call after the server stopped: %v; want ErrBackendGone", err)
	}
}

func TestConnClose(t *testing.T) {
	s := serve(t, testBackend{})
	c := dial(t, s.target)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Backend().GetInfo(testCtx(t)); !errors.Is(err, plugin.ErrBackendGone) {
		t.Errorf("call after Close: %v; want ErrBackendGone", err)
	}
}

func TestDialUnreachable(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := direct.Dial(ctx, filepath.Join(dir, "nobody.sock"))
	if !errors.Is(err, plugin.ErrUnavailable) {
		t.Fatalf("Dial of a missing socket: %v; want ErrUnavailable", err)
	}
	t.Logf("error: %v", err)
}
