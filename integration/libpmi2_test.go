package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/integration/clients"
)

// Slurm's libpmi2 speaks PMI-2 (length-prefixed frames, ';'-separated
// pairs with ";;" escapes). pmi2_test exercises every PMI-2 feature MPI
// libraries use; see integration/testdata/src/pmi2_test.c.

func TestPMI2SingleNode(t *testing.T) {
	begin(t)
	t.Run("pmi2/default/n=4", func(t *testing.T) {
		c := tableCase(t, "pmi2/default/n=4")
		runCase(t, c, nil, quiet(),
			jobAttr(c.N, "PMI_process_mapping", "(vector,(0,1,4))"), jobAttr(c.N, "universeSize", "4"))
	})
	for _, name := range []string{"pmi2/ns/n=4", "pmi2/spawn/n=2", "pmi2/ring/n=4", "pmi2/long/n=4"} {
		t.Run(name, func(t *testing.T) {
			runCase(t, tableCase(t, name), nil, quiet())
		})
	}
	t.Run("pmi2/abort/n=2", func(t *testing.T) {
		runCase(t, tableCase(t, "pmi2/abort/n=2"), nil, within(promptly), clients.ExitCode(1),
			gopmiLine("rank 1", "aborted", "boom"))
	})
}

// TestPMI2MultiNode runs the PMI-2 modes across simulated nodes: the name
// service, spawn (the children are laid out with the same -ppn), abort,
// the ring and values at the length limit all cross the universe.
// (pmi2_test default across nodes is in TestFenceModes.)
func TestPMI2MultiNode(t *testing.T) {
	begin(t)
	for _, c := range []struct {
		name, ppn string
		extra     []clients.Check
	}{
		{"pmi2/ns/n=4", "2", nil},
		{"pmi2/spawn/n=2", "1", []clients.Check{childMapping("(vector,(0,2,1))")}},
		{"pmi2/ring/n=4", "2", nil},
		{"pmi2/long/n=4", "2", nil},
		{"pmi2/abort/n=2", "1", []clients.Check{within(promptly), clients.ExitCode(1), gopmiLine("rank 1", "aborted", "boom")}},
	} {
		t.Run(c.name+"/ppn="+c.ppn, func(t *testing.T) {
			extra := c.extra
			if extra == nil {
				extra = []clients.Check{quiet()}
			}
			runCase(t, tableCase(t, c.name), []string{"-ppn", c.ppn}, extra...)
		})
	}
}

// childMapping wants the spawned children to see the given process
// mapping: their own layout, not the parent's.
func childMapping(want string) clients.Check {
	return clients.PerRank("ok pmi2-child ", 2, clients.FieldsAre("mapping", want))
}

// TestPMI2ValueLimit: -max-val raises the value length gopmi accepts and
// serves (libpmi2 itself stops at 1024, so the Go task client puts the
// long values); over the limit, a put fails with rc != 0 and a message.
func TestPMI2ValueLimit(t *testing.T) {
	begin(t)
	t.Run("max-val=4096/len=4096/ppn=1", func(t *testing.T) {
		r := gopmiRun(t, runOpts{env: []string{taskRun}},
			append([]string{"-max-val", "4096", "-ppn", "1", "-n", "2"}, taskArgs("bigval", "len=4096")...)...)
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), clients.PerRank("bigval ", 2, clients.FieldsAre("len", "4096")))
	})
	for _, c := range []struct {
		flags []string
		len   int
		limit string
	}{
		{nil, 1025, "1024"},
		{[]string{"-max-val", "4096"}, 4097, "4096"},
	} {
		t.Run(fmt.Sprintf("max-val=%s/len=%d", c.limit, c.len), func(t *testing.T) {
			args := append(append(c.flags, "-n", "2"), taskArgs("bigval", "len="+strconv.Itoa(c.len))...)
			r := gopmiRun(t, runOpts{env: []string{taskRun}}, args...)
			verify(t, r, clients.ExitCode(0), clients.NoFail(), clients.StdoutLacks("bigval rank="),
				clients.PerRank("bigval-put-error ", 2, nil), func(r clients.Result) error {
					for _, l := range clients.Lines(r.Stdout, "bigval-put-error ") {
						if !containsAll(l, "rc=", c.limit) {
							return fmt.Errorf("the put error does not name the limit %s: %s", c.limit, l)
						}
					}
					return nil
				})
		})
	}
}

// TestPMI2JobConnect runs libpmi2's PMI2_Job_Connect and
// PMI2_Job_Disconnect between a job and the job it spawned: every rank of
// the parent connects to the children's job (libpmi2 wants rc=0 and
// kvscopy=FALSE), reads the children's keys with a foreign kvs-get, first
// from any rank (PMI2_ID_NULL) then by rank, and disconnects. A connect to
// a job that does not exist fails at once, not by a time-out, and a
// disconnect once too often fails. On one node the children's fences
// complete in their shim, which publishes their data to the universe;
// with -ppn 1 the jobs span two simulated nodes and their fences go
// through the universe.
func TestPMI2JobConnect(t *testing.T) {
	begin(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"one node", nil},
		{"two nodes", []string{"-ppn", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testJobConnect(t, tc.args) })
	}
}

func testJobConnect(t *testing.T, args []string) {
	const n = 2
	r := gopmiRun(t, runOpts{}, append(args, "-n", strconv.Itoa(n), prog(t, clients.PMI2Test), "connect")...)
	// lines wants one "ok pmi2 rank=R ..." line of each of ranks 0..n-1
	// whose fields include kv (key, value, ...), each passing f.
	lines := func(n int, f clients.RankCheck, kv ...string) clients.Check {
		var what []string
		for i := 0; i+1 < len(kv); i += 2 {
			what = append(what, kv[i]+"="+kv[i+1])
		}
		c := clients.PerRankWhere("ok pmi2 rank=", n, func(fl map[string]string) bool {
			for i := 0; i+1 < len(kv); i += 2 {
				if fl[kv[i]] != kv[i+1] {
					return false
				}
			}
			return true
		}, f)
		return func(r clients.Result) error {
			if err := c(r); err != nil {
				return fmt.Errorf("lines with %s: %w", strings.Join(what, " "), err)
			}
			return nil
		}
	}
	failedRC := func(rank int, f map[string]string) error {
		if rc, err := strconv.Atoi(f["rc"]); err != nil || rc == 0 {
			return fmt.Errorf("rank %d: rc=%s, want a non-zero rc", rank, f["rc"])
		}
		return nil
	}
	verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), within(promptly),
		lines(n, failedRC, "step", "connect-missing"),
		lines(n, nil, "step", "connect"),
		lines(n, clients.FieldsAre("src", "-1", "value", "conn-v0"), "step", "connect-get", "key", "conn-k0"),
		lines(n, clients.FieldsAre("src", "1", "value", "conn-v1"), "step", "connect-get", "key", "conn-k1"),
		lines(n, nil, "step", "disconnect"),
		lines(1, failedRC, "step", "disconnect-again"),
		lines(n, nil, "mode", "connect"),
		clients.PerRank("ok pmi2-connect-child ", 2, nil),
		lines(2, nil, "mode", "connect-child"))
}
