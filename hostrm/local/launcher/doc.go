// Package launcher is the step-daemon role of `gopmi run`: it lays jobs
// out, starts their tasks, serves them PMI, supervises every process and
// decides what the user sees and the exit status.
//
// # Processes
//
//	gopmi run ── Launcher + the universe (package local), in one process
//	  ├── a job on one node: served here, by the shim's serving loop
//	  │     (package serve) with the universe as its in-process backend
//	  ├── with -ppn, per job and simulated node: gopmi-shim
//	  │      └── go-plugin ──► gopmi-rm-local (package forwarder)
//	  │                         ──link (JSON), unix socket──► the universe
//	  └── the tasks, PMI_FD=3 (a socketpair end) or PMI_PORT/PMI_ID
//
// Both ways of serving a node start from the same gopmi.shim.v1.Bootstrap
// (Launcher.bootstrap): a shim reads it as protojson on stdin, the serving
// loop here gets it through serve.NewConfig, so a job is served alike
// either way. A setting a shim would refuse is refused before anything
// starts.
//
// # Launch
//
// Per job and node the launcher creates one close-on-exec socketpair per
// task (or one PMI_PORT listener). A shim gets its ends as fds 3..
// (LISTEN_FDS, LISTEN_FDNAMES=rank<r>:..., LISTEN_PID unset: the shim
// takes them as its own), the bootstrap on stdin and NOTIFY_SOCKET for
// readiness; a node served here gets them as net.Conns. Then the tasks
// start at once, without waiting for a shim's READY=1: a task's first
// request waits in its socket until its server reads it. A job has
// started once every shim said READY=1; a shim that fails before that
// fails the job's start and takes its tasks down. Every child is started
// from one goroutine locked to its OS thread for the run's life, with
// Pdeathsig=SIGKILL, so nothing outlives a killed gopmi run.
//
// # Failures and exit status
//
// The policy type holds every rule about what a failure means: which
// lines the user sees, when the run ends, and the exit status. It does no
// I/O and keeps no clock; the launcher feeds it events (a task exited, a
// server ended, an abort, a task gone before finalize, a signal, a failed
// start, the passing of time) and carries out its effects: printing,
// SIGTERM to everything and SIGKILL after the grace period. Its table
// tests are the place to change a rule.
package launcher
