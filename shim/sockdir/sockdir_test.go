package sockdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestSweepAndRemove(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mine, err := New()
	if err != nil {
		t.Fatal(err)
	}
	// A shim that is gone: the pid of a process that ran and was reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, prefix+strconv.Itoa(cmd.Process.Pid)+"-123")
	other := filepath.Join(tmp, "gopmi-shimmer")
	for _, d := range []string{dead, other} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	Sweep()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a gone shim's directory stays: %v", err)
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	Remove(os.Getpid())
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("Remove left %s: %v", mine, err)
	}
}
