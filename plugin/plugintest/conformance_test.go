package plugintest_test

import (
	"cmp"
	"context"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func harness(u *universe) plugintest.Harness {
	return plugintest.Harness{
		NewNode: func(t *testing.T, _ plugin.Job, _ int32) plugin.Backend { return u.node() },
		Timeout: 300 * time.Millisecond,
	}
}

// raceEnv stops a -race plugin from sleeping a second at exit (the race
// runtime's atexit_sleep_ms), which would cost every node of every case.
func raceEnv() string {
	return strings.TrimSpace("GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0")
}

func TestConformanceReference(t *testing.T) {
	plugintest.RunConformance(t, harness(newUniverse(faults{})))
}

// The recommended shape passes as production runs it: a plugin.Relay in
// a plugin process per node, forwarding to one daemon that sees them all.
func TestConformanceRelayPlugins(t *testing.T) {
	dir, err := os.MkdirTemp("", "gopmi-pt-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "daemon.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- direct.Serve(ctx, ln, newUniverse(faults{}).node()) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	p := plugintest.Plugin{Path: os.Args[0], Env: []string{roleEnv + "=relay", daemonEnv + "=unix://" + ln.Addr().String(), raceEnv()}}
	plugintest.RunConformance(t, p.Harness(300*time.Millisecond, nil))
}

// brokenEnv selects the broken backend TestConformanceBrokenHelper runs.
const brokenEnv = "GOPMI_PLUGINTEST_BROKEN"

var brokenBackends = map[string]struct {
	faults faults
	// plugin runs the backend as plugin processes, one per node, through
	// the Plugin harness, instead of one shared in-process instance.
	plugin bool
	// want is a piece of the failure message the suite must print.
	want string
}{
	"one-process-state":  {plugin: true, want: "each node's backend is a process of its own here, as under gopmi-shim"},
	"own-data-only":      {faults: faults{fenceOwnDataOnly: true}, want: "want the concatenation"},
	"untyped-timeout":    {faults: faults{fenceTimeoutUntyped: true}, want: "want an error wrapping plugin.ErrTimeout"},
	"lying-capabilities": {faults: faults{advertiseUnsupported: true}, want: `capability "spawn" is advertised`},
	"ignores-cancel":     {faults: faults{ignoreCancel: true}, want: "cancelled fence"},
	"connects-any-job":   {faults: faults{connectAnyJob: true}, want: "want an error wrapping plugin.ErrNotFound that names the job"},
	"barrier-at-once":    {faults: faults{barrierAtOnce: true}, want: "before node n1 arrived; want a barrier"},
	"vague-timeout":      {faults: faults{vagueTimeout: true}, want: "names neither node n1 nor ranks 2-3"},
	"ignores-timeout":    {faults: faults{ignoreTimeout: true}, want: "returned only when its context ended"},
	"late-arrival-waits": {faults: faults{lateArrivalWaits: true}, want: "late arrival at a timed-out fence"},
	"fence-by-id-only":   {faults: faults{fenceByIDOnly: true}, want: "--- FAIL: TestConformanceBrokenHelper/direct/FenceSameIDTwoJobs"},
	"abort-keeps-waits":  {faults: faults{abortKeepsWaits: true}, want: "fence pending when its job aborted"},
	"lookup-not-found":   {faults: faults{lookupNotFoundOnWait: true}, want: "want an error wrapping plugin.ErrTimeout that names it"},
	"modex-no-timeout":   {faults: faults{modexIgnoresTimeout: true}, want: "returned only when its context ended"},
	"modex-wildcard":     {faults: faults{modexWildcardNothing: true}, want: "want node n1's data"},
	"modex-unknown-job":  {faults: faults{modexUnknownWaits: true}, want: "DirectModex of unknown job"},
	"ignores-info":       {faults: faults{ignoresInfo: true}, want: "want an error wrapping plugin.ErrNotSupported that names the key"},
	"first-read-kept":    {faults: faults{firstReadKept: true}, want: "the first read removes it"},
	"range-ignored":      {faults: faults{rangeIgnored: true}, want: "the name's range is its publisher's job"},
	"unpublish-all-noop": {faults: faults{unpublishAllNoop: true}, want: "after its publisher unpublished without keys"},
	"zero-expires":       {faults: faults{zeroTimeoutExpires: true}, want: "a zero Timeout means plugin.DefaultFenceTimeout"},
	"abort-forgotten":    {faults: faults{abortForgotten: true}, want: "fence world/2 after its job aborted"},
}

// TestConformanceBrokenHelper is not a test on its own: TestConformanceCatches
// runs it in a subprocess against a broken backend, where it must fail.
func TestConformanceBrokenHelper(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("helper for TestConformanceCatches")
	}
	b, ok := brokenBackends[name]
	if !ok {
		t.Fatalf("unknown broken backend %q", name)
	}
	if b.plugin {
		p := plugintest.Plugin{Path: os.Args[0], Env: []string{roleEnv + "=memrm", raceEnv()}}
		plugintest.RunConformance(t, p.Harness(300*time.Millisecond, nil))
		return
	}
	plugintest.RunConformance(t, harness(newUniverse(b.faults)))
}

// TestConformanceCatches checks that the suite can fail: each deliberately
// broken backend must fail it with a message that names its bug.
func TestConformanceCatches(t *testing.T) {
	// Each broken backend runs the suite in a process of its own, which
	// mostly waits out time-outs: a few run side by side (more than
	// -test.parallel's one per CPU), so the whole takes seconds, not a
	// minute.
	type outcome struct {
		out []byte
		err error
	}
	sem := make(chan struct{}, 6)
	outcomes := map[string]chan outcome{}
	// The plugin-process runs take longest: they start first.
	names := slices.SortedFunc(maps.Keys(brokenBackends), func(a, b string) int {
		return cmp.Or(-cmp.Compare(btoi(brokenBackends[a].plugin), btoi(brokenBackends[b].plugin)), cmp.Compare(a, b))
	})
	for _, name := range names {
		b := brokenBackends[name]
		ch := make(chan outcome, 1)
		outcomes[name] = ch
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// One mode is enough to catch a bug: "direct" for an in-process
			// backend (the gRPC pair adds time, not cases), "process" for
			// plugin processes.
			mode := "direct"
			if b.plugin {
				mode = "process"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceBrokenHelper$/^"+mode+"$", "-test.v", "-test.count=1", "-test.timeout=120s")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			ch <- outcome{out, err}
		}()
	}
	for _, name := range names {
		b := brokenBackends[name]
		t.Run(name, func(t *testing.T) {
			o := <-outcomes[name]
			if o.err == nil {
				t.Fatalf("conformance suite passed a backend with bug %q:\n%s", name, o.out)
			}
			if _, ok := o.err.(*exec.ExitError); !ok {
				t.Fatalf("run helper: %v", o.err)
			}
			if !strings.Contains(string(o.out), b.want) {
				t.Errorf("suite failed for bug %q but its output lacks %q:\n%s", name, b.want, o.out)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
