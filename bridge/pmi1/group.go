package pmi1

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/wire"
)

// GroupKind says which tasks a PMI 1.2 group barrier spans.
type GroupKind int

const (
	// GroupWorld is every task of the job (WORLD:<tag>).
	GroupWorld GroupKind = iota
	// GroupNode is the tasks on the caller's node (NODE:<tag>).
	GroupNode
	// GroupRanks is an explicit rank list (<r>,<r>,...:<tag>).
	GroupRanks
)

// Group is the decoded group= of a PMI 1.2 barrier_in, as MPICH's
// PMI_Barrier_group writes it: WORLD:<tag>, NODE:<tag>, or a
// comma-separated rank list and :<tag>. The tag is a non-negative hash of
// the communicator's tag; concurrent group barriers differ by it, and the
// server echoes it in barrier_out tag=.
type Group struct {
	Kind  GroupKind
	Ranks []int
	Tag   int
}

// ParseGroup decodes a group= value; the empty string (no group=) is
// WORLD with tag 0. A missing ":<tag>" means tag 0, as Hydra reads it.
func ParseGroup(s string) (Group, error) {
	if s == "" {
		return Group{Kind: GroupWorld}, nil
	}
	name, tagStr, hasTag := strings.Cut(s, ":")
	g := Group{}
	if hasTag {
		t, err := strconv.Atoi(tagStr)
		if err != nil || t < 0 {
			return Group{}, fmt.Errorf("%w: group=%q: tag %q is not a non-negative integer", wire.ErrMalformed, s, tagStr)
		}
		g.Tag = t
	}
	switch name {
	case "WORLD":
		g.Kind = GroupWorld
	case "NODE":
		g.Kind = GroupNode
	default:
		g.Kind = GroupRanks
		parts := strings.Split(name, ",")
		seen := make(map[int]bool, len(parts))
		for _, p := range parts {
			r, err := strconv.Atoi(p)
			if err != nil || r < 0 {
				return Group{}, fmt.Errorf("%w: group=%q: %q is not a rank", wire.ErrMalformed, s, p)
			}
			if seen[r] {
				return Group{}, fmt.Errorf("%w: group=%q: rank %d listed twice", wire.ErrMalformed, s, r)
			}
			seen[r] = true
			g.Ranks = append(g.Ranks, r)
		}
	}
	return g, nil
}

// String encodes g as a group= value.
func (g Group) String() string {
	var name string
	switch g.Kind {
	case GroupWorld:
		name = "WORLD"
	case GroupNode:
		name = "NODE"
	default:
		rs := make([]string, len(g.Ranks))
		for i, r := range g.Ranks {
			rs[i] = strconv.Itoa(r)
		}
		name = strings.Join(rs, ",")
	}
	return name + ":" + strconv.Itoa(g.Tag)
}
