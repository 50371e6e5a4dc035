package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gopmi/gopmi/plugin"
)

// Both faces' spawns of the same thing give the contract the same app:
// MPICH's "wdir" (any case) and Open MPI's "pmix.wdir" both become Cwd;
// PMIx hints go; other keys pass for the host to judge.
func TestSpawnAppSameFromBothFaces(t *testing.T) {
	want := plugin.SpawnApp{Cmd: "spaconacc", Argv: []string{"x"}, MaxProcs: 2, Cwd: "/work",
		Info: []plugin.Info{{Key: "path", Value: "/opt/bin"}}}
	pmi := SpawnApp(Command{Cmd: "spaconacc", Args: []string{"x"}, MaxProcs: 2,
		Info: []plugin.Info{{Key: "WDIR", Value: "/work"}, {Key: "path", Value: "/opt/bin"}}})
	pmix := SpawnApp(Command{Cmd: "spaconacc", Args: []string{"x"}, MaxProcs: 2, Cwd: "/elsewhere",
		Info: []plugin.Info{{Key: "pmix.pers", Value: "ompi"}, {Key: "pmix.wdir", Value: "/work"}, {Key: "path", Value: "/opt/bin"}}})
	if d := cmp.Diff(want, pmi); d != "" {
		t.Errorf("PMI face's app (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, pmix); d != "" {
		t.Errorf("PMIx face's app (-want +got):\n%s", d)
	}
	if !Hint("pmix.fwd.stdout") || Hint("wdir") || Hint("host") {
		t.Error("Hint: pmix.fwd.stdout is one; wdir and host are not")
	}
}

func TestCheckSpawn(t *testing.T) {
	for _, c := range []struct {
		apps []plugin.SpawnApp
		err  string
	}{
		{nil, "no command"},
		{[]plugin.SpawnApp{{Cmd: "", MaxProcs: 1}}, "command 1 is empty"},
		{[]plugin.SpawnApp{{Cmd: "a", MaxProcs: 1}, {Cmd: "b", MaxProcs: 0}}, "command 2 (b) asks for 0 processes"},
		{[]plugin.SpawnApp{{Cmd: "a", MaxProcs: 1}}, ""},
	} {
		err := CheckSpawn(c.apps)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("CheckSpawn(%v) = %v, want %q", c.apps, err, c.err)
		}
	}
}
