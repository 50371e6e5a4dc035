package pmi2

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

func parseBody(t *testing.T, s string) *wire.Message {
	t.Helper()
	m, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseSpawn(t *testing.T) {
	// Slurm's libpmi2 under srun (sslurm2sp) and a two-command request.
	got, err := ParseSpawn(parseBody(t, "cmd=spawn;ncmds=1;preputcount=1;ppkey0=gopmi-preput;ppval0=preput-val;"+
		"subcmd=./bin/stw;maxprocs=2;argc=2;argv0=./bin/pmi2test;argv1=child;infokeycount=0;"))
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.Spawn{
		Cmds:   []wire.SpawnCmd{{Cmd: "./bin/stw", Args: []string{"./bin/pmi2test", "child"}, MaxProcs: 2, Info: []wire.Arg{}}},
		Preput: []wire.Arg{{Key: "gopmi-preput", Value: "preput-val"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	got, err = ParseSpawn(parseBody(t, "cmd=spawn;thrid=0x1;ncmds=2;subcmd=a;maxprocs=1;argc=0;infokeycount=1;infokey0=wdir;infoval0=/tmp;"+
		"subcmd=b;maxprocs=3;"))
	if err != nil {
		t.Fatal(err)
	}
	want = &wire.Spawn{
		Cmds: []wire.SpawnCmd{
			{Cmd: "a", Args: []string{}, MaxProcs: 1, Info: []wire.Arg{{Key: "wdir", Value: "/tmp"}}},
			{Cmd: "b", Args: []string{}, MaxProcs: 3, Info: []wire.Arg{}},
		},
		Preput: []wire.Arg{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got.TotalProcs() != 4 {
		t.Errorf("TotalProcs = %d", got.TotalProcs())
	}
}

func TestSpawnMessageRoundTrip(t *testing.T) {
	s := &wire.Spawn{
		Cmds: []wire.SpawnCmd{
			{Cmd: "x", Args: []string{"a;b", "c d"}, MaxProcs: 2, Info: []wire.Arg{{Key: "host", Value: "n[1-2]"}}},
			{Cmd: "y", Args: []string{}, MaxProcs: 1, Info: []wire.Arg{}},
		},
		Preput: []wire.Arg{{Key: "PARENT_ROOT_PORT_NAME", Value: "tag#0$port#1$"}},
	}
	got, err := ParseSpawn(roundTrip(t, SpawnMessage(s)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseSpawnErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not spawn", "cmd=kvs-put;", "cmd=kvs-put is not spawn"},
		{"missing ncmds", "cmd=spawn;subcmd=a;maxprocs=1;", "missing ncmds"},
		{"ncmds zero", "cmd=spawn;ncmds=0;", "ncmds=0"},
		{"ncmds mismatch", "cmd=spawn;ncmds=2;subcmd=a;maxprocs=1;", "ncmds=2 but 1 subcmd sections"},
		{"missing maxprocs", "cmd=spawn;ncmds=1;subcmd=a;", "missing maxprocs in section 1"},
		{"negative maxprocs", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=-2;", "maxprocs=-2 is negative in section 1"},
		{"maxprocs not a number", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=lots;", `maxprocs="lots" is not an integer`},
		{"empty subcmd", "cmd=spawn;ncmds=1;subcmd=;maxprocs=1;", "empty subcmd in section 1"},
		{"missing argv", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=2;argv0=x;", "argc=2 but argv1 is missing in section 1"},
		{"argv beyond argc", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=1;argv0=x;argv1=y;", "argv1 is beyond argc=1"},
		{"huge argc", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=99999999;", "argc=99999999 but only"},
		{"missing ppval", "cmd=spawn;ncmds=1;preputcount=1;ppkey0=k;subcmd=a;maxprocs=1;", "ppval0 is missing"},
		{"preput after subcmd", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;ppkey0=k;", "unknown key ppkey0 in section 1"},
		{"missing infoval", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;infokeycount=1;infokey0=wdir;", "infoval0 is missing"},
		{"duplicate in section", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;maxprocs=2;", "maxprocs given twice in section 1"},
		{"duplicate global", "cmd=spawn;ncmds=1;ncmds=1;subcmd=a;maxprocs=1;", "ncmds given twice"},
		{"unknown global", "cmd=spawn;ncmds=1;colour=red;subcmd=a;maxprocs=1;", "unknown key colour before the first subcmd"},
		{"unknown in section", "cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;nice=5;", "unknown key nice in section 1"},
		{"second section bad", "cmd=spawn;ncmds=2;subcmd=a;maxprocs=1;subcmd=b;", "missing maxprocs in section 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpawn(parseBody(t, tt.in))
			if !errors.Is(err, ErrSpawn) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrSpawn containing %q", err, tt.want)
			}
		})
	}
}
