package plugintest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// pairTimeout bounds NewPair's set-up and tear-down.
const pairTimeout = 10 * time.Second

// NewPair serves b with direct.Serve on a unix socket and
// returns a direct.Dial client of it: every call crosses real gRPC and
// both conversion directions. t.Cleanup closes the client first, then
// stops the server, and fails t if the server does not stop in time (a
// backend call that ignores its context).
func NewPair(t testing.TB, b plugin.Backend) plugin.Full {
	t.Helper()
	// Not t.TempDir: its paths, built from test names, overflow the 108
	// bytes a unix socket path may have.
	dir, err := os.MkdirTemp("", "gopmi-pair-")
	if err != nil {
		t.Fatalf("new pair: %v", err)
	}
	sock := filepath.Join(dir, "rm.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("new pair: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- direct.Serve(ctx, l, b, direct.WithGracePeriod(pairTimeout/4))
	}()
	stop := func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("new pair: server: %v", err)
			}
		case <-time.After(pairTimeout):
			t.Errorf("new pair: server did not stop in %s", pairTimeout)
		}
		os.RemoveAll(dir)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), pairTimeout)
	defer dcancel()
	conn, err := direct.Dial(dctx, "unix://"+sock)
	if err != nil {
		stop()
		t.Fatalf("new pair: %v", err)
	}
	// go-plugin's test pair races under -race when both sides are torn
	// down at once; here the client goes first, then the server.
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("new pair: %v", err)
		}
		stop()
	})
	return conn.Backend()
}
