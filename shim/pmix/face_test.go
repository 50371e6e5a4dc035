//go:build pmix

package pmix

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gopmi/gopmi/shim/sockdir"
)

// memoryDir's sweep removes this user's data-store directories in
// /dev/shm that no server holds locked and are past sockdir.YoungAge; a locked
// one, a young one, a server's rendezvous directory (when TMPDIR is
// /dev/shm) and the new one stay.
func TestMemoryDirSweepsTheGone(t *testing.T) {
	probe, drop := memoryDir("probe", 0)
	if probe == "" {
		t.Skip("/dev/shm is not a tmpfs with room here")
	}
	drop()
	if _, err := os.Stat(probe); !os.IsNotExist(err) {
		t.Errorf("drop left %s (%v)", probe, err)
	}
	old := time.Now().Add(-2 * sockdir.YoungAge)
	mk := func(name string, age time.Time) string {
		d := filepath.Join(shmDir, name)
		if err := os.MkdirAll(filepath.Join(d, "pmix_dstor_ds21_1"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, age, age); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	dead := mk(DataDirPrefix+"test.sweep.0-1", old)
	held := mk(DataDirPrefix+"test.sweep.1-2", old)
	young := mk(DataDirPrefix+"test.sweep.2-3", time.Now())
	rendezvous := mk(DirPrefix+"slurm.5.417.0-123", old)
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file: the sweep's own open of the
	// held directory is another, and must find it taken.
	made, drop := memoryDir("test.sweep", 9)
	if made == "" {
		t.Fatal("memoryDir made no directory")
	}
	t.Cleanup(drop)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the gone server's directory %s is still there (%v)", dead, err)
	}
	for _, d := range []string{held, young, rendezvous, made} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
