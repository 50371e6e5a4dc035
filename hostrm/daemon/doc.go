// Package daemon is gopmi's node daemon (`gopmi daemon`, under systemd
// gopmi.socket and gopmi.service): what outlives one job on a node, and
// what jobs that were launched apart share. `gopmi run` works without
// it; with it, a run registers its jobs and gains names across runs,
// PMI2_Job_Connect to other runs' jobs, and the tools' view (`gopmi ps`,
// `gopmi query`, `gopmi log`).
//
// # Roles
//
// One binary, three roles, chosen by flags (RunOptions):
//
//   - Node daemon (the default): a Server on a unix socket (Run; systemd's
//     socket when activated). Runs and Slurm steps on the node reach it
//     through a Client (DialNode), which registers their jobs in the
//     background and re-registers them when the daemon restarts.
//   - Hub (-listen): a node daemon that also serves the other nodes'
//     daemons over TCP (ServeHub), so that the cluster shares one name
//     space. Each node keeps a link of its own to the hub, on which the
//     hub asks what only that node can answer: whether a run's process
//     lives, and the keys of a run's job read from its universe.
//   - Relay (-upstream, type Upstream): a node's daemon that keeps no state: it relays
//     each local connection to the hub, vouching for the caller as its
//     kernel named it, and answers the hub's questions on the node's link.
//
// # Trust
//
// The daemon runs as root and serves every user of the node. Who a caller
// is comes from the kernel (SO_PEERCRED on the unix socket; for a relayed
// caller, from the relay, which proved the cluster's key). Then:
//
//   - a run is its user's: another user cannot register it, take over one
//     of its jobs, or act for it; a job's calls must come on a connection
//     that registered its run (actsForLocked);
//   - names are per user (a realm of package names): no user sees, takes,
//     blocks or stands in for another's, and a key only another user holds
//     is refused and logged rather than shown; root administers (ps, query,
//     log) but resolves only its own names;
//   - another run's keys (DirectModex, a job's query keys) are read from
//     that run's universe only at a private socket (unix://@gopmi-...)
//     whose server the kernel says is the run's own process;
//   - the hub link is TLS 1.3 with both ends proving the cluster's key,
//     bound to the session; the key file must be root's alone;
//   - every refusal is a line in the journal, once a minute per user and
//     reason; bounds hold what one user or host may hold open or publish.
//
// # Guarantees
//
//   - Every wait has a deadline: a waiting lookup its time-out, a read of
//     another run's keys its time-out (else 30 s), a handshake 5 s.
//   - A run that ends cleanly ends its jobs and run-long names at once; a
//     run whose connection closed gets a grace (Options.Grace) to come back
//     (a restart of the daemon looks like this), unless its process is seen
//     gone, which ends it within exitWatch.
//   - Names kept until unpublished survive restarts (the state file).
//   - Close ends every wait, stops every timer and waits for every
//     goroutine the Server started (its crew, plugin/crew).
//
// # Files
//
// server.go holds the Server and its lifecycle; registry.go the runs and
// jobs; names.go the name service's policy; query.go the answers to the
// query vocabulary (plugin.Query*); joblog.go the jobs' logs; connect.go
// connect and the reads of other runs' keys; hub.go and upstream.go the
// hub and the relay; client.go a run's Client; state.go the state file.
package daemon
