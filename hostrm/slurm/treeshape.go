package slurm

// The tree's shape: who is whose parent and child, and how its ranks are
// named by node.

import (
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/plugin"
)

// treeParent is node index i's parent index, -1 for the coordinator.
func treeParent(i, width int) int {
	return (i+1-1)/width - 1
}

// treeChildren are node index i's children indexes among n nodes.
func treeChildren(i, width, n int) []int {
	var out []int
	for k := (i+1)*width + 1; k <= (i+1)*width+width && k <= n; k++ {
		out = append(out, k-1)
	}
	return out
}

// subtree lists node index i and every index below it.
func subtree(i, width, n int) []int {
	out := []int{i}
	for _, c := range treeChildren(i, width, n) {
		out = append(out, subtree(c, width, n)...)
	}
	return out
}

// rankGroups names ranks grouped by the node that hosts them, in the
// job's node order, as the universe names a fence's missing ranks:
// "ranks 4-7 (node n1), rank 9 (node n2)", and "and N more nodes" past
// limit nodes. It is "" for no rank.
func rankGroups(job plugin.Job, ranks []int32, limit int) string {
	byNode := make([][]int32, len(job.Nodes))
	rankNode := job.RankNodes()
	for _, r := range ranks {
		if r >= 0 && int(r) < len(rankNode) && rankNode[r] >= 0 {
			byNode[rankNode[r]] = append(byNode[rankNode[r]], r)
		}
	}
	var groups []string
	more := 0
	for i, rs := range byNode {
		if len(rs) == 0 {
			continue
		}
		if len(groups) == limit {
			more++
			continue
		}
		groups = append(groups, plugin.RankList(rs)+" (node "+job.Nodes[i].Name+")")
	}
	s := strings.Join(groups, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more nodes", more)
	}
	return s
}
