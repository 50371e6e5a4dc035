package bridge

import (
	"fmt"
	"slices"
	"time"

	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/plugin"
)

// Defaults for Limits and Timeouts.
const (
	DefaultKvsnameMax = 256
	DefaultKeyMax     = 64
	DefaultValMax     = 1024
	DefaultLineMax    = 1 << 20
	// DefaultKVSMax is far above what MPICH puts at 1,024 ranks (about
	// 1 MiB) and far below what would hurt a node.
	DefaultKVSMax = 512 << 20

	// DefaultBackendTimeout bounds a backend call that is none of a
	// fence, a lookup or a spawn (whose defaults are the contract's,
	// plugin.Default*).
	DefaultBackendTimeout = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.KvsnameMax <= 0 {
		l.KvsnameMax = DefaultKvsnameMax
	}
	if l.KeyMax <= 0 {
		l.KeyMax = DefaultKeyMax
	}
	if l.ValMax <= 0 {
		l.ValMax = DefaultValMax
	}
	if l.LineMax <= 0 {
		l.LineMax = DefaultLineMax
	}
	if l.KVSMax <= 0 {
		l.KVSMax = DefaultKVSMax
	}
	// A PMI-2 reply carries a value in a body of at most pmi2.MaxBody
	// bytes; leave room for the other fields.
	if max := pmi2.MaxBody - 4096; l.ValMax > max {
		l.ValMax = max
	}
	// A request must be able to carry a full key and value.
	if min := l.KeyMax + l.ValMax + 1024; l.LineMax < min {
		l.LineMax = min
	}
	return l
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Fence <= 0 {
		t.Fence = plugin.DefaultFenceTimeout
	}
	if t.Get <= 0 {
		t.Get = t.Fence
	}
	if t.Lookup <= 0 {
		t.Lookup = plugin.DefaultLookupTimeout
	}
	if t.NodeAttr <= 0 {
		t.NodeAttr = t.Fence
	}
	if t.Spawn <= 0 {
		t.Spawn = plugin.DefaultSpawnTimeout
	}
	if t.Backend <= 0 {
		t.Backend = DefaultBackendTimeout
	}
	return t
}

// layout is what the engine derives once from the job description.
type layout struct {
	rankNode []int32 // rank -> node index in Job.Nodes
	local    []int32 // this node's ranks, ascending
	isLocal  map[int32]bool
	node     plugin.Node
	appnum   []int32 // rank -> appnum, nil when there is one app
	mapping  string  // PMI_process_mapping, "" when it does not fit
}

func buildLayout(cfg *Config) (*layout, error) {
	job := &cfg.Job
	if err := job.Validate(); err != nil {
		return nil, fmt.Errorf("bridge config: %w", err)
	}
	ni := job.NodeIndex(cfg.NodeID)
	if ni < 0 {
		return nil, fmt.Errorf("bridge config: node id %d is not in the job", cfg.NodeID)
	}
	l := &layout{
		rankNode: job.RankNodes(),
		isLocal:  make(map[int32]bool),
		node:     job.Nodes[ni],
		local:    append([]int32(nil), job.Nodes[ni].Ranks...),
	}
	slices.Sort(l.local)
	for _, r := range l.local {
		l.isLocal[r] = true
	}
	if len(job.Apps) > 1 {
		l.appnum = job.AppRanks()
	}
	l.mapping = processMapping(l.rankNode, cfg.Limits.ValMax)
	return l, nil
}

func (l *layout) appnumOf(rank int32) int32 {
	if l.appnum == nil {
		return 0
	}
	return l.appnum[rank]
}
