package plugin

import (
	"fmt"
	"slices"
)

// LayoutError says what is wrong with a Job's layout and where, as a
// path into the job ("nodes[1].ranks", "apps[0].first_rank", "size").
type LayoutError struct {
	Field string
	Msg   string
}

// Error formats the error as "job.<field>: <msg>".
func (e *LayoutError) Error() string { return "job." + e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalidArgument) hold.
func (e *LayoutError) Unwrap() error { return ErrInvalidArgument }

func layoutErr(field, format string, args ...any) error {
	return &LayoutError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks that j is a layout gopmi can serve, the same rule for
// the shim's bootstrap, the PMI engine and a backend's Configure: a
// namespace, a positive size, a universe size of 0 (the size) or at least
// the size, at least one node, unique node IDs, every node with ranks,
// every rank 0..Size-1 on exactly one node, and apps (if any) holding
// every rank once: consecutive ranks from 0 to Size-1 in order, or, when
// an app lists its Ranks, any set. The error is a *LayoutError. It
// allocates nothing larger than the layout's own lists, whatever Size
// says.
func (j Job) Validate() error {
	switch {
	case j.Nspace == "":
		return layoutErr("nspace", "empty")
	case j.Size <= 0:
		return layoutErr("size", "%d, must be positive", j.Size)
	case j.UniverseSize != 0 && j.UniverseSize < j.Size:
		return layoutErr("universe_size", "%d is less than job.size %d", j.UniverseSize, j.Size)
	case len(j.Nodes) == 0:
		return layoutErr("nodes", "empty")
	}
	ids := make(map[int32]int, len(j.Nodes))
	listed := 0
	for i, n := range j.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		if prev, dup := ids[n.ID]; dup {
			return layoutErr(f+".id", "%d already used by job.nodes[%d]", n.ID, prev)
		}
		ids[n.ID] = i
		if len(n.Ranks) == 0 {
			return layoutErr(f+".ranks", "empty")
		}
		for _, r := range n.Ranks {
			if r < 0 || r >= j.Size {
				return layoutErr(f+".ranks", "rank %d outside 0..%d", r, j.Size-1)
			}
		}
		listed += len(n.Ranks)
	}
	// Nothing is sized by Size before the nodes' lists are at least as
	// long (every rank is within 0..Size-1, so more of them than Size
	// repeats one, found below).
	if listed < int(j.Size) {
		seen := make(map[int32]bool, listed)
		for _, n := range j.Nodes {
			for _, r := range n.Ranks {
				seen[r] = true
			}
		}
		for r := int32(0); ; r++ {
			if !seen[r] {
				return layoutErr("nodes", "rank %d is on no node", r)
			}
		}
	}
	owner := make([]int32, j.Size)
	for i := range owner {
		owner[i] = -1
	}
	for i, n := range j.Nodes {
		for _, r := range n.Ranks {
			if o := owner[r]; o >= 0 {
				return layoutErr(fmt.Sprintf("nodes[%d].ranks", i), "rank %d already on job.nodes[%d]", r, o)
			}
			owner[r] = int32(i)
		}
	}
	for r, o := range owner {
		if o < 0 {
			return layoutErr("nodes", "rank %d is on no node", r)
		}
	}
	if slices.ContainsFunc(j.Apps, func(a App) bool { return len(a.Ranks) > 0 }) {
		return j.validateAppSets()
	}
	next := int32(0)
	for i, a := range j.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		switch {
		case a.Size <= 0:
			return layoutErr(f+".size", "%d, must be positive", a.Size)
		case a.FirstRank != next:
			return layoutErr(f+".first_rank", "%d, expected %d (apps hold consecutive ranks in order)", a.FirstRank, next)
		}
		next += a.Size
		if next > j.Size {
			return layoutErr(f+".size", "ranks up to %d exceed job.size %d", next-1, j.Size)
		}
	}
	if len(j.Apps) > 0 && next != j.Size {
		return layoutErr("apps", "cover ranks 0..%d, job.size is %d", next-1, j.Size)
	}
	return nil
}

// validateAppSets checks apps of which some list their ranks: every rank
// in exactly one app, each app's size its number of ranks and its
// first_rank its lowest.
func (j Job) validateAppSets() error {
	app := make([]int32, j.Size)
	for i := range app {
		app[i] = -1
	}
	for i, a := range j.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		ranks := a.Ranks
		if len(ranks) == 0 {
			switch {
			case a.Size <= 0:
				return layoutErr(f+".size", "%d, must be positive", a.Size)
			case a.FirstRank < 0 || a.Size > j.Size-a.FirstRank:
				return layoutErr(f+".size", "ranks %d..%d+%d exceed job.size %d", a.FirstRank, a.FirstRank, a.Size, j.Size)
			}
			for r := a.FirstRank; r < a.FirstRank+a.Size; r++ {
				ranks = append(ranks, r)
			}
		} else if int32(len(ranks)) != a.Size {
			return layoutErr(f+".size", "%d, but %d ranks are listed", a.Size, len(ranks))
		}
		if lo := slices.Min(ranks); a.FirstRank != lo {
			return layoutErr(f+".first_rank", "%d, but the app's lowest rank is %d", a.FirstRank, lo)
		}
		for _, r := range ranks {
			if r < 0 || r >= j.Size {
				return layoutErr(f+".ranks", "rank %d outside 0..%d", r, j.Size-1)
			}
			if o := app[r]; o >= 0 {
				return layoutErr(f+".ranks", "rank %d already in job.apps[%d]", r, o)
			}
			app[r] = int32(i)
		}
	}
	for r, a := range app {
		if a < 0 {
			return layoutErr("apps", "rank %d is in no app", r)
		}
	}
	return nil
}

// RankNodes maps each rank to the index in j.Nodes of the node that
// hosts it; -1 for a rank on no node (never, once Validate passed).
func (j Job) RankNodes() []int32 {
	if j.Size <= 0 {
		return nil
	}
	out := make([]int32, j.Size)
	for i := range out {
		out[i] = -1
	}
	for i, n := range j.Nodes {
		for _, r := range n.Ranks {
			if r >= 0 && r < j.Size {
				out[r] = int32(i)
			}
		}
	}
	return out
}

// NodeIndex is the index in j.Nodes of the node with the given ID, or -1.
func (j Job) NodeIndex(id int32) int {
	for i, n := range j.Nodes {
		if n.ID == id {
			return i
		}
	}
	return -1
}
