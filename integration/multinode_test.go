package integration

import (
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// -ppn P splits a job into simulated nodes of P ranks, one gopmi-shim and
// one backend each, so fences, gets and MPICH's business cards cross the
// universe the way they cross real nodes.

func TestMultiNode(t *testing.T) {
	begin(t)
	t.Run("hello/n=16/ppn=4", func(t *testing.T) {
		r := gopmiRun(t, runOpts{}, "-ppn", "4", "-n", "16", prog(t, clients.MPIHello))
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), helloSum(16))
	})
	t.Run("alltoall/n=32/ppn=8", func(t *testing.T) {
		r := gopmiRun(t, runOpts{timeout: 2 * time.Minute}, "-ppn", "8", "-n", "32", prog(t, clients.MPIAlltoall))
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), clients.PerRank("ok alltoall ", 32, clients.FieldsAre("size", "32")))
	})
}

// TestPMIPort: tasks connect over TCP (PMI_PORT, PMI_ID and the initack
// handshake) instead of inheriting PMI_FD.
func TestPMIPort(t *testing.T) {
	begin(t)
	t.Run("hello/n=4", func(t *testing.T) {
		r := gopmiRun(t, runOpts{}, "-pmi-port", "-n", "4", prog(t, clients.MPIHello))
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), helloSum(4))
	})
	t.Run("pmi1/n=4", func(t *testing.T) {
		runCase(t, tableCase(t, "pmi1/n=4"), []string{"-pmi-port"}, quiet())
	})
	t.Run("pmi1/n=4/ppn=2", func(t *testing.T) {
		runCase(t, tableCase(t, "pmi1/n=4"), []string{"-pmi-port", "-ppn", "2"}, quiet())
	})
}

// TestFenceModes runs each fence mode across simulated nodes with MPICH
// (PMI-1 barrier) and libpmi2 (PMI-2 kvs-fence, values with ';' '=' and
// spaces, node attributes), and on one node for the non-default modes
// (TestPMI2SingleNode covers collect on one node).
func TestFenceModes(t *testing.T) {
	begin(t)
	pmi2Default := tableCase(t, "pmi2/default/n=4")
	for _, mode := range []string{"collect", "lazy", "modex"} {
		t.Run(mode, func(t *testing.T) {
			t.Run("hello/n=8/ppn=2", func(t *testing.T) {
				r := gopmiRun(t, runOpts{}, "-fence-mode", mode, "-ppn", "2", "-n", "8", prog(t, clients.MPIHello))
				verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), helloSum(8))
			})
			t.Run("pmi1/n=8/ppn=2", func(t *testing.T) {
				r := gopmiRun(t, runOpts{}, "-fence-mode", mode, "-ppn", "2", "-n", "8", prog(t, clients.PMI1Only))
				verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), clients.PerRank("ok pmi1 ", 8, clients.FieldsAre("peers", "7")))
			})
			t.Run("pmi2/default/n=4/ppn=2", func(t *testing.T) {
				runCase(t, pmi2Default, []string{"-fence-mode", mode, "-ppn", "2"}, quiet(),
					jobAttr(pmi2Default.N, "PMI_process_mapping", "(vector,(0,2,2))"))
			})
			if mode != "collect" {
				t.Run("pmi2/default/n=4", func(t *testing.T) {
					runCase(t, pmi2Default, []string{"-fence-mode", mode}, quiet(),
						jobAttr(pmi2Default.N, "PMI_process_mapping", "(vector,(0,1,4))"))
				})
			}
		})
	}
}

// jobAttr wants each of the n pmi2_test ranks to have read the job
// attribute key once, with the given value.
func jobAttr(n int, key, want string) clients.Check {
	return clients.PerRankWhere("ok pmi2 rank=", n, func(f map[string]string) bool {
		return f["step"] == "jobattr" && f["key"] == key
	}, clients.FieldsAre("value", want))
}
