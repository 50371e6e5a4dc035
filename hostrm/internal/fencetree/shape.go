// Package fencetree is the host-neutral part of gopmi's fence tree: the
// tree's shape (who is whose parent, which ranks a subtree holds, how
// they are named by node) and the gather, the pure decision of what one
// node does with the parts of a collecting fence that reach it from its
// own ranks and its children's subtrees. It knows no resource manager:
// the Slurm backend (hostrm/slurm) drives it today, and a Flux host can
// drive it unchanged.
//
// A job's nodes form a tree of width w under a root (the coordinator
// under Slurm), in the job's node order: with k = node index + 1, node
// k's parent is k' = (k-1)/w (0: the root) and its children are
// k*w+1 .. k*w+w.
package fencetree

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gopmi/gopmi/plugin"
)

// MaxGroups is how many nodes a message names before "and N more".
const MaxGroups = 16

// Parent is node index i's parent index, -1 for the root.
func Parent(i, width int) int {
	return (i+1-1)/width - 1
}

// Children are node index i's children indexes among n nodes.
func Children(i, width, n int) []int {
	var out []int
	for k := (i+1)*width + 1; k <= (i+1)*width+width && k <= n; k++ {
		out = append(out, k-1)
	}
	return out
}

// Subtree lists node index i and every index below it among n nodes.
func Subtree(i, width, n int) []int {
	out := []int{i}
	for _, c := range Children(i, width, n) {
		out = append(out, Subtree(c, width, n)...)
	}
	return out
}

// Ancestors are node index i's parent, its parent's parent, and so on
// to the top of the tree, nearest first.
func Ancestors(i, width int) []int {
	var out []int
	for p := Parent(i, width); p >= 0; p = Parent(p, width) {
		out = append(out, p)
	}
	return out
}

// Key is what tells one collecting fence from another: its ID and its
// participants, in any order.
func Key(req *plugin.FenceRequest) string {
	_, set := plugin.ProcSet(req.Procs)
	return req.ID + "\x00" + set
}

// RankGroups names ranks grouped by the node that hosts them, in the
// job's node order, as the universe names a fence's missing ranks:
// "ranks 4-7 (node n1), rank 9 (node n2)", and "and N more nodes" past
// limit nodes. It is "" for no rank.
func RankGroups(job plugin.Job, ranks []int32, limit int) string {
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

// NodeList names nodes, "and N more" past MaxGroups.
func NodeList(names []string) string {
	if len(names) > MaxGroups {
		return fmt.Sprintf("%s and %d more nodes", strings.Join(names[:MaxGroups], ", "), len(names)-MaxGroups)
	}
	if len(names) == 1 {
		return "node " + names[0]
	}
	return "nodes " + strings.Join(names, ", ")
}

// Place is one node's place in its job's tree.
type Place struct {
	Job   plugin.Job
	Self  int // the node's index in Job.Nodes
	Width int
	// Root names the tree's root in messages ("the coordinator").
	Root string
}

// Name is the node's name.
func (p Place) Name() string { return p.Job.Nodes[p.Self].Name }

// ParentName names where this node's fences go.
func (p Place) ParentName() string {
	if i := Parent(p.Self, p.Width); i >= 0 {
		return "the parent node " + p.Job.Nodes[i].Name
	}
	return p.Root
}

// CutSubtree names the ranks a lost parent node cuts off from the root:
// its whole subtree, the parent's own included ("" under the root).
func (p Place) CutSubtree() string {
	parent := Parent(p.Self, p.Width)
	if parent < 0 {
		return ""
	}
	var ranks []int32
	for _, i := range Subtree(parent, p.Width, len(p.Job.Nodes)) {
		ranks = append(ranks, p.Job.Nodes[i].Ranks...)
	}
	return ", so its subtree is lost: " + RankGroups(p.Job, ranks, MaxGroups)
}

// BelowGroups names the ranks of every node below this one.
func (p Place) BelowGroups() string {
	var ranks []int32
	for _, i := range Subtree(p.Self, p.Width, len(p.Job.Nodes))[1:] {
		ranks = append(ranks, p.Job.Nodes[i].Ranks...)
	}
	slices.Sort(ranks)
	return RankGroups(p.Job, ranks, MaxGroups)
}

// ProcGroups names procs of the job by node.
func (p Place) ProcGroups(procs []plugin.Proc) string {
	var ranks []int32
	for _, q := range procs {
		if q.Nspace == p.Job.Nspace && q.Rank >= 0 {
			ranks = append(ranks, q.Rank)
		}
	}
	return RankGroups(p.Job, ranks, MaxGroups)
}

// SubtreeRanks lists the participants of procs that this node's subtree
// hosts, sorted, and says whether they are all on this node.
func (p Place) SubtreeRanks(procs []plugin.Proc) (ranks []int32, onlyHere bool) {
	rankNode := p.Job.RankNodes()
	in := make([]bool, len(p.Job.Nodes))
	for _, i := range Subtree(p.Self, p.Width, len(p.Job.Nodes)) {
		in[i] = true
	}
	seen := map[int32]bool{}
	onlyHere = true
	add := func(r int32) {
		if r < 0 || int(r) >= len(rankNode) || rankNode[r] < 0 || seen[r] || !in[rankNode[r]] {
			return
		}
		seen[r] = true
		ranks = append(ranks, r)
		if int(rankNode[r]) != p.Self {
			onlyHere = false
		}
	}
	for _, q := range procs {
		if q.Nspace != p.Job.Nspace {
			continue
		}
		if q.Rank == plugin.RankWildcard {
			for r := range rankNode {
				add(int32(r))
			}
			continue
		}
		add(q.Rank)
	}
	slices.Sort(ranks)
	return ranks, onlyHere
}

// Involves reports whether req is a fence of this node's job alone.
func (p Place) Involves(req *plugin.FenceRequest) bool {
	for _, q := range req.Procs {
		if q.Nspace != p.Job.Nspace {
			return false
		}
	}
	return len(req.Procs) > 0
}

// WholeJob reports whether req's participants are the node's whole job.
func (p Place) WholeJob(req *plugin.FenceRequest) bool {
	return len(req.Procs) == 1 && req.Procs[0] == plugin.Proc{Nspace: p.Job.Nspace, Rank: plugin.RankWildcard}
}
