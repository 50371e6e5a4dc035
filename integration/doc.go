// Package integration holds gopmi's black-box tests: they build the three
// binaries (gopmi, gopmi-shim, gopmi-rm-local) and the real-client
// programs of integration/clients once, then run MPI and PMI jobs through
// `gopmi run` and judge only what a user sees: the exit status, the
// tasks' output and gopmi's messages on stderr.
//
// The programs speak PMI the way MPICH 4.0.2 (PMI-1) and Slurm's libpmi2
// (PMI-2) do; the failure tests also start the test binary itself as a
// task (see task_test.go) to talk raw bytes on PMI_FD, die at a chosen
// moment or hold a fence open. The package has no non-test code beyond
// this comment.
package integration
