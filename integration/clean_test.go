package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/integration/clients"
)

// TestCleanRunIsQuiet: a job that succeeds prints nothing of gopmi's on
// stderr at the default log level: no "gopmi:" line and no warning or
// error log line from gopmi run, the shims or the backend. Short jobs
// matter most: they end while the shims' backends are still starting.
func TestCleanRunIsQuiet(t *testing.T) {
	begin(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"pmi1/n=1", []string{"-n", "1", prog(t, clients.PMI1Only)}},
		{"pmi2/ring/n=2", []string{"-n", "2", prog(t, clients.PMI2Test), "ring"}},
		{"pmi2/long/n=2/ppn=1", []string{"-ppn", "1", "-n", "2", prog(t, clients.PMI2Test), "long"}},
		{"hello/n=2", []string{"-n", "2", prog(t, clients.MPIHello)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := gopmiRun(t, runOpts{}, c.args...)
			verify(t, r, clients.ExitCode(0), clients.NoFail(), func(r clients.Result) error {
				var ours []string
				for _, l := range strings.Split(r.Stderr, "\n") {
					if strings.HasPrefix(l, "gopmi") || strings.Contains(l, " WRN ") || strings.Contains(l, " ERR ") {
						ours = append(ours, l)
					}
				}
				if len(ours) > 0 {
					return fmt.Errorf("a successful run printed %d lines of gopmi's on stderr, first: %s", len(ours), ours[0])
				}
				return nil
			})
		})
	}
}
