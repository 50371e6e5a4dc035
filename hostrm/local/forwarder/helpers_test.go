package forwarder

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait of these tests.
const waitLimit = 10 * time.Second

// testUniverse is a universe on simulated host "vm" with one job of size
// ranks, ppn per node (0: one node).
func testUniverse(t *testing.T, opts local.UniverseOptions, size, ppn int32) (*local.Universe, plugin.Job) {
	t.Helper()
	opts.Hostname, opts.Prefix, opts.PPN, opts.Stderr = "vm", "gopmi.test", int(ppn), &bytes.Buffer{}
	u := local.NewUniverse(opts)
	t.Cleanup(u.Close)
	spec, err := u.NewJob([]local.AppSpec{{Path: "/bin/app", Procs: size}}, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u, spec.Job
}

// newTestJob adds a job spawned by parent.
func newTestJob(t *testing.T, u *local.Universe, parent string, size int32) string {
	t.Helper()
	spec, err := u.NewJob([]local.AppSpec{{Path: "/bin/app", Procs: size}}, parent, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return spec.Job.Nspace
}

// serveUniverse serves u on a unix socket the way gopmi run does and
// returns its address; the server stops at the test's end.
func serveUniverse(t *testing.T, u *local.Universe) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "gopmi-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "u.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- link.Serve(ctx, ln, u) }()
	t.Cleanup(func() {
		u.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("link.Serve: %v", err)
		}
	})
	return "unix://" + ln.Addr().String()
}

// jobsOf is the procs a PMI-2 job-connect sends: each job whole.
func jobsOf(nss ...string) []plugin.Proc {
	var ps []plugin.Proc
	for _, ns := range nss {
		ps = append(ps, plugin.Proc{Nspace: ns, Rank: plugin.RankWildcard})
	}
	return ps
}

// fenceReq is node's part of fence id, a world fence of job.
func fenceReq(job plugin.Job, id string, node int, data string, collect bool, timeout time.Duration) *plugin.FenceRequest {
	n := job.Nodes[node]
	var local []plugin.Proc
	for _, r := range n.Ranks {
		local = append(local, plugin.Proc{Nspace: job.Nspace, Rank: r})
	}
	return &plugin.FenceRequest{
		ID: id, Procs: jobsOf(job.Nspace), LocalProcs: local,
		Node: n.Name, Data: []byte(data), Collect: collect, Timeout: timeout,
	}
}

// TestConformance runs the suite through the Backend that gopmi-rm-local
// serves: each node is a Backend dialling the served universe, as the
// plugin process does.
func TestConformance(t *testing.T) {
	u := local.NewUniverse(local.UniverseOptions{})
	addr := serveUniverse(t, u)
	plugintest.RunConformance(t, plugintest.Harness{
		NewNode: func(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend {
			f := newBackend([]string{"-universe", addr}, func(string) string { return "" })
			t.Cleanup(func() { f.Close() })
			return f
		},
		Timeout: 500 * time.Millisecond,
	})
}

// TestConformancePlugin runs the suite against the real gopmi-rm-local
// binary as the shims run it: one process per node of every job, started
// through go-plugin's handshake, each dialling the served universe.
func TestConformancePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gopmi-rm-local")
	}
	bin := filepath.Join(t.TempDir(), "gopmi-rm-local")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/gopmi/gopmi/hostrm/local/cmd/gopmi-rm-local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gopmi-rm-local: %v\n%s", err, out)
	}
	u := local.NewUniverse(local.UniverseOptions{})
	addr := serveUniverse(t, u)
	p := plugintest.Plugin{Path: bin, Args: []string{"-universe", addr}}
	plugintest.RunConformance(t, p.Harness(500*time.Millisecond, nil))
}
