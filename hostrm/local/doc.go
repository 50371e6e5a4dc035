// Package local is gopmi's single-machine resource manager: the engine of
// `gopmi run`, and the worked example of a backend written with nothing
// but the plugin SDK.
//
// # Processes
//
//	gopmi run ── Launcher (the step-daemon role) + Universe (the RM)
//	  │            Universe served by direct.Serve on
//	  │            <private 0700 dir>/universe.sock
//	  ├── per job, per simulated node: gopmi-shim
//	  │      └── go-plugin ──► gopmi-rm-local = Forwarder: direct.Dial(universe),
//	  │                         every call forwarded, errors unchanged
//	  └── the tasks, PMI_FD=3 (a socketpair end) or PMI_PORT/PMI_ID
//
// # Universe
//
// Universe is one plugin.Full for every job of the run (the first job and
// everything spawned from it), on every simulated node. Each call carries
// the namespace and ranks it concerns, so one instance serves all shims.
//
//   - Fence: collectives are matched by the namespaces of their
//     participants and the fence ID; arrivals are counted with LocalProcs.
//     When all participants arrived, every caller gets the concatenation
//     of all nodes' Data (Collect) or nothing. Every Data a node gives is
//     kept, in order, for DirectModex. A time-out (the request's or its context's)
//     fails every waiting caller with plugin.ErrTimeout and a message that
//     names the missing ranks and their nodes, e.g. "fence world/3 of job
//     gopmi.812.0: ranks 4-7 (node vm-1) did not arrive in 30s"; a node
//     arriving later fails at once with the same message. An abort or a
//     failed job fails pending fences with plugin.ErrAborted. Waiting costs
//     the caller's goroutine only.
//   - DirectModex returns everything the node hosting the process gave to
//     the job's fences (a host sends each fence only the puts made since
//     the previous one), or for RankWildcard every node's, waiting for a
//     first contribution if need be. The key is not looked for: the data
//     is opaque to the universe.
//   - The name service is one name space for the whole run. RangeNamespace
//     limits a name to the publisher's job, RangeLocal to its node; the
//     other ranges mean the whole run. Persistence: PersistProc names go
//     when the publisher's task exits, PersistApp names when its job ends,
//     PersistFirstRead names on their first lookup.
//   - Spawn resolves the apps (info keys wdir, path, env, host/hosts of
//     this machine; any other key is refused with plugin.ErrNotSupported
//     naming it), registers the new job and has the launcher start it.
//   - Connect (PMI-2 job-connect) records a connection between jobs of the
//     run: every job must be known and running, or the call fails naming
//     it (plugin.ErrNotFound for an unknown or finished job). job-connect
//     is a call of one process, not a collective, so Connect never waits
//     for the other side; the universe counts Connects per pair of jobs
//     (each rank of a job may connect) and each Disconnect undoes one.
//     The ID depends on the set of jobs only. Disconnecting jobs that are
//     not connected fails with plugin.ErrNotFound naming them.
//   - A connection is not needed to read another job's data: DirectModex
//     answers for any job of the run, connected or not. The bridge sends
//     every get of another job's key there, job-connect or not (a spawner
//     reading its children's keys, a child its parent's), and a host has
//     no PMI-1 way to connect first. Connect is bookkeeping that makes
//     PMI-2 job-connect succeed (it answers kvscopy=FALSE: foreign gets go
//     through DirectModex) and shows in the SIGUSR1 dump. A job on one
//     node completes its fences in its shim, which gives the data to the
//     universe as a Fence of that node alone (ID "publish:<node>/<n>",
//     no collect) once its backend is up; DirectModex waits for it.
//   - Abort records the status, fails the job's waits, and the launcher
//     ends the run with that status. NotifyEvent(proc-aborted) fails the
//     run too.
//   - Query answers "namespaces", "job-status", "proc-table" and
//     "local-peers" (formats at QueryNamespaces); Log writes
//     "gopmi: [<proc>] <text>" lines to stderr.
//
// # Launcher
//
// Launcher.Run serves the universe, starts the first job and waits for
// every task and shim of every job. Per job and node it creates one
// close-on-exec socketpair per task, starts gopmi-shim with the shim ends
// as fds 3.. (LISTEN_FDS, LISTEN_FDNAMES=rank<r>:..., LISTEN_PID unset:
// the shim takes them as its own), the bootstrap as protojson on stdin and
// NOTIFY_SOCKET for readiness, then starts the tasks at once, without
// waiting for READY=1: a task's first request waits in its socket until
// the shim reads it. A job has started once every shim said READY=1; a
// shim that fails before that fails the job's start and takes its tasks
// down.
// Every child is started from one goroutine locked to its OS thread for
// the run's life, with Pdeathsig=SIGKILL, so nothing outlives a killed
// gopmi run. A failing task, shim or abort ends the run: SIGTERM to
// everything, SIGKILL after a grace period; the exit status is the
// abort's, else 128+signal for a signal to gopmi run, else the first
// failing task's, else 1.
package local
