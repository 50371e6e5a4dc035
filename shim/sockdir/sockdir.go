// Package sockdir makes the private directory a shim gives its backend
// process for its socket, and removes those a killed shim left; Make and
// SweepUnlocked do the same for any directory whose maker must hold it.
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
	"time"
)

// PMIxPrefix begins the name of a PMIx server's directory in TMPDIR:
// gopmi-pmix-<nspace>.<node>-<random>. Its shim removes it when it ends;
// a step daemon removes a killed shim's (gopmi run's launcher does).
// PMIxDataPrefix begins its data store's in /dev/shm, the same way.
const (
	PMIxPrefix     = "gopmi-pmix-"
	PMIxDataPrefix = "gopmi-pmixds-"
)

const prefix = "gopmi-shim-"

// Dir is a live shim's socket directory and the lock that says so.
type Dir struct {
	Path string
	lock *os.File
}

// New makes this process's socket directory (0700) in os.TempDir, locked.
func New() (*Dir, error) {
	return Make(os.TempDir(), prefix+strconv.Itoa(os.Getpid())+"-")
}

// Make makes a directory (0700) named prefix and a random suffix in
// base, held locked (flock) until Remove or this process's end: the lock
// says that its maker lives, to SweepUnlocked. gopmi's PMIx server keeps
// libpmix's shared data store in one in /dev/shm.
func Make(base, prefix string) (*Dir, error) {
	path, err := os.MkdirTemp(base, prefix)
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
		removeUnlocked(d, pidLives)
	}
}

// Sweep removes this user's socket directories whose shim is gone.
func Sweep() { SweepUnlocked(os.TempDir(), prefix, pidLives) }

// SweepUnlocked removes the directories in base whose name begins with
// prefix that are this user's, that spare (if set) does not keep, and
// whose lock no live process holds.
func SweepUnlocked(base, prefix string, spare func(name string, st *syscall.Stat_t) bool) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.IsDir() {
			removeUnlocked(filepath.Join(base, e.Name()), spare)
		}
	}
}

// YoungAge is how long SweepStale spares an unlocked directory: Make
// locks a directory a moment after it made it.
const YoungAge = 30 * time.Second

// SweepStale removes the directories in base whose name begins with
// prefix that are this user's, no live process holds locked, and were
// made YoungAge ago or more: those of makers that are gone.
func SweepStale(base, prefix string) {
	SweepUnlocked(base, prefix, func(_ string, st *syscall.Stat_t) bool {
		return time.Since(time.Unix(st.Mtim.Unix())) < YoungAge
	})
}

// pidLives spares a socket directory whose name gives the pid of a
// process here: a shim between making its directory and locking it is
// alive.
func pidLives(name string, _ *syscall.Stat_t) bool {
	pid, _, ok := strings.Cut(strings.TrimPrefix(name, prefix), "-")
	if !ok {
		return true
	}
	_, err := os.Stat("/proc/" + pid)
	return err == nil
}

// removeUnlocked removes dir when it is this user's, spare does not keep
// it and no live process holds its lock.
func removeUnlocked(dir string, spare func(name string, st *syscall.Stat_t) bool) {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Uid) != os.Geteuid() || (spare != nil && spare(filepath.Base(dir), sys)) {
		return
	}
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return // a live maker's (EWOULDBLOCK), or not ours to judge
	}
	_ = os.RemoveAll(dir)
}
