package fencetree

import (
	"slices"
	"testing"

	"github.com/gopmi/gopmi/plugin"
)

// The job of the tests: at width 1, node n1 (ranks 0-1) is under the
// root, n2 (ranks 2-3) under n1, n3 (rank 4) under n2.
var job = plugin.Job{Nspace: "slurm.9.0", Size: 5, Nodes: []plugin.Node{
	{ID: 0, Name: "n1", Ranks: []int32{0, 1}}, {ID: 1, Name: "n2", Ranks: []int32{2, 3}},
	{ID: 2, Name: "n3", Ranks: []int32{4}},
}}

func TestTreeShape(t *testing.T) {
	for _, tc := range []struct {
		i, width, n int
		parent      int
		children    []int
	}{
		{0, 16, 2, -1, nil},
		{1, 16, 40, -1, []int{32, 33, 34, 35, 36, 37, 38, 39}},
		{0, 1, 3, -1, []int{1}},
		{1, 1, 3, 0, []int{2}},
		{2, 1, 3, 1, nil},
		{0, 2, 7, -1, []int{2, 3}},
		{1, 2, 7, -1, []int{4, 5}},
		{5, 2, 7, 1, nil},
		{2, 2, 7, 0, []int{6}},
	} {
		if p := Parent(tc.i, tc.width); p != tc.parent {
			t.Errorf("Parent(%d, %d) = %d, want %d", tc.i, tc.width, p, tc.parent)
		}
		if c := Children(tc.i, tc.width, tc.n); !slices.Equal(c, tc.children) {
			t.Errorf("Children(%d, %d, %d) = %v, want %v", tc.i, tc.width, tc.n, c, tc.children)
		}
	}
	if got := Ancestors(20, 4); !slices.Equal(got, []int{4, 0}) {
		t.Errorf("Ancestors(20, 4) = %v, want [4 0]", got)
	}
	// Every node is in exactly one subtree under the coordinator.
	for _, width := range []int{1, 2, 3, 16} {
		seen := map[int]int{}
		for i := 0; i < min(width, 20); i++ {
			for _, x := range Subtree(i, width, 20) {
				seen[x]++
			}
		}
		for i := 0; i < 20; i++ {
			if seen[i] != 1 {
				t.Errorf("width %d: node %d in %d subtrees", width, i, seen[i])
			}
		}
	}
}

func TestRankGroups(t *testing.T) {
	for _, tc := range []struct {
		ranks []int32
		limit int
		want  string
	}{
		{nil, 16, ""},
		{[]int32{4}, 16, "rank 4 (node n3)"},
		{[]int32{3, 2, 0}, 16, "rank 0 (node n1), ranks 2-3 (node n2)"},
		{[]int32{0, 1, 2, 3, 4}, 2, "ranks 0-1 (node n1), ranks 2-3 (node n2) and 1 more nodes"},
	} {
		if got := RankGroups(job, slices.Clone(tc.ranks), tc.limit); got != tc.want {
			t.Errorf("RankGroups(%v, %d) = %q, want %q", tc.ranks, tc.limit, got, tc.want)
		}
	}
}
