package crew

import (
	"sync"
	"time"
)

// Fake is a Clock that moves only when Advance moves it, firing the
// timers that came due, in the order of their times, on the caller's
// goroutine.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // guarded by mu; fired and stopped ones are dropped by Advance
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool // fired or stopped; guarded by Fake.mu
}

// NewFake is a fake clock at a fixed time.
func NewFake() *Fake { return &Fake{now: time.Unix(1_000_000, 0)} }

// Now is the fake clock's time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms f to fire once the clock has been advanced by d.
func (c *Fake) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.done
		t.done = true
		return was
	}
}

// Armed is how many timers are armed and not yet due.
func (c *Fake) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// Advance moves the clock by d, firing each timer that comes due at its
// time, without the clock's lock (a timer's f may arm or stop others,
// and those that come due within d fire too).
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.done && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.timers = dropDone(c.timers)
			c.mu.Unlock()
			return
		}
		next.done = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// dropDone is ts without the timers that fired or were stopped.
func dropDone(ts []*fakeTimer) []*fakeTimer {
	out := ts[:0]
	for _, t := range ts {
		if !t.done {
			out = append(out, t)
		}
	}
	return out
}
