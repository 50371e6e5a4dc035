// Package sockdir makes the private directory a shim gives its backend
// process for its socket, and removes those a killed shim left.
//
// A shim removes its directory once the backend is connected, and when it
// ends. A shim killed with SIGKILL while its backend was still starting
// cannot: its parent (gopmi run) removes the directories of a shim it
// reaped (Remove), and every gopmi run and shim removes, when it starts,
// the directories of shims that are gone (Sweep). The directory's name
// carries its shim's pid for that: gopmi-shim-<pid>-*.
package sockdir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const prefix = "gopmi-shim-"

// New makes this process's socket directory (0700) in os.TempDir.
func New() (string, error) {
	return os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
}

// Remove removes the socket directories of the shim pid, which has ended
// (its parent reaped it).
func Remove(pid int) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+strconv.Itoa(pid)+"-*"))
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Sweep removes the socket directories of shims that are gone: no process
// has their pid. A pid in use again keeps its directory until that process
// ends too: the safe way to be wrong. Only this user's directories can be
// removed.
func Sweep() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		ps, _, ok := strings.Cut(rest, "-")
		if _, err := strconv.Atoi(ps); !ok || err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + ps); err == nil {
			continue
		}
		_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
	}
}
