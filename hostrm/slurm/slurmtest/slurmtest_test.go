package slurmtest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDepth(t *testing.T) {
	for _, c := range []struct{ n, w, want int }{
		{2, 2, 1}, {3, 2, 2}, {8, 2, 3}, {16, 16, 1}, {17, 16, 2}, {1024, 16, 3}, {4096, 16, 3}, {4096, 4, 6}, {3, 1, 3},
	} {
		if got := Depth(c.n, c.w); got != c.want {
			t.Errorf("Depth(%d, %d) = %d, want %d", c.n, c.w, got, c.want)
		}
	}
}

// A small step runs every phase: each collecting fence gives every node
// every part, and each direct-modex read the node's own part (Run checks
// both).
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Run(ctx, Options{Nodes: 16, Width: 4, Rounds: 1, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Depth != 2 || r.Barrier <= 0 || r.Collect <= 0 || r.Modex <= 0 || r.CoordConns < 4 || r.NodeFiles <= 0 {
		t.Errorf("result %+v", r)
	}
	t.Logf("%+v", r)
}
