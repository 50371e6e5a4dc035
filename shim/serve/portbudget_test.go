package serve

import (
	"testing"
	"time"
)

// TestPortBudget: the job's user and everyone else have budgets of their
// own, a local user other than the job's holds few connections that
// claimed no rank, and a claim or a close gives a place back.
func TestPortBudget(t *testing.T) {
	b := newPortBudget(2) // 12 places each
	var owners, hers []*portConn
	for range 12 {
		pc, why := b.admit(true, "uid 0")
		if pc == nil {
			t.Fatalf("the job's user refused: %s", why)
		}
		owners = append(owners, pc)
	}
	if pc, _ := b.admit(true, "uid 0"); pc != nil {
		t.Error("a 13th connection of the job's user admitted")
	}
	for range pendingPerUser {
		pc, why := b.admit(false, "uid 999")
		if pc == nil {
			t.Fatalf("another user's first connections refused: %s", why)
		}
		hers = append(hers, pc)
	}
	if pc, why := b.admit(false, "uid 999"); pc != nil || why != "uid 999 already has 8 connections that claimed no rank" {
		t.Errorf("her 9th pending connection: %v, %q", pc, why)
	}
	// A task of another host is not held to a local user's few.
	pc, why := b.admit(false, "host 10.0.0.2")
	if pc == nil {
		t.Fatalf("another host's task refused: %s", why)
	}
	b.leave(pc)
	// Once one of hers claimed a rank, she may open another.
	b.claimed(hers[0])
	if pc, _ := b.admit(false, "uid 999"); pc == nil {
		t.Error("a place not given back by a claim")
	}
	b.leave(owners[0])
	if pc, _ := b.admit(true, "uid 0"); pc == nil {
		t.Error("a place not given back by a close")
	}
	if b.others != 9 || b.pending["uid 999"] != 8 {
		t.Errorf("others %d, her pending %d; want 9 and 8", b.others, b.pending["uid 999"])
	}
}

// TestPortRefusalLines: refusals log a few lines a second, and the next
// line says how many went unlogged.
func TestPortRefusalLines(t *testing.T) {
	b := newPortBudget(1)
	now := time.Unix(100, 0)
	for i := range refusalsPerSecond {
		if ok, n, _ := b.lines.Take(now); !ok || n != 0 {
			t.Fatalf("line %d: %v, %d", i, ok, n)
		}
	}
	for i := range 3 {
		if ok, _, first := b.lines.Take(now.Add(500 * time.Millisecond)); ok || first != (i == 0) {
			t.Fatalf("a line beyond the rate: logged %v, first %v", ok, first)
		}
	}
	if ok, n, _ := b.lines.Take(now.Add(time.Second)); !ok || n != 3 {
		t.Errorf("the next second's first line: %v, %d unlogged; want true, 3", ok, n)
	}
}
