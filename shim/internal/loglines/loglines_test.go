package loglines

import (
	"testing"
	"time"
)

// PerSecond lines pass each second; the others are counted, given to the
// next line that passes or to Quiet, and the first of them says so.
func TestBudget(t *testing.T) {
	b := Budget{PerSecond: 2}
	t0 := time.Unix(1000, 0)
	for i, want := range []bool{true, true, false, false} {
		ok, quiet, first := b.Take(t0.Add(time.Duration(i) * time.Millisecond))
		if ok != want || quiet != 0 || first != (i == 2) {
			t.Fatalf("line %d: ok %v quiet %d first %v", i, ok, quiet, first)
		}
	}
	if ok, quiet, _ := b.Take(t0.Add(time.Second)); !ok || quiet != 2 {
		t.Fatalf("a second later: ok %v, quiet %d; want true, 2", ok, quiet)
	}
	b.Take(t0.Add(time.Second))
	b.Take(t0.Add(time.Second))
	if n := b.Quiet(); n != 1 {
		t.Fatalf("Quiet: %d, want 1", n)
	}
	if n := b.Quiet(); n != 0 {
		t.Fatalf("Quiet again: %d, want 0", n)
	}
}
