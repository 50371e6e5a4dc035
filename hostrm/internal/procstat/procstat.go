// Package procstat reads what gopmi's hosts need of /proc/<pid>/stat: a
// process's state and start time.
package procstat

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Stat is a process's state letter (R, S, Z, X, ...) and its start time in
// clock ticks since boot, as /proc/<pid>/stat gives them.
type Stat struct {
	State byte
	Start string
}

// Read reads pid's stat; ok is false when the process is gone or the file
// cannot be parsed.
func Read(pid int) (st Stat, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return st, false
	}
	// The fields follow the command name, which is in parentheses and may
	// itself contain them: state is field 3, starttime field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) <= 19 || len(f[0]) != 1 {
		return st, false
	}
	return Stat{State: f[0][0], Start: f[19]}, true
}

// Exited reports whether st is a process that has exited (a zombie not yet
// reaped, or dead).
func (st Stat) Exited() bool { return st.State == 'Z' || st.State == 'X' }
