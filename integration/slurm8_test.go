package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/slurmlab"
)

// The eight-node cluster: eight slurmd on this host, with mpi/gopmi's
// fence tree at width 2 (GopmiTreeWidth in mpi.conf), so that a step on
// all eight nodes has three levels under the coordinator: n1 and n2
// report to it, n3..n6 to them, n7 and n8 to n3.

// slurm8 returns the eight-node cluster.
func slurm8(t *testing.T) *slurmlab.Cluster {
	t.Helper()
	return eightNodes.cluster(t)
}

// MPICH's hello and alltoall, the libpmi2 job and 64 PMI-1 ranks on all
// eight nodes, their fences crossing the three levels of the width-2
// tree: the same answers as on two nodes.
func TestSlurmEightNodes(t *testing.T) {
	c := slurm8(t)
	want := map[string]bool{"hello/n=16": true, "alltoall/n=8": true, "pmi2_bench/n=16": true, "pmi1/n=64": true}
	for _, cs := range clients.Cases() {
		if !want[cs.Name] {
			continue
		}
		for _, mode := range []string{"collect", "modex"} {
			t.Run(cs.Name+"/"+mode, func(t *testing.T) {
				argv := append([]string{"srun", "--mpi=gopmi", "-N", "8", "-n", strconv.Itoa(cs.N), progs[cs.Program]}, cs.Args...)
				r := runOn(t, c, 2*time.Minute, argv, "GOPMI_FENCE_MODE="+mode)
				if err := cs.Verify("gopmi", r); err != nil {
					t.Fatalf("%v\n%s", err, eightFailure(c, r))
				}
			})
		}
	}
}

// An interior node of the tree lost in a fence: node n3's gopmi server
// (its gopmi-slurm shim, which holds the node's place in the tree) is
// killed, not its stepd, which Slurm itself would notice. The step fails
// within the fence time-out naming rank 2 (n3's own) and rank 7 (n8's,
// which holds), and no barrier completes. n3's children n7 and n8 lose
// their parent: a child may go past it to an ancestor (the overlay's
// rejoin) and arrive before the time-out, or not (a loaded machine), so
// rank 6 (n7) may be named or not; a node outside n3's subtree never is.
func TestSlurmEightNodesInteriorLoss(t *testing.T) {
	c := slurm8(t)
	start := time.Now()
	// One rank per node: rank i on node n(i+1). Rank 7 (n8), the last,
	// holds; the others wait in a barrier.
	r := killShimInStep(t, c, []string{"-N", "8", "-n", "8"}, 8, 2, eightFailure, "GOPMI_TIMEOUT=5")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the step ended %v after it started, with a 5 s fence time-out", d)
	}
	for _, who := range []string{"rank 2 (node n3)", "rank 7 (node n8)"} {
		if !strings.Contains(r.Stderr, who) {
			t.Errorf("srun's stderr does not name %s of n3's subtree:\n%s", who, r.Stderr)
		}
	}
	for _, l := range strings.Split(r.Stderr, "\n") {
		for _, other := range []string{"(node n1)", "(node n2)", "(node n4)", "(node n5)", "(node n6)"} {
			if strings.Contains(l, "did not arrive") && strings.Contains(l, other) {
				t.Errorf("srun's stderr says %s, which arrived, did not: %s", other, l)
			}
		}
	}
	if strings.Contains(r.Stdout, "barrier-completed") {
		t.Fatalf("a barrier completed without n3's subtree:\n%s", r.Stdout)
	}
}

func eightFailure(c *slurmlab.Cluster, r clients.Result) string {
	var b strings.Builder
	b.WriteString(r.Summary())
	for _, n := range []string{"n1", "n3", "n7"} {
		fmt.Fprintf(&b, "\nslurmd-%s.log:\n%s", n, c.Log("slurmd-"+n, 10))
	}
	return b.String()
}
