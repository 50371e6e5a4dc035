package crew

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Close cancels the goroutines' context, stops the timers still armed and
// waits for what runs; nothing starts after it, and an alarm after it
// has rung already.
func TestCrewClose(t *testing.T) {
	c := New(nil)
	ended := make(chan struct{})
	if !c.Spawn(func(ctx context.Context) { <-ctx.Done(); close(ended) }) {
		t.Fatal("Spawn refused before Close")
	}
	fired := make(chan struct{}, 1)
	c.After(time.Hour, func() { fired <- struct{}{} })
	rang, stop := c.Alarm(time.Millisecond)
	<-rang
	stop()
	if n := c.Armed(); n != 1 {
		t.Errorf("%d timers armed, want the hour's", n)
	}
	c.Close()
	select {
	case <-ended:
	default:
		t.Error("Close returned before its goroutine ended")
	}
	if c.Armed() != 0 {
		t.Error("a timer still armed after Close")
	}
	if c.Spawn(func(context.Context) {}) {
		t.Error("Spawn started a goroutine after Close")
	}
	late, _ := c.Alarm(time.Hour)
	select {
	case <-late:
	default:
		t.Error("an alarm made after Close has not rung")
	}
	select {
	case <-fired:
		t.Error("a stopped timer fired")
	default:
	}
}
