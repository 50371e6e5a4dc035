package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binaryMagic are the heads of files that are built, never written: ELF
// executables and shared objects, and ar archives (static libraries, .deb).
var binaryMagic = [][]byte{[]byte("\x7fELF"), []byte("!<arch>\n")}

// TestNoBuiltFileTracked: the repository holds no built binary. A built
// file goes stale the day its source changes (an early commit left
// contrib/slurm/mpi_gopmi.so, which make slurm-plugin no longer wrote);
// every binary is built by make. Wire captures in testdata hold NUL bytes
// and stay: only the heads of ELF files and ar archives are refused.
func TestNoBuiltFileTracked(t *testing.T) {
	begin(t)
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to check", err)
	}
	var built []string
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		head := make([]byte, 8)
		f, err := os.Open(filepath.Join("..", name))
		if err != nil {
			continue // deleted in the work tree: git status shows it
		}
		n, _ := f.Read(head)
		f.Close()
		for _, m := range binaryMagic {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) {
				built = append(built, name)
			}
		}
	}
	if len(built) > 0 {
		t.Fatalf("built files are tracked (build them with make instead, and git rm them): %s", strings.Join(built, ", "))
	}
}
