// Command bench measures process managers side by side in one run on one
// machine: MPICH's mpiexec.hydra (the reference), gopmi (`gopmi run`) and,
// with -slurm, `srun --mpi=pmi2`. Launchers take turns run by run (ABAB...)
// so machine noise hits all of them alike, and the report gives ratios
// against the reference, never lone absolute times.
//
// Sections:
//
//	(a) MPICH hello (MPI_Init + Allreduce + Finalize) wall time, median and
//	    min, at N = 1, 4, 16, 64
//	(b) the PMI-2 microbenchmark on Slurm's libpmi2 (pmi2_bench: put K
//	    keys, fence, get G peers' keys, R rounds): fence, get and total time
//	    at N = 16, 64, 128, 1024; a launcher that fails at some N is reported
//	    as "fail (reason)" and not run at larger N
//	(c) the process manager's own CPU: user+system CPU of the launcher's
//	    whole waited-for process tree (wait4 rusage) minus the CPU every task
//	    reports for itself (getrusage in the task, "cpu_us=" lines)
//
// Usage (from the repository root; `make bench` runs it):
//
//	go run ./integration/bench [-launcher 'name=command {n}']... [-slurm]
//	    [-runs 10] [-runs-large 3] [-json out.json] [-quick]
//
// Without -launcher it measures hydra, plus gopmi when ./bin/gopmi exists
// (the output says when it does not). -quick is a smoke run of a few
// seconds used by the tests.
package main
