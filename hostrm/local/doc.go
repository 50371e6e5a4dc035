// Package local is gopmi's single-machine resource manager, the universe
// behind `gopmi run` (and, under Slurm, inside each step's coordinator):
// one plugin backend for every job of a run (the first job and
// everything it spawned) on every simulated node, and the worked
// example of a backend written with nothing but the plugin SDK (package
// plugin; its imports show it).
//
// # Where it runs
//
// The universe lives in `gopmi run`'s process (package launcher). A job
// on one node is served there too, and calls the universe in-process, as
// a plain plugin.Full. With -ppn each simulated node has a gopmi-shim,
// whose gopmi-rm-local backend (package forwarder) reaches the universe
// on a unix socket (package link, JSON: `gopmi run` links no gRPC).
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
//     node completes its fences in its server, which gives the data to the
//     universe as a Fence of that node alone (ID "publish:<node>/<n>",
//     no collect) once its backend is up; DirectModex waits for it.
//   - Abort records the status, fails the job's waits, and the launcher
//     ends the run with that status. NotifyEvent(proc-aborted) fails the
//     run too.
//   - Query answers the contract's query vocabulary (plugin/query.go:
//     namespaces, job status, the proc table as JSON rows, the local proc
//     table, local peers, node list, jobs and names); Log writes
//     "gopmi: [<proc>] <text>" lines to stderr.
package local
