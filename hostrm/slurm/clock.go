package slurm

import (
	"context"
	"sync"
	"time"
)

// clock is the fence tree's time: it decides with it when half a fence's
// time-out has passed and when a fence is over for good, so that tests
// drive those decisions with a fake clock instead of waiting for them.
type clock interface {
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own once d has passed,
	// unless stop is called first; stop reports whether it prevented the
	// call. It never calls f before it returns.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// crew owns the fence tree's goroutines and timers: the tree starts none
// any other way, so that closing it ends them all and waits for them
// (goleak finds none left), as the bridge's calls do for a job.
type crew struct {
	clock  clock
	ctx    context.Context // ends when the crew closes
	cancel context.CancelFunc

	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool                   // guarded by mu; nothing starts once set
	next   uint64                 // guarded by mu: the next timer's id
	timers map[uint64]func() bool // guarded by mu: armed timers by id, with their clock's stop
}

func newCrew(c clock) *crew {
	ctx, cancel := context.WithCancel(context.Background())
	return &crew{clock: c, ctx: ctx, cancel: cancel, timers: map[uint64]func() bool{}}
}

// spawn runs f on a goroutine that close waits for, with a context that
// close cancels, and reports whether it started (not after close).
func (c *crew) spawn(f func(ctx context.Context)) bool {
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

// after calls f once d has passed on the crew's clock, unless stop or
// close comes first. Whoever takes a timer out of timers (its firing,
// stop, close) owns its count in wg, so each is counted down once.
func (c *crew) after(d time.Duration, f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func() bool { return false }
	}
	ref := c.next
	c.next++
	c.wg.Add(1)
	c.timers[ref] = c.clock.AfterFunc(d, func() {
		if !c.claim(ref) {
			return
		}
		defer c.wg.Done()
		f()
	})
	return func() bool {
		if !c.claim(ref) {
			return false
		}
		// A firing that comes now finds it gone and returns at once.
		c.wg.Done()
		return true
	}
}

// alarm is a channel closed once d has passed on the crew's clock, and
// its stop: a wait's bound. Once the crew has closed it is closed at
// once: nothing of the tree is left to wait for.
func (c *crew) alarm(d time.Duration) (<-chan struct{}, func() bool) {
	ch := make(chan struct{})
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		close(ch)
		return ch, func() bool { return false }
	}
	return ch, c.after(d, func() { close(ch) })
}

// claim takes a timer out of timers and reports whether it was there.
func (c *crew) claim(ref uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop, ok := c.timers[ref]
	if ok {
		delete(c.timers, ref)
		stop()
	}
	return ok
}

// close cancels the goroutines' context, stops the timers still armed
// and waits for the goroutines and the timers already firing. Each of
// them ends once the context does (a call to the parent or the
// coordinator is cut), so the wait is bounded by theirs.
func (c *crew) close() {
	c.mu.Lock()
	c.closed = true
	armed := c.timers
	c.timers = map[uint64]func() bool{}
	c.mu.Unlock()
	c.cancel()
	for _, stop := range armed {
		stop()
		c.wg.Done()
	}
	c.wg.Wait()
}
