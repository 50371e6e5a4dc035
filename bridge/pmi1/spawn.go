package pmi1

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gopmi/gopmi/bridge/wire"
)

// ErrSpawn marks a spawn request that is incomplete or inconsistent; the
// error text names the key or count at fault. It is wire.ErrSpawn, which
// pmi2 shares.
var ErrSpawn = wire.ErrSpawn

// SpawnBlock is one decoded mcmd=spawn block: one executable of a
// (possibly multi-command) spawn.
type SpawnBlock struct {
	// Total is totspawns, the number of blocks in the request.
	Total int
	// Index is spawnssofar, this block's 1-based position; the request is
	// complete when Index == Total.
	Index int
	Cmd   wire.SpawnCmd
	// Preput holds the block's preput pairs; MPICH 4.0 repeats them in
	// every block, MPICH 4.1 sends them with the first block only.
	Preput []wire.Arg
}

// Last reports whether this block completes the request.
func (b *SpawnBlock) Last() bool { return b.Index == b.Total }

// ParseSpawnBlock validates one mcmd=spawn block and decodes it. Errors
// wrap ErrSpawn and name the key at fault: a missing required key,
// numbers that do not parse or are negative, a count that does not match
// its indexed keys (argcnt vs arg1.., preput_num vs preput_key_N /
// preput_val_N, info_num vs info_key_N / info_val_N), a duplicate or an
// unknown key. Unknown keys are refused rather than ignored so that a new
// client feature fails loudly.
func ParseSpawnBlock(m *wire.Message) (*SpawnBlock, error) {
	if !m.Block || m.Cmd != "spawn" {
		return nil, fmt.Errorf("%w: not an mcmd=spawn block (mcmd=%s)", ErrSpawn, m.Cmd)
	}
	if k, dup := m.Duplicate(); dup {
		return nil, fmt.Errorf("%w: key %s given twice", ErrSpawn, k)
	}
	f := wire.NewSpawnFields(m, "the block")
	b := &SpawnBlock{}
	var err error
	if b.Cmd.MaxProcs, err = f.Int("nprocs"); err != nil {
		return nil, err
	}
	if b.Total, err = f.Int("totspawns"); err != nil {
		return nil, err
	}
	if b.Index, err = f.Int("spawnssofar"); err != nil {
		return nil, err
	}
	if b.Total < 1 {
		return nil, fmt.Errorf("%w: totspawns=%d, want at least 1", ErrSpawn, b.Total)
	}
	if b.Index < 1 || b.Index > b.Total {
		return nil, fmt.Errorf("%w: spawnssofar=%d outside 1..totspawns=%d", ErrSpawn, b.Index, b.Total)
	}
	exec, ok := m.Get("execname")
	if !ok || exec == "" {
		return nil, fmt.Errorf("%w: missing execname", ErrSpawn)
	}
	b.Cmd.Cmd = exec
	f.Use("execname")
	if b.Cmd.Args, err = f.List("argcnt", "arg", 1); err != nil {
		return nil, err
	}
	if b.Preput, err = f.Pairs("preput_num", "preput_key_", "preput_val_"); err != nil {
		return nil, err
	}
	if b.Cmd.Info, err = f.Pairs("info_num", "info_key_", "info_val_"); err != nil {
		return nil, err
	}
	if k, ok := f.Unknown(); ok {
		return nil, fmt.Errorf("%w: unknown key %s in mcmd=spawn block", ErrSpawn, k)
	}
	return b, nil
}

// CollectSpawn joins the blocks of one request, in arrival order, into a
// spawn. The blocks must agree on totspawns, arrive with spawnssofar
// 1, 2, ... and number exactly totspawns. Preputs come from the first
// block; a later block may repeat them (MPICH 4.0) or carry none
// (MPICH 4.1) but may not carry different ones.
func CollectSpawn(blocks []*SpawnBlock) (*wire.Spawn, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%w: no mcmd=spawn block", ErrSpawn)
	}
	total := blocks[0].Total
	if len(blocks) != total {
		return nil, fmt.Errorf("%w: %d blocks for totspawns=%d", ErrSpawn, len(blocks), total)
	}
	s := &wire.Spawn{Preput: blocks[0].Preput}
	for i, b := range blocks {
		if b.Total != total {
			return nil, fmt.Errorf("%w: block %d says totspawns=%d, block 1 said %d", ErrSpawn, i+1, b.Total, total)
		}
		if b.Index != i+1 {
			return nil, fmt.Errorf("%w: block %d has spawnssofar=%d", ErrSpawn, i+1, b.Index)
		}
		if i > 0 && len(b.Preput) > 0 && !slices.Equal(b.Preput, blocks[0].Preput) {
			return nil, fmt.Errorf("%w: block %d carries preputs that differ from block 1's", ErrSpawn, i+1)
		}
		s.Cmds = append(s.Cmds, b.Cmd)
	}
	return s, nil
}

// SpawnBlocks encodes s as the mcmd=spawn blocks a client writes, one per
// command, with the preputs repeated in every block as MPICH 4.0 does
// (which servers that read each block on its own need).
func SpawnBlocks(s *wire.Spawn) []*wire.Message {
	out := make([]*wire.Message, 0, len(s.Cmds))
	for i, c := range s.Cmds {
		m := &wire.Message{Cmd: "spawn", Block: true}
		m.AddInt("nprocs", c.MaxProcs).Add("execname", c.Cmd)
		m.AddInt("totspawns", len(s.Cmds)).AddInt("spawnssofar", i+1)
		m.AddInt("argcnt", len(c.Args))
		for j, a := range c.Args {
			m.Add("arg"+strconv.Itoa(j+1), a)
		}
		m.AddInt("preput_num", len(s.Preput))
		for j, p := range s.Preput {
			m.Add("preput_key_"+strconv.Itoa(j), p.Key).Add("preput_val_"+strconv.Itoa(j), p.Value)
		}
		m.AddInt("info_num", len(c.Info))
		for j, p := range c.Info {
			m.Add("info_key_"+strconv.Itoa(j), p.Key).Add("info_val_"+strconv.Itoa(j), p.Value)
		}
		out = append(out, m)
	}
	return out
}
