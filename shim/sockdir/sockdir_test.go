package sockdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A live shim's directory stays, a dead one's goes; Remove(pid) spares a
// locked directory.
func TestSweepAndRemove(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mine, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(mine.Path); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("New: %v, %v", st, err)
	}
	// A shim that is gone: nobody holds its lock.
	dead := filepath.Join(tmp, prefix+"999999999-123")
	other := filepath.Join(tmp, "gopmi-shimmer")
	for _, d := range []string{dead, other} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A live shim of another process holds its lock.
	held := filepath.Join(tmp, prefix+"999999998-456") // locked by another process, pid not here
	if err := os.Mkdir(held, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("flock", "-x", held, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("SKIP (loud): no flock(1) to hold a lock from another process: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for i := 0; i < 200; i++ {
		f, _ := os.Open(held)
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close()
		if err != nil {
			break
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
	}
	Sweep()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a gone shim's directory stays: %v", err)
	}
	for _, d := range []string{mine.Path, other, held} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	Remove(os.Getpid())
	if _, err := os.Stat(mine.Path); err != nil {
		t.Errorf("Remove took a live (locked) directory: %v", err)
	}
	if err := mine.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine.Path); !os.IsNotExist(err) {
		t.Errorf("Dir.Remove left %s: %v", mine.Path, err)
	}
}
