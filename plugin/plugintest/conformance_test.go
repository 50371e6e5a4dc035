package plugintest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func harness(u *universe) plugintest.Harness {
	return plugintest.Harness{
		NewNode: func(t *testing.T, _ plugin.Job, _ int32) plugin.Backend { return u.node() },
		Timeout: 300 * time.Millisecond,
	}
}

func TestConformanceReference(t *testing.T) {
	plugintest.RunConformance(t, harness(newUniverse(faults{})))
}

// brokenEnv selects the broken backend TestConformanceBrokenHelper runs.
const brokenEnv = "GOPMI_PLUGINTEST_BROKEN"

var brokenBackends = map[string]struct {
	faults faults
	// want is a piece of the failure message the suite must print.
	want string
}{
	"own-data-only":      {faults{fenceOwnDataOnly: true}, "want the concatenation"},
	"untyped-timeout":    {faults{fenceTimeoutUntyped: true}, "want an error wrapping plugin.ErrTimeout"},
	"lying-capabilities": {faults{advertiseUnsupported: true}, `capability "spawn" is advertised`},
	"ignores-cancel":     {faults{ignoreCancel: true}, "cancelled fence"},
	"connects-any-job":   {faults{connectAnyJob: true}, "want an error wrapping plugin.ErrNotFound that names the job"},
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
	plugintest.RunConformance(t, harness(newUniverse(b.faults)))
}

// TestConformanceCatches checks that the suite can fail: each deliberately
// broken backend must fail it with a message that names its bug.
func TestConformanceCatches(t *testing.T) {
	for name, b := range brokenBackends {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceBrokenHelper$", "-test.v", "-test.count=1", "-test.timeout=120s")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("conformance suite passed a backend with bug %q:\n%s", name, out)
			}
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("run helper: %v", err)
			}
			if !strings.Contains(string(out), b.want) {
				t.Errorf("suite failed for bug %q but its output lacks %q:\n%s", name, b.want, out)
			}
		})
	}
}
