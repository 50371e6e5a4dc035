// Command bench measures process managers side by side in one run on one
// machine: MPICH's mpiexec.hydra (the reference) and gopmi (`gopmi run`);
// with -slurm instead, `srun --mpi=pmi2 -N 2` (the reference) and `srun
// --mpi=gopmi -N 2` on a two-node Slurm cluster the bench starts (package
// slurmlab, as the integration tests; the step daemons run under slurmd,
// outside srun's process tree, so only wall times and srun's tree CPU are
// compared, and the burst and start-up sections are left out). Launchers
// take turns run by run (ABAB...)
// so machine noise hits all of them alike, and the report gives ratios
// against the reference, never lone absolute times.
//
// Sections:
//
//	(a) launch: /bin/true (no PMI: the launcher's own floor) and MPICH
//	    hello (MPI_Init + Allreduce + Finalize), wall time, median and min,
//	    at N = 1 (true) and 1, 4, 16, 64 (hello)
//	(b) a whole PMI-2 job on Slurm's libpmi2 (pmi2_bench: put K keys of V
//	    bytes, fence, get G peers' keys, R rounds; default 8 x 200 B, 16
//	    peers, one round), launch included, at N = 16, 64, 128, 1024: rank
//	    0's fence and get times, the launcher's wall, and below N = 512 the
//	    floor (the same job with no keys: init, the fences, finalize) and
//	    the data part (wall - floor), each with its ratio; a launcher that
//	    fails at some N is reported as "fail (reason)" and not run at
//	    larger N
//	(c) the process manager's own CPU, for (a) and (b), measured two ways
//	    (below): by process with perf when perf works, and the rusage
//	    estimate (c') always
//	(d) many small jobs at once (a parameter sweep): 30 MPICH hello jobs of
//	    2 ranks started together, wall time until the last ended
//	(e) start-up of gopmi's binaries, next to /bin/true: exec to exit of
//	    `gopmi version` and of gopmi-rm-local, exec to READY=1 of
//	    gopmi-shim for a one-task job, each with its package init time
//	    (GODEBUG=inittrace=1, in a second run) and page faults
//
// # Process-manager CPU
//
// perf (used when `perf record` works; -perf auto|on|off): after a size's
// timed runs, each launcher runs -cpu-runs more times (5; N >= 512 and
// -quick: 1), taking turns, under
//
//	perf record -q -e task-clock -c 100000 -o <tmp> -- <launcher argv>
//
// and each run is checked like a timed one. The timed runs never run under
// perf, whose sampling costs time. `perf report --sort comm` gives one
// sample per 0.1 ms of CPU of each thread, by process name (comm: per
// thread, 15 characters). Each name's CPU is its samples times 0.1 ms; the
// unfinished last period of each thread goes uncounted (under 0.1 ms per
// thread).
// The process-manager processes are picked by name, never as "everything
// but the tasks", since tasks have helper threads of their own (UCX's is
// "async"). The process manager's processes (the roles table, by the
// base name of the launcher's command) are:
//
//	hydra  mpiexec.hydra + hydra_pmi_proxy
//	gopmi  gopmi (`gopmi run`: it starts and reaps the tasks and serves a
//	       job on one node itself) + gopmi-shim + gopmi-rm-local (with
//	       -ppn, a shim and its backend per simulated node) + gopmi-pmix
//	       (a PMIx job's server on every node)
//	srun   srun + slurmstepd + gopmi-slurm + gopmi-slurm-pmix (perf
//	       samples the whole machine: the stepds run under slurmd)
//	other  the command's base name, cut to 15 characters
//
// The report gives, as medians over the runs, the process manager's CPU
// (the median of the runs' sums), with ratios against the reference.
// perf's own processes (perf, perf-exec) are left out. A forked child keeps its parent's name until its execve
// completes, so forking and exec'ing a task is charged to the process that
// starts it: hydra_pmi_proxy for hydra, gopmi for gopmi.
//
// rusage (c'): user+system CPU of the launcher's whole waited-for process
// tree (wait4 rusage) minus the CPU every task reports for itself
// (getrusage in the task after MPI_Finalize, "cpu_us=" lines), medians of
// the timed runs. It needs nothing but is biased against the process
// manager: whatever a task spends after its report (the rest of the MPI
// library's teardown, unmapping UCX's memory at exit: several ms per MPICH
// task) counts as process-manager CPU, and it cannot tell gopmi's
// processes apart. It is the only CPU table when perf is off or does not
// work (a note says why), and is always in the JSON (pm_cpu_ms; the perf
// measures are perf_cpu_ms by comm and pm_proper_cpu_ms, with the process
// manager's processes under "roles").
//
// Usage (from the repository root; `make bench` runs it):
//
//	go run ./integration/bench [-launcher 'name=command {n}']... [-slurm]
//	    [-runs 10] [-runs-large 3] [-perf auto|on|off] [-cpu-runs 5]
//	    [-true 1] [-hello 1,4,16,64] [-pmi2 16,64,128,1024] [-burst 30]
//	    [-start-runs 21] [-json out.json] [-quick]
//
// Without -launcher it measures hydra, plus gopmi when ./bin/gopmi exists
// (the output says when it does not). -quick is a smoke run of a few
// seconds used by the tests.
package main
