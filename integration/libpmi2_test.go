package integration

import (
	"fmt"
	"strconv"
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
