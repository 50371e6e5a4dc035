package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
)

// waitLimit bounds every wait of these tests.
const waitLimit = 10 * time.Second

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

// query asks u one key and returns its value ("" when not answered).
func query(t *testing.T, u *local.Universe, who plugin.Proc, key string) string {
	t.Helper()
	resp, err := u.Query(context.Background(), &plugin.QueryRequest{Proc: who, Queries: []plugin.Query{{Keys: []string{key}}}})
	if err != nil {
		if errors.Is(err, plugin.ErrNotFound) {
			return ""
		}
		t.Fatalf("Query %s: %v", key, err)
	}
	return resp.Results[0].Value
}

// exe writes an executable script and returns its path.
func exe(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
