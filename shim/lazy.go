package shim

import (
	"context"
	"fmt"
	"sync"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
)

// lazyBackend stands in for the backend while it starts, so the shim can
// serve tasks at once: a task's local requests (init, put, a one-node
// fence, get) need no backend, and a call that does waits for it within
// its own deadline.
type lazyBackend struct {
	once  sync.Once
	ready chan struct{}
	be    plugin.Full          // set once before ready closes
	state *bridge.BackendReady // set once before ready closes
	err   error                // set once before ready closes
}

func newLazyBackend() *lazyBackend { return &lazyBackend{ready: make(chan struct{})} }

// set makes the started backend available.
func (l *lazyBackend) set(be plugin.Full, st *bridge.BackendReady) {
	l.once.Do(func() {
		l.be, l.state = be, st
		close(l.ready)
	})
}

// fail makes every waiting and later call fail with err.
func (l *lazyBackend) fail(err error) {
	l.once.Do(func() {
		l.err = fmt.Errorf("%w: %w", plugin.ErrBackendGone, err)
		close(l.ready)
	})
}

// wait is the bridge's Config.WaitBackend.
func (l *lazyBackend) wait(ctx context.Context) (*bridge.BackendReady, error) {
	select {
	case <-l.ready:
		return l.state, l.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the backend: %w", ctx.Err())
	}
}

func (l *lazyBackend) get(ctx context.Context) (plugin.Full, error) {
	select {
	case <-l.ready:
		return l.be, l.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the backend to start: %w", ctx.Err())
	}
}

func (l *lazyBackend) GetInfo(ctx context.Context) (*plugin.BackendInfo, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.GetInfo(ctx)
}

func (l *lazyBackend) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.Configure(ctx, req)
}

func (l *lazyBackend) ClientConnected(ctx context.Context, req *plugin.ClientRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.ClientConnected(ctx, req)
}

func (l *lazyBackend) ClientFinalized(ctx context.Context, req *plugin.ClientRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.ClientFinalized(ctx, req)
}

func (l *lazyBackend) Abort(ctx context.Context, req *plugin.AbortRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.Abort(ctx, req)
}

func (l *lazyBackend) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.Fence(ctx, req)
}

func (l *lazyBackend) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.DirectModex(ctx, req)
}

func (l *lazyBackend) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.Publish(ctx, req)
}

func (l *lazyBackend) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.Lookup(ctx, req)
}

func (l *lazyBackend) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.Unpublish(ctx, req)
}

func (l *lazyBackend) Spawn(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.Spawn(ctx, req)
}

func (l *lazyBackend) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.Connect(ctx, req)
}

func (l *lazyBackend) Disconnect(ctx context.Context, req *plugin.DisconnectRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.Disconnect(ctx, req)
}

func (l *lazyBackend) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	be, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return be.Query(ctx, req)
}

func (l *lazyBackend) Log(ctx context.Context, req *plugin.LogRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.Log(ctx, req)
}

func (l *lazyBackend) NotifyEvent(ctx context.Context, req *plugin.EventRequest) error {
	be, err := l.get(ctx)
	if err != nil {
		return err
	}
	return be.NotifyEvent(ctx, req)
}
