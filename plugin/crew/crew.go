// Package crew owns the goroutines, timers and bounded waits of one
// piece of gopmi (a node's fence tree, its overlay, the PMIx engine, a
// backend of the SDK's): nothing there starts any other way, so that
// closing the crew ends them all and waits for them (goleak finds none
// left), and every decision about time is made on a Clock tests drive
// (Fake). The bridge's Clock is this one.
package crew

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Clock is a crew's time: a fence tree decides with it when half a
// fence's time-out has passed and when a fence is over for good, the
// bridge when a wait's deadline came, so that tests drive those
// decisions with a fake clock (Fake) instead of waiting for them.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own once d has passed,
	// unless stop is called first; stop reports whether it prevented the
	// call. It never calls f before it returns.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Crew owns a piece's goroutines and timers, as the bridge's calls do
// for a job.
type Crew struct {
	clock  Clock
	ctx    context.Context // ends when the crew closes
	cancel context.CancelFunc

	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool                     // guarded by mu; nothing starts once set
	next   uint64                   // guarded by mu: the next timer's id
	timers map[uint64]func() bool   // guarded by mu: armed timers by id, with their clock's stop
	rings  map[uint64]chan struct{} // guarded by mu: the armed alarms' channels, which close closes
}

// New returns a crew on clock c (nil: the wall clock).
func New(c Clock) *Crew {
	if c == nil {
		c = Real{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Crew{clock: c, ctx: ctx, cancel: cancel, timers: map[uint64]func() bool{}, rings: map[uint64]chan struct{}{}}
}

// Closed reports whether Close began: nothing starts on the crew then.
func (c *Crew) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Now is the time on the crew's clock.
func (c *Crew) Now() time.Time { return c.clock.Now() }

// Armed is how many timers are armed, for tests.
func (c *Crew) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Spawn runs f on a goroutine that close waits for, with a context that
// Close cancels, and reports whether it started (not after close).
func (c *Crew) Spawn(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.ctx)
	}()
	return true
}

// Enter counts work that runs on a goroutine the crew did not start (a
// context.AfterFunc's callback), which Close then waits for: ok is false
// once the crew closed, and done must be called once the work ends.
func (c *Crew) Enter() (done func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	c.wg.Add(1)
	return c.wg.Done, true
}

// SpawnEntered runs f on a goroutine for work Enter counted already (so
// it runs even once Close began, which waits for it), and calls done
// when f returns.
func (c *Crew) SpawnEntered(done func(), f func(ctx context.Context)) {
	go func() {
		defer done()
		f(c.ctx)
	}()
}

// After calls f once d has passed on the crew's clock, unless stop or
// close comes first. Whoever takes a timer out of timers (its firing,
// stop, close) owns its count in wg, so each is counted down once.
func (c *Crew) After(d time.Duration, f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func() bool { return false }
	}
	_, stop = c.afterLocked(d, f)
	return stop
}

// afterLocked is After with mu held, on an open crew; ref names the
// timer.
func (c *Crew) afterLocked(d time.Duration, f func()) (ref uint64, stop func() bool) {
	ref = c.next
	c.next++
	c.wg.Add(1)
	c.timers[ref] = c.clock.AfterFunc(d, func() {
		if !c.claim(ref) {
			return
		}
		defer c.wg.Done()
		f()
	})
	return ref, func() bool {
		if !c.claim(ref) {
			return false
		}
		// A firing that comes now finds it gone and returns at once.
		c.wg.Done()
		return true
	}
}

// Alarm is a channel closed once d has passed on the crew's clock, or
// the crew closes, and its stop: a wait's bound. Once the crew has closed
// it is closed at once: nothing is left to wait for.
func (c *Crew) Alarm(d time.Duration) (<-chan struct{}, func() bool) {
	ch := make(chan struct{})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(ch)
		return ch, func() bool { return false }
	}
	var ref uint64
	ref, stop := c.afterLocked(d, func() {
		c.mu.Lock()
		delete(c.rings, ref)
		c.mu.Unlock()
		close(ch)
	})
	c.rings[ref] = ch
	return ch, func() bool {
		stopped := stop()
		if stopped {
			c.mu.Lock()
			delete(c.rings, ref)
			c.mu.Unlock()
		}
		return stopped
	}
}

// Sleep waits d on the crew's clock, or until ctx ends or the crew
// closes, and reports whether d passed with ctx alive and the crew open:
// a pause between tries, or a grace before an act, that a close cuts
// short.
func (c *Crew) Sleep(ctx context.Context, d time.Duration) bool {
	rang, stop := c.Alarm(d)
	defer stop()
	select {
	case <-rang:
		return ctx.Err() == nil && !c.Closed()
	case <-ctx.Done():
		return false
	}
}

// claim takes a timer out of timers and reports whether it was there.
func (c *Crew) claim(ref uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop, ok := c.timers[ref]
	if ok {
		delete(c.timers, ref)
		stop()
	}
	return ok
}

// Close cancels the goroutines' context, stops the timers still armed
// and waits for the goroutines and the timers already firing. Each of
// them ends once the context does (a call to the parent or the
// root is cut), so the wait is bounded by theirs.
func (c *Crew) Close() { _ = c.Shutdown(context.Background()) }

// Shutdown is Close with its wait bounded by ctx: it says what was left
// running when ctx ended first (and they still end by themselves).
func (c *Crew) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	armed, rings := c.timers, c.rings
	c.timers, c.rings = map[uint64]func() bool{}, map[uint64]chan struct{}{}
	c.mu.Unlock()
	c.cancel()
	for ref, stop := range armed {
		stop()
		// Neither its firing nor its stop can claim it now: an alarm's
		// channel is closed here, once.
		if ch, ok := rings[ref]; ok {
			close(ch)
		}
		c.wg.Done()
	}
	waited := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("goroutines still running: %w", ctx.Err())
	}
}
