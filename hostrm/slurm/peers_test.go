package slurm

import (
	"slices"
	"testing"
)

// Every node of a step computes the same ports for a node: portTries of
// them in the range, the node's own first, turned by its index so that
// nodes sharing a host do not all try the same port first; a spawned
// job (same secret, another namespace) starts elsewhere.
func TestTreePorts(t *testing.T) {
	r := parsePorts("30000-30099")
	if r != (portRange{30000, 30099}) {
		t.Fatalf("parsePorts = %+v", r)
	}
	for _, bad := range []string{"", "x", "30000", "30000-30005", "0-100", "100-70000"} {
		if got := parsePorts(bad); got != defaultPorts {
			t.Errorf("parsePorts(%q) = %+v, want the default %+v", bad, got, defaultPorts)
		}
	}
	a0, a1 := r.ports(testSecret, "slurm.1.0", 0), r.ports(testSecret, "slurm.1.0", 1)
	if len(a0) != portTries || !slices.Equal(a0, r.ports(testSecret, "slurm.1.0", 0)) {
		t.Fatalf("ports of node 0: %v, not %d stable ports", a0, portTries)
	}
	for _, p := range a0 {
		if p < r.low || p > r.high {
			t.Fatalf("port %d outside %+v", p, r)
		}
		if !slices.Contains(a1, p) {
			t.Fatalf("node 1's ports %v are not node 0's %v turned", a1, a0)
		}
	}
	if a0[0] == a1[0] {
		t.Errorf("nodes 0 and 1 try %d first: nodes on one host would collide", a0[0])
	}
	if slices.Equal(a0, r.ports(testSecret, "slurm.1.1", 0)) {
		t.Errorf("a spawned job's node 0 tries the same ports as its parent's: %v", a0)
	}
	if parentRole("slurm.1.0", 0) == parentRole("slurm.1.0", 1) || parentRole("slurm.1.0", 0) == parentRole("slurm.1.1", 0) {
		t.Error("two nodes prove the same role")
	}
}
