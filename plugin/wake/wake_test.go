package wake

import (
	"testing"
	"time"
)

func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestBroadcastWakesOnlyTheTakenChannel(t *testing.T) {
	var c Cond
	first := c.C()
	if closedNow(first) {
		t.Fatal("a new Cond's channel is closed")
	}
	if again := c.C(); again != first {
		t.Fatal("C changed without a Broadcast")
	}
	c.Broadcast()
	if !closedNow(first) {
		t.Fatal("Broadcast did not close the channel taken before it")
	}
	second := c.C()
	if closedNow(second) {
		t.Fatal("the channel taken after a Broadcast is closed")
	}
	c.Broadcast()
	c.Broadcast() // a Broadcast with nobody waiting is fine
	if !closedNow(second) {
		t.Fatal("the second Broadcast did not close the second channel")
	}
}

func TestCloseIsForGood(t *testing.T) {
	var c Cond
	taken := c.C()
	c.Close()
	if !closedNow(taken) {
		t.Fatal("Close did not wake the waiter")
	}
	if !closedNow(c.C()) {
		t.Fatal("C after Close is open: a loop would wait forever")
	}
	c.Broadcast()
	c.Close()
}

func TestWaiterInAnotherGoroutine(t *testing.T) {
	var c Cond
	ch := c.C()
	done := make(chan struct{})
	go func() {
		<-ch
		close(done)
	}()
	c.Broadcast()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
}
