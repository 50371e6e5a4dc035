package pmi1

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

func spawnBlock(lines ...string) *wire.Message {
	m, err := Parse([]byte("mcmd=spawn\n" + strings.Join(lines, "\n") + "\nendcmd"))
	if err != nil {
		panic(err)
	}
	return m
}

func TestParseSpawnBlock(t *testing.T) {
	m := spawnBlock("nprocs=2", "execname=./child", "totspawns=1", "spawnssofar=1",
		"arg1=--flag", "arg2=x y", "argcnt=2", "preput_num=1", "preput_key_0=PARENT_ROOT_PORT_NAME",
		"preput_val_0=tag#0$port#5000$", "info_num=1", "info_key_0=wdir", "info_val_0=/scratch")
	b, err := ParseSpawnBlock(m)
	if err != nil {
		t.Fatal(err)
	}
	want := &SpawnBlock{
		Total: 1, Index: 1,
		Cmd: wire.SpawnCmd{Cmd: "./child", Args: []string{"--flag", "x y"}, MaxProcs: 2,
			Info: []wire.Arg{{Key: "wdir", Value: "/scratch"}}},
		Preput: []wire.Arg{{Key: "PARENT_ROOT_PORT_NAME", Value: "tag#0$port#5000$"}},
	}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !b.Last() {
		t.Errorf("Last() = false")
	}
}

func TestParseSpawnBlockDefaults(t *testing.T) {
	b, err := ParseSpawnBlock(spawnBlock("nprocs=1", "execname=a", "totspawns=2", "spawnssofar=1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Cmd.Args) != 0 || len(b.Preput) != 0 || len(b.Cmd.Info) != 0 || b.Last() {
		t.Errorf("got %+v", b)
	}
}

func TestParseSpawnBlockErrors(t *testing.T) {
	base := []string{"nprocs=1", "execname=a", "totspawns=1", "spawnssofar=1"}
	with := func(extra ...string) *wire.Message {
		return spawnBlock(append(append([]string{}, base...), extra...)...)
	}
	without := func(key string) *wire.Message {
		var l []string
		for _, b := range base {
			if !strings.HasPrefix(b, key+"=") {
				l = append(l, b)
			}
		}
		return spawnBlock(l...)
	}
	tests := []struct {
		name string
		m    *wire.Message
		want string
	}{
		{"not a block", wire.New("spawn"), "not an mcmd=spawn block"},
		{"missing nprocs", without("nprocs"), "missing nprocs"},
		{"missing execname", without("execname"), "missing execname"},
		{"missing totspawns", without("totspawns"), "missing totspawns"},
		{"negative nprocs", spawnBlock("nprocs=-1", "execname=a", "totspawns=1", "spawnssofar=1"), "nprocs=-1 is negative"},
		{"nprocs not a number", spawnBlock("nprocs=two", "execname=a", "totspawns=1", "spawnssofar=1"), `nprocs="two" is not an integer`},
		{"zero totspawns", spawnBlock("nprocs=1", "execname=a", "totspawns=0", "spawnssofar=0"), "totspawns=0"},
		{"spawnssofar beyond", spawnBlock("nprocs=1", "execname=a", "totspawns=1", "spawnssofar=2"), "spawnssofar=2 outside"},
		{"missing arg", with("argcnt=2", "arg1=x"), "argcnt=2 but arg2 is missing"},
		{"arg beyond argcnt", with("argcnt=1", "arg1=x", "arg2=y"), "arg2 is beyond argcnt=1"},
		{"arg without argcnt", with("arg1=x"), "arg1 is beyond argcnt=0"},
		{"arg0 is not an argument", with("argcnt=1", "arg0=x", "arg1=y"), "arg0 is beyond argcnt=1"},
		{"huge argcnt", with("argcnt=1000000000"), "argcnt=1000000000 but the block has only"},
		{"missing preput val", with("preput_num=1", "preput_key_0=k"), "preput_val_0 is missing"},
		{"stray info key", with("info_num=0", "info_key_0=k"), "info_key_0 is beyond info_num=0"},
		{"duplicate", with("nprocs=2"), "nprocs given twice"},
		{"unknown key", with("colour=blue"), "unknown key colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpawnBlock(tt.m)
			if !errors.Is(err, ErrSpawn) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrSpawn containing %q", err, tt.want)
			}
		})
	}
}

func TestCollectSpawn(t *testing.T) {
	s := &wire.Spawn{
		Cmds: []wire.SpawnCmd{
			{Cmd: "a", Args: []string{"1"}, MaxProcs: 2, Info: []wire.Arg{{Key: "wdir", Value: "/tmp"}}},
			{Cmd: "b", Args: []string{}, MaxProcs: 1, Info: []wire.Arg{}},
		},
		Preput: []wire.Arg{{Key: "k", Value: "v"}},
	}
	var blocks []*SpawnBlock
	for _, m := range SpawnBlocks(s) {
		b, err := ParseSpawnBlock(roundTrip(t, m))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	got, err := CollectSpawn(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// MPICH 4.1 sends preputs with the first block only.
	blocks[1].Preput = nil
	if _, err := CollectSpawn(blocks); err != nil {
		t.Errorf("preputs only in block 1: %v", err)
	}
	blocks[1].Preput = []wire.Arg{{Key: "k", Value: "other"}}
	if _, err := CollectSpawn(blocks); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("different preputs: err = %v", err)
	}
	blocks[1].Preput = nil
	if _, err := CollectSpawn(blocks[:1]); err == nil || !strings.Contains(err.Error(), "1 blocks for totspawns=2") {
		t.Errorf("missing block: err = %v", err)
	}
	if _, err := CollectSpawn([]*SpawnBlock{blocks[1], blocks[0]}); err == nil || !strings.Contains(err.Error(), "spawnssofar") {
		t.Errorf("out of order: err = %v", err)
	}
	if _, err := CollectSpawn(nil); !errors.Is(err, ErrSpawn) {
		t.Errorf("no blocks: err = %v", err)
	}
	mixed := *blocks[1]
	mixed.Total = 3
	if _, err := CollectSpawn([]*SpawnBlock{blocks[0], &mixed}); err == nil || !strings.Contains(err.Error(), "totspawns=3") {
		t.Errorf("totspawns mismatch: err = %v", err)
	}
}
