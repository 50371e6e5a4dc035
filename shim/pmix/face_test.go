//go:build pmix

package pmix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A data-store directory in /dev/shm whose server is gone is removed by
// the next server's memoryDir; one whose server runs, and the new one,
// stay.
func TestMemoryDirSweepsTheGone(t *testing.T) {
	probe := memoryDir(DirPrefix + "probe-")
	if probe == "" {
		t.Skip("/dev/shm is not a tmpfs here")
	}
	os.RemoveAll(probe)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%stest.%d.0-", DirPrefix, os.Getpid())
	dead := filepath.Join(shmDir, fmt.Sprintf("%s%d.1", prefix, gone.Process.Pid))
	alive := filepath.Join(shmDir, fmt.Sprintf("%s%d.2", prefix, os.Getpid()))
	for _, d := range []string{dead, alive} {
		if err := os.MkdirAll(filepath.Join(d, "pmix_dstor_ds21_1"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	made := memoryDir(prefix)
	if made == "" {
		t.Fatal("memoryDir made no directory")
	}
	t.Cleanup(func() { os.RemoveAll(made) })
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the gone server's directory %s is still there (%v)", dead, err)
	}
	for _, d := range []string{alive, made} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a live server's directory: %v", err)
		}
	}
}
