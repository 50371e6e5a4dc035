package plugintest

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

// Plugin is a built backend binary for RunConformance to run as
// production runs it: one process per node of every job, started through
// go-plugin's handshake by grpcplugin.Start, as each node's gopmi-shim
// starts one (see package plugin, "Process model"). Every go-plugin
// backend must pass the suite this way. A harness that hands every node
// the same in-memory instance cannot tell a backend that keeps cross-node
// state in its own process, which fails on two real nodes, from one that
// reaches its resource manager's daemon.
type Plugin struct {
	// Path is the binary.
	Path string
	// Args are its arguments, as a bootstrap's backend.args.
	Args []string
	// Env is added to the test's environment for it (KEY=VALUE).
	Env []string
	// StartTimeout bounds each start; 0 means
	// plugin.DefaultStartTimeout.
	StartTimeout time.Duration
}

// Harness is the Harness that starts p for each node. timeout and config
// are Harness.Timeout and Harness.Config.
func (p Plugin) Harness(timeout time.Duration, config []byte) Harness {
	return Harness{NewNode: p.newNode, Timeout: timeout, Config: config, processes: true}
}

// newNode starts one backend process for a node; it ends with the test.
func (p Plugin) newNode(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend {
	t.Helper()
	// A short directory: a unix socket's path is limited.
	dir, err := os.MkdirTemp("", "gopmi-pt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	log := &testLog{t: t, prefix: job.Nspace + " node " + strconv.Itoa(int(nodeID)) + ": "}
	ctx, cancel := context.WithTimeout(context.Background(), max(p.StartTimeout, plugin.DefaultStartTimeout))
	defer cancel()
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path:         p.Path,
		Args:         p.Args,
		Env:          p.Env,
		SocketDir:    dir,
		Logger:       zerolog.New(log).Level(zerolog.InfoLevel),
		StartTimeout: p.StartTimeout,
	})
	if err != nil {
		t.Fatalf("start %s for %s node %d: %v", p.Path, job.Nspace, nodeID, err)
	}
	n := &nodeProcess{Full: c.Backend(), close: sync.OnceValue(c.Close)}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Logf("close %s for node %d: %v", p.Path, nodeID, err)
		}
		log.stop()
	})
	return n
}

// nodeProcess is a node's backend process; Close stops it (once), as its
// shim's end does (a case that ends a node, and the test's end).
type nodeProcess struct {
	plugin.Full
	close func() error
}

func (n *nodeProcess) Close() error { return n.close() }

// testLog relays a plugin's log lines to the test's log until the test
// ends (a line logged later would fail the test).
type testLog struct {
	t      *testing.T
	prefix string

	mu      sync.Mutex
	stopped bool // guarded by mu
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Log(l.prefix + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// processModel explains a wait that timed out between nodes whose
// backends are processes of their own.
const processModel = "each node's backend is a process of its own here, as under gopmi-shim (one per job per node, " +
	"see package plugin, \"Process model\"): a backend that keeps cross-node state in its own memory never sees " +
	"the other node's calls; reach your resource manager's daemon instead (plugin.Relay)"
