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
	plugin.Deferred // resolves to the backend once it is up

	once       sync.Once
	ready      chan struct{}
	demandOnce sync.Once
	demand     chan struct{}        // closed by the first call that needs the backend
	be         plugin.Full          // set once before ready closes
	state      *bridge.BackendReady // set once before ready closes
	err        error                // set once before ready closes
}

func newLazyBackend() *lazyBackend {
	l := &lazyBackend{ready: make(chan struct{}), demand: make(chan struct{})}
	l.Resolve = l.get
	return l
}

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

// need records that something needs the backend, which a shim that
// starts it on demand waits for.
func (l *lazyBackend) need() {
	l.demandOnce.Do(func() { close(l.demand) })
}

// await asks for the backend and waits until its start ended or ctx did.
func (l *lazyBackend) await(ctx context.Context) error {
	l.need()
	select {
	case <-l.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait is the bridge's Config.WaitBackend.
func (l *lazyBackend) wait(ctx context.Context) (*bridge.BackendReady, error) {
	if err := l.await(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the backend: %w", err)
	}
	return l.state, l.err
}

// get is the Deferred's Resolve.
func (l *lazyBackend) get(ctx context.Context, call string) (plugin.Full, error) {
	if err := l.await(ctx); err != nil {
		return nil, fmt.Errorf("%s: waiting for the backend to start: %w", call, err)
	}
	return l.be, l.err
}
