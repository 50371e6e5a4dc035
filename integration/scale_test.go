package integration

import (
	"testing"

	"github.com/gopmi/gopmi/integration/clients"
)

// TestScale1024 runs 1024 ranks of the PMI-only clients on one node: the
// PMI-1 wire client (put, barrier, 16 gets, a missing get, barrier) and
// libpmi2's benchmark with few keys and peers, to keep the cost at a few
// seconds each.
func TestScale1024(t *testing.T) {
	begin(t)
	t.Run("pmi1/n=1024", func(t *testing.T) {
		runCase(t, tableCase(t, "pmi1/n=1024"), nil, quiet())
	})
	t.Run("pmi2_bench/n=1024", func(t *testing.T) {
		c := tableCase(t, "pmi2_bench/n=1024")
		// The table's default (k=8 g=16 rounds=3) spends ~15s in gets
		// alone here; the point is 1024 ranks through put/fence/get.
		c.Args = []string{"k=2", "g=4", "rounds=1"}
		r := runCase(t, c, nil, quiet())
		for _, l := range clients.Lines(r.Stdout, "bench n=") {
			t.Log(l)
		}
	})
}
