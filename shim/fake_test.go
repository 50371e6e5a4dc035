package shim

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

// fakeBackend is a single-node backend with function fields: a nil field
// takes the default (Configure accepts, Fence echoes the node's data,
// everything else from plugin.Unimplemented).
type fakeBackend struct {
	plugin.Unimplemented
	configure func(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error)
	fence     func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error)
	abort     func(ctx context.Context, req *plugin.AbortRequest) error
}

func (f *fakeBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "fake", Version: "0", APIVersions: []string{plugin.APIVersion1}}, nil
}

func (f *fakeBackend) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	if f.configure != nil {
		return f.configure(ctx, req)
	}
	return &plugin.ConfigureResponse{}, nil
}

func (f *fakeBackend) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if f.fence != nil {
		return f.fence(ctx, req)
	}
	// One node: the concatenation of every node's data is this node's.
	if req.Collect {
		return &plugin.FenceResponse{Data: req.Data}, nil
	}
	return &plugin.FenceResponse{}, nil
}

func (f *fakeBackend) Abort(ctx context.Context, req *plugin.AbortRequest) error {
	if f.abort != nil {
		return f.abort(ctx, req)
	}
	return nil
}

// fakeProc is an in-process Process around a backend.
type fakeProc struct {
	be     plugin.Full
	exited chan struct{}
	once   sync.Once

	mu     sync.Mutex
	closed bool // guarded by mu
}

func newFakeProc(be plugin.Backend) *fakeProc {
	return &fakeProc{be: plugin.Complete(be), exited: make(chan struct{})}
}

func (p *fakeProc) Backend() plugin.Full      { return p.be }
func (p *fakeProc) Info() *plugin.BackendInfo { return nil }
func (p *fakeProc) Exited() <-chan struct{}   { return p.exited }
func (p *fakeProc) die()                      { p.once.Do(func() { close(p.exited) }) }
func (p *fakeProc) wasClosed() bool           { p.mu.Lock(); defer p.mu.Unlock(); return p.closed }
func (p *fakeProc) start() StartFunc {
	return func(context.Context, Launch) (Process, error) { return p, nil }
}
func (p *fakeProc) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.die()
	return nil
}

// Environment of the gopmi-test-backend helper.
const (
	// envFakeFence: "" echoes, "block" waits for the context.
	envFakeFence = "GOPMI_FAKE_FENCE"
	// envFakeNotify: a unix socket the helper dials to write
	// "fence <pid>\n" when a fence arrives.
	envFakeNotify = "GOPMI_FAKE_NOTIFY"
	// envFakeAttr: "key=value" that Configure returns as a job attribute.
	envFakeAttr = "GOPMI_FAKE_ATTR"
)

// serveFakeBackend is the gopmi-test-backend helper's main.
func serveFakeBackend() {
	f := &fakeBackend{}
	if kv := os.Getenv(envFakeAttr); kv != "" {
		k, v, _ := strings.Cut(kv, "=")
		f.configure = func(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
			return &plugin.ConfigureResponse{Attrs: []plugin.Info{{Key: k, Value: v}}}, nil
		}
	}
	notify := os.Getenv(envFakeNotify)
	block := os.Getenv(envFakeFence) == "block"
	f.fence = func(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
		if notify != "" {
			if c, err := net.DialTimeout("unix", notify, 5*time.Second); err == nil {
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprintf(c, "fence %d\n", os.Getpid())
				_ = c.Close()
			}
		}
		if block {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if req.Collect {
			return &plugin.FenceResponse{Data: req.Data}, nil
		}
		return &plugin.FenceResponse{}, nil
	}
	grpcplugin.Serve(f)
}
