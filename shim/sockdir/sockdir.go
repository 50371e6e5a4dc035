// Package sockdir makes the private directory a shim gives its backend
// process for its socket, and removes those a killed shim left.
//
// A shim removes its directory once the backend is connected, and when it
// ends. A shim killed with SIGKILL while its backend was still starting
// cannot: its parent (gopmi run) removes the directories of a shim it
// reaped (Remove), and every gopmi run and shim removes, when it starts,
// the directories whose shim is gone (Sweep). A live shim holds an
// exclusive flock on its directory, which the kernel drops when it dies,
// so a shim of another pid namespace (a container sharing /tmp) keeps its
// directory; in this one, a shim whose pid is still here keeps it too,
// even before it took the lock.
package sockdir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const prefix = "gopmi-shim-"

// Dir is a live shim's socket directory and the lock that says so.
type Dir struct {
	Path string
	lock *os.File
}

// New makes this process's socket directory (0700) in os.TempDir, locked.
func New() (*Dir, error) {
	path, err := os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.RemoveAll(path)
		return nil, err
	}
	return &Dir{Path: path, lock: f}, nil
}

// Remove removes the directory and drops its lock.
func (d *Dir) Remove() error {
	err := os.RemoveAll(d.Path)
	d.lock.Close()
	return err
}

// Remove removes the socket directories of the shim pid, which has ended
// (its parent reaped it), unless their lock is held.
func Remove(pid int) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+strconv.Itoa(pid)+"-*"))
	for _, d := range dirs {
		removeIfDead(d)
	}
}

// Sweep removes this user's socket directories whose shim is gone.
func Sweep() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.IsDir() {
			removeIfDead(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// removeIfDead removes dir when it is this user's, no live shim holds its
// lock, and no process here has the pid its name gives: a shim between
// making its directory and locking it is alive.
func removeIfDead(dir string) {
	rest := strings.TrimPrefix(filepath.Base(dir), prefix)
	if pid, _, ok := strings.Cut(rest, "-"); !ok {
		return
	} else if _, err := os.Stat("/proc/" + pid); err == nil {
		return
	}
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return
	}
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return // a live shim's (EWOULDBLOCK), or not ours to judge
	}
	_ = os.RemoveAll(dir)
}
