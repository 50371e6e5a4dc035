package plugin

import (
	"context"
	"io"
	"sync"
)

// Relay is the recommended shape of a backend process (see the package
// doc, "Process model"): a thin per-node client that forwards every call
// to a backend in the resource manager's daemon, which sees every node and
// job. It dials on the first call, through its dial function, and keeps
// the connection until Close (or until Replace swaps it); a call while
// the daemon cannot be reached fails with the dial's error, and the next
// call dials again.
//
// Embed a *Relay and override what the client decides itself. gopmi's
// gopmi-rm-local overrides Configure to learn the daemon's address from the
// job's backend config before it forwards the call.
type Relay struct {
	Deferred // forwards every call to the dialled backend

	dial func(ctx context.Context) (Full, io.Closer, error)

	mu     sync.Mutex
	full   Full      // guarded by mu; nil until dialled
	closer io.Closer // guarded by mu
}

// NewRelay returns a Relay that reaches the daemon with dial: it returns
// the daemon's backend (over the RM's transport) and what closes the
// connection. dial's errors should wrap ErrUnavailable.
func NewRelay(dial func(ctx context.Context) (Full, io.Closer, error)) *Relay {
	r := &Relay{dial: dial}
	r.Resolve = r.resolve
	return r
}

// Connected reports whether the daemon has been dialled.
func (r *Relay) Connected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.full != nil
}

// Close closes the connection to the daemon, if any.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closer == nil {
		return nil
	}
	err := r.closer.Close()
	r.full, r.closer = nil, nil
	return err
}

// Replace makes full (closed by closer) the connection later calls use,
// if the one in use is still old's, and reports whether it did; a nil
// full makes the next call dial. It does not close old: calls in flight
// on it finish there, and the caller closes it when it will.
func (r *Relay) Replace(old io.Closer, full Full, closer io.Closer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closer != old || old == nil {
		return false
	}
	r.full, r.closer = full, closer
	return true
}

// resolve dials once; the connection lives until Close.
func (r *Relay) resolve(ctx context.Context, call string) (Full, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full != nil {
		return r.full, nil
	}
	full, closer, err := r.dial(ctx)
	if err != nil {
		return nil, Wrapf(err, ErrUnavailable, "%s", call)
	}
	r.full, r.closer = full, closer
	return full, nil
}
