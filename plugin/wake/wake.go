// Package wake is a broadcast for waiters that loop: each takes the
// current channel, checks its condition, and waits for the channel to
// close; whoever changes the state calls Broadcast, which closes that
// channel and starts a new one. It is the shape sync.Cond has, for
// waits that also select on a context or a timer.
//
// The name service (plugin/names), the local universe, the node daemon,
// its client and Slurm's coordinator wait this way.
package wake

import "sync"

// Cond is a broadcast. The zero value is ready to use; a Cond must not
// be copied after first use.
type Cond struct {
	mu     sync.Mutex
	ch     chan struct{} // guarded by mu; nil until first used
	closed bool          // guarded by mu
}

// closedChan is what C returns after Close.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// C returns the channel the next Broadcast (or Close) closes. Take it
// before checking the condition it guards, so that a change made after
// the check is not missed.
func (c *Cond) C() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return closedChan
	}
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Broadcast wakes every waiter on the current channel.
func (c *Cond) Broadcast() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Closed reports whether Close was called: a loop woken for good ends.
func (c *Cond) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close wakes every waiter for good: C returns a closed channel from now
// on, so loops see their end condition (a closed server, say) at once.
func (c *Cond) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}
