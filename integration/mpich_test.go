package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// Debian's MPICH 4.0.2 speaks PMI-1 (simple PMI) over PMI_FD; these tests
// run its programs under `gopmi run` on one node.

// helloSum wants "ok hello rank=R size=n sum=n(n+1)/2" from every rank:
// MPI_Allreduce across the whole job worked.
func helloSum(n int) clients.Check {
	return clients.PerRank("ok hello ", n, clients.FieldsAre("size", strconv.Itoa(n), "sum", strconv.Itoa(n*(n+1)/2)))
}

func TestMPICHHello(t *testing.T) {
	begin(t)
	for _, name := range []string{"hello/n=1", "hello/n=4", "hello/n=16"} {
		t.Run(name, func(t *testing.T) {
			runCase(t, tableCase(t, name), nil, quiet())
		})
	}
	t.Run("hello/n=64", func(t *testing.T) {
		r := gopmiRun(t, runOpts{timeout: 2 * time.Minute}, "-n", "64", prog(t, clients.MPIHello))
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), helloSum(64))
	})
}

func TestMPICHAlltoall(t *testing.T) {
	begin(t)
	r := gopmiRun(t, runOpts{timeout: 2 * time.Minute}, "-n", "32", prog(t, clients.MPIAlltoall))
	verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), clients.PerRank("ok alltoall ", 32, clients.FieldsAre("size", "32")))
}

// TestMPICHAbort: MPI_Abort's code is gopmi run's exit status, stderr names
// the rank, and the ranks waiting in a barrier are ended, not left hanging.
func TestMPICHAbort(t *testing.T) {
	begin(t)
	t.Run("abort/n=4", func(t *testing.T) {
		runCase(t, tableCase(t, "abort/n=4"), nil, within(promptly), gopmiLine("rank 1", "aborted", "exit 7"))
	})
	t.Run("abort/code=3/rank=0/n=2", func(t *testing.T) {
		runCase(t, tableCase(t, "abort/code=3/rank=0/n=2"), nil, within(promptly), gopmiLine("rank 0", "aborted", "exit 3"))
	})
	t.Run("abort/code=5/shell", func(t *testing.T) {
		// What a user's shell sees as $?.
		script := fmt.Sprintf("'%s' -n 2 '%s' code=5 rank=1; echo shell-saw-status=$?", strings.Join(gopmiArgv(), "' '"), prog(t, clients.MPIAbort))
		r := runArgv(t, runOpts{}, []string{"/bin/sh", "-c", script})
		verify(t, r, clients.ExitCode(0), clients.StdoutHas("shell-saw-status=5\n"), gopmiLine("rank 1", "aborted", "exit 5"))
	})
	t.Run("abort/code=42/rank=3/n=4/ppn=2", func(t *testing.T) {
		r := gopmiRun(t, runOpts{}, "-ppn", "2", "-n", "4", prog(t, clients.MPIAbort), "code=42", "rank=3")
		verify(t, r, clients.ExitCode(42), within(promptly), clients.StdoutHas("aborting rank=3 size=4 code=42"),
			clients.StdoutLacks("barrier-completed"), gopmiLine("rank 3", "aborted", "exit 42"))
	})
}

// TestMPICHAttrs checks MPI_APPNUM and MPI_UNIVERSE_SIZE as MPICH reads
// them from PMI: appnum per MPMD section, universe size N or -usize.
func TestMPICHAttrs(t *testing.T) {
	begin(t)
	attrs := func(size, usize int, appnum func(rank int) int) clients.Check {
		return clients.PerRank("ok attrs ", size, func(rank int, f map[string]string) error {
			return clients.FieldsAre("size", strconv.Itoa(size), "usize", strconv.Itoa(usize), "appnum", strconv.Itoa(appnum(rank)))(rank, f)
		})
	}
	zero := func(int) int { return 0 }
	t.Run("attrs/n=2", func(t *testing.T) {
		runCase(t, tableCase(t, "attrs/n=2"), nil, quiet(), attrs(2, 2, zero))
	})
	t.Run("usize=8", func(t *testing.T) {
		r := gopmiRun(t, runOpts{}, "-usize", "8", "-n", "2", prog(t, clients.MPIAttrs))
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), attrs(2, 8, zero))
	})
	t.Run("mpmd", func(t *testing.T) {
		a := prog(t, clients.MPIAttrs)
		r := gopmiRun(t, runOpts{}, "-n", "2", a, ":", "-n", "2", a)
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), attrs(4, 4, func(rank int) int { return rank / 2 }))
	})
	t.Run("mpmd/ppn=1/usize=6", func(t *testing.T) {
		a := prog(t, clients.MPIAttrs)
		r := gopmiRun(t, runOpts{}, "-ppn", "1", "-usize", "6", "-n", "1", a, ":", "-n", "2", a)
		verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(), attrs(3, 6, func(rank int) int { return min(rank, 1) }))
	})
}

func TestMPICHPubname(t *testing.T) {
	begin(t)
	runCase(t, tableCase(t, "pubname/n=2"), nil, quiet())
	// Across simulated nodes the name goes through the universe.
	r := gopmiRun(t, runOpts{}, "-ppn", "1", "-n", "2", prog(t, clients.MPIPubname))
	verify(t, r, clients.ExitCode(0), clients.NoFail(), quiet(),
		clients.StdoutHas("ok pubname rank=0 step=publish"),
		clients.StdoutHas("ok pubname rank=1 step=lookup port=fake-port-string#1"),
		clients.StdoutHas("ok pubname rank=1 step=lookup-missing"),
		clients.StdoutHas("ok pubname rank=0 step=unpublish"),
		clients.StdoutHas("ok pubname rank=0 size=2\n"),
		clients.StdoutHas("ok pubname rank=1 size=2\n"))
}
