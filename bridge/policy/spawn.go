package policy

import (
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/plugin"
)

// Command is one command of a spawn as a face read it off its wire.
type Command struct {
	Cmd      string
	Args     []string // without the command itself
	MaxProcs int
	Cwd      string   // the face's own working-directory field (PMIx's app cwd), if any
	Env      []string // KEY=VALUE for its tasks (PMIx's app env)
	Info     []plugin.Info
}

// wdirKeys name the working directory in either face's info: MPI's
// "wdir" (the PMI wire and MPICH send it as the user wrote it, in any
// case) and PMIx's "pmix.wdir", which Open MPI always sends: the
// requestor's working directory.
func isWdir(key string) bool {
	return strings.EqualFold(key, "wdir") || key == "pmix.wdir"
}

// hints are PMIx spawn keys that ask nothing of the host: Open MPI's
// personality, its requests to print the map, tag or merge output, and
// to be told of the job's end (which the contract's events carry).
var hints = map[string]bool{
	"pmix.pers": true, "pmix.dispmap": true, "pmix.dispdetail": true, "pmix.tag.out": true,
	"pmix.timestamp.out": true, "pmix.xml.out": true, "pmix.merge.err": true, "pmix.notify.comp": true,
	"pmix.notify.job.term": true, "pmix.notify.proc.abort": true, "pmix.notify.proc.term": true,
	"pmix.fwd.stdout": true, "pmix.fwd.stderr": true, "pmix.fwd.stdin": true, "pmix.fwd.stddiag": true,
}

// Hint reports whether a spawn info key asks nothing of the host, so that
// a face drops it instead of passing it on (where a host would refuse it
// by name, as it must every key it does not honour).
func Hint(key string) bool { return hints[key] }

// SpawnApp builds the contract's app of one command: a working directory
// given as info (either face's key) becomes the app's Cwd, the last one
// given winning over the face's own field; hints go; every other key is
// passed on for the host to honour or refuse by name.
func SpawnApp(c Command) plugin.SpawnApp {
	app := plugin.SpawnApp{Cmd: c.Cmd, Argv: c.Args, MaxProcs: int32(c.MaxProcs), Cwd: c.Cwd, Env: c.Env}
	for _, in := range c.Info {
		switch {
		case isWdir(in.Key):
			app.Cwd = in.Value
		case Hint(in.Key):
		default:
			app.Info = append(app.Info, in)
		}
	}
	return app
}

// CheckSpawn refuses a spawn no host can start: no command, an empty
// command, or one that asks for fewer than one process.
func CheckSpawn(apps []plugin.SpawnApp) error {
	if len(apps) == 0 {
		return fmt.Errorf("spawn: no command")
	}
	for i, a := range apps {
		switch {
		case a.Cmd == "":
			return fmt.Errorf("spawn: command %d is empty", i+1)
		case a.MaxProcs < 1:
			return fmt.Errorf("spawn: command %d (%s) asks for %d processes; at least 1 is needed", i+1, a.Cmd, a.MaxProcs)
		}
	}
	return nil
}
