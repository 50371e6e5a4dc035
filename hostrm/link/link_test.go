package link

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait of these tests.
const waitLimit = 10 * time.Second

// serve serves be on a unix socket until the test ends and returns its
// address.
func serve(t *testing.T, be plugin.Full) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "gopmi-link-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, be) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "unix://" + ln.Addr().String()
}

func dial(t *testing.T, addr string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The universe passes the conformance suite through the link, each node
// a connection of its own, as each gopmi-rm-local is.
func TestConformance(t *testing.T) {
	u := local.NewUniverse(local.UniverseOptions{})
	addr := serve(t, u)
	t.Cleanup(u.Close)
	plugintest.RunConformance(t, plugintest.Harness{
		NewNode: func(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend {
			return dial(t, addr).Backend()
		},
		Timeout: 500 * time.Millisecond,
	})
}

// Answers and errors arrive as the backend gave them: the message whole,
// errors.Is true for the same sentinel.
func TestAnswersAndErrors(t *testing.T) {
	fake := &plugintest.Fake{
		FenceF: func(_ context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			if req.ID == "bad" {
				return nil, plugin.Errorf(plugin.ErrTimeout, "fence bad of job j: rank 3 (node n1) did not arrive in 2s")
			}
			return &plugin.FenceResponse{Data: append([]byte("got:"), req.Data...)}, nil
		},
		LookupF: func(context.Context, *plugin.LookupRequest) (*plugin.LookupResponse, error) {
			return nil, errors.New("no sentinel at all")
		},
		PublishF: func(context.Context, *plugin.PublishRequest) error {
			return plugin.Wrapf(plugin.ErrBackendGone, plugin.ErrUnavailable, "publish: the daemon")
		},
	}
	be := dial(t, serve(t, fake)).Backend()
	ctx := context.Background()
	data := []byte{0, 1, 2, '\n', 255}
	resp, err := be.Fence(ctx, &plugin.FenceRequest{ID: "ok", Data: data, Timeout: time.Second})
	if err != nil || string(resp.Data) != "got:"+string(data) {
		t.Fatalf("Fence: %q, %v", resp, err)
	}
	_, err = be.Fence(ctx, &plugin.FenceRequest{ID: "bad"})
	if !errors.Is(err, plugin.ErrTimeout) || err.Error() != "fence bad of job j: rank 3 (node n1) did not arrive in 2s" {
		t.Errorf("Fence error: %v", err)
	}
	if _, err := be.Lookup(ctx, &plugin.LookupRequest{}); err == nil || err.Error() != "no sentinel at all" || plugin.KindOf(err) != nil {
		t.Errorf("Lookup error: %v", err)
	}
	// A backend gone behind the server is an unavailable upstream here.
	if err := be.Publish(ctx, &plugin.PublishRequest{}); !errors.Is(err, plugin.ErrUnavailable) || errors.Is(err, plugin.ErrBackendGone) {
		t.Errorf("Publish error: %v", err)
	}
	// A call the fake does not implement.
	if _, err := be.Spawn(ctx, &plugin.SpawnRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Spawn error: %v", err)
	}
	info, err := be.GetInfo(ctx)
	if err != nil || info.Name != "fake" {
		t.Errorf("GetInfo: %+v, %v", info, err)
	}
}

// A caller that gives up ends the call's context on the server.
func TestCancelReachesServer(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	fake := &plugintest.Fake{
		LookupF: func(ctx context.Context, _ *plugin.LookupRequest) (*plugin.LookupResponse, error) {
			close(started)
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(waitLimit):
				ended <- errors.New("never cancelled")
			}
			return nil, ctx.Err()
		},
	}
	be := dial(t, serve(t, fake)).Backend()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := be.Lookup(ctx, &plugin.LookupRequest{Wait: true})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, plugin.ErrAborted) {
		t.Errorf("Lookup: %v", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("server side: %v", err)
	}
	// A deadline is a time-out.
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	fake.LookupF = func(ctx context.Context, _ *plugin.LookupRequest) (*plugin.LookupResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if _, err := be.Lookup(ctx, &plugin.LookupRequest{}); !errors.Is(err, plugin.ErrTimeout) {
		t.Errorf("Lookup past its deadline: %v", err)
	}
}

// A connection that breaks fails the calls in flight and later ones with
// ErrUnavailable, at once.
func TestBrokenConnection(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	fake := &plugintest.Fake{
		FenceF: func(ctx context.Context, _ *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			close(started)
			<-release
			return &plugin.FenceResponse{}, nil
		},
	}
	defer close(release)
	c := dial(t, serve(t, fake))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Backend().Fence(context.Background(), &plugin.FenceRequest{})
		errc <- err
	}()
	<-started
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "fence: the link to the server broke") {
			t.Errorf("Fence in flight: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("a call in flight outlived its connection")
	}
	if _, err := c.Backend().GetInfo(context.Background()); !errors.Is(err, plugin.ErrUnavailable) {
		t.Errorf("GetInfo after Close: %v", err)
	}
}

// Dial to nothing is ErrUnavailable naming the address.
func TestDialNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := Dial(ctx, "unix:///nonexistent/u.sock")
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), "/nonexistent/u.sock") {
		t.Errorf("Dial: %v", err)
	}
}

// A caller that hangs up cancels its calls on the server: a wait there
// must not outlive the shim whose backend asked.
func TestHangUpCancels(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	fake := &plugintest.Fake{
		FenceF: func(ctx context.Context, _ *plugin.FenceRequest) (*plugin.FenceResponse, error) {
			close(started)
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(waitLimit):
				ended <- errors.New("never cancelled")
			}
			return nil, ctx.Err()
		},
	}
	c := dial(t, serve(t, fake))
	go func() { _, _ = c.Backend().Fence(context.Background(), &plugin.FenceRequest{}) }()
	<-started
	c.Close()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the server's call after the caller hung up: %v", err)
	}
}

// flakyListener fails its first Accept as a process out of fds does.
type flakyListener struct {
	net.Listener
	failed bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// A failed Accept (EMFILE) is waited out: the link keeps serving.
func TestAcceptFailureIsWaitedOut(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "gopmi-link-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, &flakyListener{Listener: ln}, &plugintest.Fake{}) }()
	c := dial(t, "unix://"+ln.Addr().String())
	if _, err := c.Backend().GetInfo(context.Background()); err != nil {
		t.Errorf("GetInfo after a failed Accept: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
