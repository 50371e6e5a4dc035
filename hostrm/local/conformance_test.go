package local

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

// serveUniverse serves u on a unix socket the way gopmi run does and
// returns its address; the server stops at the test's end.
func serveUniverse(t *testing.T, u *Universe) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "u.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- direct.Serve(ctx, ln, u, direct.WithGracePeriod(time.Second)) }()
	t.Cleanup(func() {
		u.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("direct.Serve: %v", err)
		}
	})
	return "unix://" + sock
}

// TestConformanceDirect runs the plugin conformance suite against one
// shared universe: every node of every job is the same Universe.
func TestConformanceDirect(t *testing.T) {
	u := NewUniverse(UniverseOptions{})
	t.Cleanup(u.Close)
	plugintest.RunConformance(t, plugintest.Harness{
		NewNode: func(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend { return u },
		Timeout: 500 * time.Millisecond,
	})
}

// TestConformanceServed runs the suite through the path the shims use: the
// universe served by direct.Serve, each node a connection made by direct.Dial.
func TestConformanceServed(t *testing.T) {
	u := NewUniverse(UniverseOptions{})
	addr := serveUniverse(t, u)
	plugintest.RunConformance(t, plugintest.Harness{
		NewNode: func(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := direct.Dial(ctx, addr)
			if err != nil {
				t.Fatalf("dial universe: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			return c.Backend()
		},
		Timeout: 500 * time.Millisecond,
	})
}
