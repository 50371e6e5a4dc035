package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// TestKVSLimit: a job that puts more than -max-kvs gets a refused put
// (the client fails, the job ends non-zero, the log names the limit),
// while a job beside it runs to its end untouched.
func TestKVSLimit(t *testing.T) {
	begin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bench := prog(t, clients.PMI2Bench)
	// 2 ranks x 2,000 keys x ~420 bytes: about 1.7 MB, over 1 MiB.
	big := startRun(ctx, gopmiArgv("-max-kvs", "1M", "-n", "2", bench, "k=2000", "v=400", "g=1", "rounds=1"), nil, nil, "")
	// The same job under the default limit, at the same time.
	other := startRun(ctx, gopmiArgv("-n", "2", bench, "k=2000", "v=400", "g=1", "rounds=1"), nil, nil, "")
	r := big.wait(t, "the job over its limit")
	if r.ExitCode == 0 || !strings.Contains(r.Stdout, "reason=put-") ||
		!strings.Contains(r.Stderr, "would pass its limit of 1048576 bytes (-max-kvs)") {
		t.Errorf("the job over its limit: exit %d\n%s", r.ExitCode, output(r))
	}
	if o := other.wait(t, "the job beside it"); o.ExitCode != 0 || !strings.Contains(o.Stdout, "bench n=2 k=2000") {
		t.Errorf("the job beside it: exit %d\n%s", o.ExitCode, output(o))
	}
}
