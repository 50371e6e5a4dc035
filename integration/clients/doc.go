// Package clients builds and runs the real PMI client programs that judge
// gopmi's conformance and speed: MPICH programs (PMI-1 over MPICH 4.0.2's
// simple PMI), programs on Slurm's libpmi2 (PMI-2), and a hand-written PMI-1
// wire client. The C sources live in integration/testdata/src.
//
// Place in the data flow: the integration tests and the benchmark
// (integration/bench) call Build once, then start the programs through a
// Launcher — `mpiexec.hydra -n {n}`, `gopmi run -n {n}`, `srun --mpi=pmi2
// -n {n}` — and read the programs' stdout. Every program prints
// machine-checkable lines ("ok ...", "fail ... reason=...", "cpu_us=N") and
// bounds each blocking wait with alarm(2) (GOPMI_TEST_ALARM seconds), so a
// broken server fails a run instead of hanging it.
//
// Cases lists every run with the outcome a correct process manager gives,
// and, where MPICH's hydra 4.0.2 is known to deviate, the outcome hydra
// gives instead; the same table checks hydra today and gopmi by changing only
// the launcher. The checks the table is made of (Check, All, ExitCode,
// PerRank, ...) are exported for the tests that judge runs of their own.
package clients
