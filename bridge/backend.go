package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gopmi/gopmi/plugin"
)

// Backend is a job's handle on its backend, which may come up after the
// job has begun: a shim serves its tasks while the backend process starts,
// and a job on one node starts it only when a request first needs it. The
// handle is the one place that knows whether the backend is up: the host
// (the shim, `gopmi run`) brings it up and calls Up or Fail once; the Job
// asks.
//
// Backend is itself a plugin.Full: each call asks for the backend, waits
// for it within the call's context, then forwards. A backend that failed
// to come up fails every call with an error that wraps
// plugin.ErrBackendGone.
type Backend struct {
	plugin.Deferred

	name   string // names the backend in messages until it is up
	onNeed func()

	needOnce sync.Once
	once     sync.Once
	ready    chan struct{}       // closed when the bring-up ended, either way
	full     plugin.Full         // written once before ready closes
	info     *plugin.BackendInfo // written once before ready closes; never nil after
	attrs    []plugin.Info       // written once before ready closes
	err      error               // written once before ready closes

	known event // fires once ready closed
}

// NewBackend returns the handle of a backend that is not up yet. name
// names it in messages until it is up. onNeed, when not nil, is called
// once, on the first Need or call: a host that starts its backend on
// demand starts it there, and may call Up from within onNeed.
func NewBackend(name string, onNeed func()) *Backend {
	b := &Backend{name: name, onNeed: onNeed, ready: make(chan struct{})}
	b.Resolve = b.resolve
	return b
}

// ReadyBackend returns the handle of a backend that is up already.
func ReadyBackend(be plugin.Full, info *plugin.BackendInfo, attrs []plugin.Info) *Backend {
	b := NewBackend("", nil)
	b.Up(be, info, attrs)
	return b
}

// Up makes the backend available. info is what its GetInfo said (its
// name and capabilities) and attrs the job attributes its Configure
// returned, which fill in keys the job's own attributes lack. Only the
// first Up or Fail counts.
func (b *Backend) Up(be plugin.Full, info *plugin.BackendInfo, attrs []plugin.Info) {
	b.once.Do(func() {
		if info == nil {
			info = &plugin.BackendInfo{}
		}
		b.full, b.info, b.attrs = be, info, attrs
		close(b.ready)
		b.known.fire()
	})
}

// Fail records that the backend will not come up: every waiting and later
// call fails with err, wrapped in plugin.ErrBackendGone. Only the first Up
// or Fail counts.
func (b *Backend) Fail(err error) {
	b.once.Do(func() {
		if !errors.Is(err, plugin.ErrBackendGone) {
			err = fmt.Errorf("%w: %w", plugin.ErrBackendGone, err)
		}
		b.err = fmt.Errorf("backend not available: %w", err)
		b.info = &plugin.BackendInfo{}
		close(b.ready)
		b.known.fire()
	})
}

// whenKnown runs f once the bring-up ended, either way: at once when it
// has, else on the goroutine that calls Up or Fail; stop unregisters it.
// It does not ask for the backend. f must not block or take a lock its
// caller may hold: the Job's callbacks only start work on goroutines of
// their own.
func (b *Backend) whenKnown(f func()) (stop func() bool) {
	return b.known.on(f)
}

// Need asks for the backend without waiting for it.
func (b *Backend) Need() {
	b.needOnce.Do(func() {
		if b.onNeed != nil {
			b.onNeed()
		}
	})
}

// Wait asks for the backend and waits until its bring-up ended or ctx did.
// It returns why the backend is not available, or nil once it is up.
func (b *Backend) Wait(ctx context.Context) error {
	b.Need()
	select {
	case <-b.ready:
		return b.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the backend to start: %w", ctx.Err())
	}
}

// drainer is the backend as a plugin.FinalizeDrainer, once up.
func (b *Backend) drainer() (plugin.FinalizeDrainer, bool) {
	if !b.IsUp() {
		return nil, false
	}
	d, ok := b.full.(plugin.FinalizeDrainer)
	return d, ok
}

// Ready is closed once the bring-up ended, whether the backend came up or
// not; it does not ask for the backend.
func (b *Backend) Ready() <-chan struct{} { return b.ready }

// Known reports, without asking or waiting, whether the bring-up ended.
func (b *Backend) Known() bool { return isClosed(b.ready) }

// IsUp reports, without asking or waiting, whether the backend is up.
func (b *Backend) IsUp() bool { return b.Known() && b.err == nil }

// Err says, once Ready is closed, why the backend is not available; nil
// when it is up.
func (b *Backend) Err() error {
	if !b.Known() {
		return nil
	}
	return b.err
}

// Name names the backend in messages: its own name once up, else the
// host's name for it, else "this backend".
func (b *Backend) Name() string {
	if b.Known() && b.info.Name != "" {
		return b.info.Name
	}
	if b.name != "" {
		return b.name
	}
	return "this backend"
}

// Has reports whether the backend is up and advertised the capability
// (plugin.Cap*).
func (b *Backend) Has(capName string) bool {
	return b.IsUp() && slices.Contains(b.info.Capabilities, capName)
}

// Attr looks key up among the job attributes the backend returned from
// Configure.
func (b *Backend) Attr(key string) (string, bool) {
	if !b.IsUp() {
		return "", false
	}
	for _, a := range b.attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// resolve is the Deferred's Resolve: ask, wait, forward.
func (b *Backend) resolve(ctx context.Context, call string) (plugin.Full, error) {
	b.Need()
	select {
	case <-b.ready:
		return b.full, b.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: waiting for the backend to start: %w", call, ctx.Err())
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// inStep names the step a backend's error failed, unless the backend's
// message starts with it already: a backend's "fence world/1 of job X:
// ranks 2-3 did not arrive" stays as it is, a bare "not found" becomes
// "lookup svc: not found". The contract (package plugin, "Errors") tells
// vendors so.
func inStep(step string, err error) error {
	if strings.HasPrefix(err.Error(), step) {
		return err
	}
	return fmt.Errorf("%s: %w", step, err)
}
