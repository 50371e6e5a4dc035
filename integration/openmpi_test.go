package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openMPIHint is how the tests name what provides Open MPI.
const openMPIHint = "apt-get install openmpi-bin libopenmpi-dev (as root; .ci/run and make deps install them)"

// buildOpenMPI compiles a test program with Open MPI's compiler, or fails
// the test saying how to install it.
func buildOpenMPI(t *testing.T, name string) string {
	t.Helper()
	cc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		t.Fatalf("mpicc.openmpi not found: %s", openMPIHint)
	}
	out := filepath.Join(t.TempDir(), name+"_ompi")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := filepath.Join("testdata", "src")
	if b, err := exec.CommandContext(ctx, cc, "-O2", "-I", src, "-o", out, filepath.Join(src, name+".c")).CombinedOutput(); err != nil {
		t.Fatalf("mpicc.openmpi %s: %v\n%s", name, err, b)
	}
	return out
}

// An Open MPI program never runs under gopmi run as N silent singletons
// (each "rank 0 of 1", exit 0): gopmi serves no PMIx yet, so its MPI_Init
// fails, the run fails, and one line says why and what to do instead. A
// program that is not MPI, and an MPICH one, are not touched.
func TestOpenMPIFailsLoudly(t *testing.T) {
	begin(t)
	prog := buildOpenMPI(t, "mpi_hello")
	r := runArgv(t, runOpts{}, gopmiArgv("-n", "2", prog))
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "size=1") {
		t.Fatalf("an Open MPI hello ran as singletons:\n%s", output(r))
	}
	hint := "is built with Open MPI (it links libmpi.so.40), which speaks PMIx only"
	if n := strings.Count(r.Stderr, hint); n != 1 {
		t.Errorf("the explanation appears %d times; want once:\n%s", n, output(r))
	}
	if r := runArgv(t, runOpts{}, gopmiArgv("-n", "4", "hostname")); r.ExitCode != 0 {
		t.Errorf("a program that is not MPI:\n%s", output(r))
	}
	if r := runArgv(t, runOpts{}, gopmiArgv("-n", "2", "false")); r.ExitCode != 1 || strings.Contains(r.Stderr, "Open MPI") {
		t.Errorf("a failing program that is not Open MPI gets no explanation:\n%s", output(r))
	}
}
