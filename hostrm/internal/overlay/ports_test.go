package overlay

import (
	"slices"
	"testing"
)

// Every node of a step computes the same ports for a node: PortTries of
// them in the range, the node's own first, turned by its index so that
// nodes sharing a host do not all try the same port first; a spawned
// job (same secret, another namespace) starts elsewhere.
const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestTreePorts(t *testing.T) {
	r := ParsePorts("30000-30099")
	if r != (PortRange{30000, 30099}) {
		t.Fatalf("ParsePorts = %+v", r)
	}
	for _, bad := range []string{"", "x", "30000", "30000-30005", "0-100", "100-70000"} {
		if got := ParsePorts(bad); got != DefaultPorts {
			t.Errorf("ParsePorts(%q) = %+v, want the default %+v", bad, got, DefaultPorts)
		}
	}
	a0, a1 := r.Ports(secret, "slurm.1.0", 0), r.Ports(secret, "slurm.1.0", 1)
	if len(a0) != PortTries || !slices.Equal(a0, r.Ports(secret, "slurm.1.0", 0)) {
		t.Fatalf("ports of node 0: %v, not %d stable ports", a0, PortTries)
	}
	for _, p := range a0 {
		if p < r.Low || p > r.High {
			t.Fatalf("port %d outside %+v", p, r)
		}
		if !slices.Contains(a1, p) {
			t.Fatalf("node 1's ports %v are not node 0's %v turned", a1, a0)
		}
	}
	if a0[0] == a1[0] {
		t.Errorf("nodes 0 and 1 try %d first: nodes on one host would collide", a0[0])
	}
	if slices.Equal(a0, r.Ports(secret, "slurm.1.1", 0)) {
		t.Errorf("a spawned job's node 0 tries the same ports as its parent's: %v", a0)
	}
	if ParentRole("slurm.1.0", 0) == ParentRole("slurm.1.0", 1) || ParentRole("slurm.1.0", 0) == ParentRole("slurm.1.1", 0) {
		t.Error("two nodes prove the same role")
	}
}
