package crew

import (
	"context"
	"slices"
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

// Enter counts work on a goroutine the crew did not start: Close waits
// for its done, and refuses it once closed.
func TestCrewEnter(t *testing.T) {
	c := New(nil)
	done, ok := c.Enter()
	if !ok {
		t.Fatal("Enter refused before Close")
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with entered work running")
	case <-time.After(20 * time.Millisecond):
	}
	done()
	<-closed
	if _, ok := c.Enter(); ok {
		t.Error("Enter after Close")
	}
}

// The fake clock fires timers in the order of their times as it is
// advanced, those armed by a firing timer too, and Armed counts the rest.
func TestFakeClock(t *testing.T) {
	f := NewFake()
	c := New(f)
	defer c.Close()
	var got []string
	c.After(30*time.Millisecond, func() { got = append(got, "30") })
	c.After(10*time.Millisecond, func() {
		got = append(got, "10")
		c.After(5*time.Millisecond, func() { got = append(got, "15") })
	})
	stop := c.After(20*time.Millisecond, func() { got = append(got, "20") })
	stop()
	if f.Armed() != 2 {
		t.Errorf("%d timers armed, want 2", f.Armed())
	}
	f.Advance(25 * time.Millisecond)
	if want := []string{"10", "15"}; !slices.Equal(got, want) {
		t.Errorf("fired %v by 25ms, want %v", got, want)
	}
	f.Advance(5 * time.Millisecond)
	if want := []string{"10", "15", "30"}; !slices.Equal(got, want) || f.Armed() != 0 {
		t.Errorf("fired %v by 30ms (%d armed), want %v", got, f.Armed(), want)
	}
}

// An alarm armed before Close rings when the crew closes: a wait bounded
// by it does not outlive the crew.
func TestAlarmRingsAtClose(t *testing.T) {
	f := NewFake()
	c := New(f)
	rang, _ := c.Alarm(time.Hour)
	kept, stop := c.Alarm(time.Hour)
	stop()
	c.Close()
	select {
	case <-rang:
	default:
		t.Fatal("an armed alarm did not ring at Close")
	}
	select {
	case <-kept:
		t.Error("a stopped alarm rang at Close")
	default:
	}
}
