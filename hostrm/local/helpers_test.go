package local

import (
	"os"
	"testing"
)

// shortTempDir is a temporary directory whose paths fit a unix socket
// address (t.TempDir can be too long).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "gopmi-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
