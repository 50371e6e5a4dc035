// Package plugin is the contract between gopmi and a resource manager (RM)
// backend: the Go types, interfaces and errors a vendor implements to let
// gopmi's per-job shim reach across nodes and jobs.
//
// The shim serves the PMI-1 and PMI-2 wire protocols to the tasks on one
// node. Everything it cannot decide alone goes to a Backend: the data
// exchange of a fence, a get for a key another node holds, the name service,
// spawn, connect, queries, logging and abort. The calls mirror the PMIx
// server RM interface (pmix_server_module_t), so an RM that already hosts
// PMIx has most of the work done.
//
// A backend implements Backend, the core every job needs, and any of the
// optional capability interfaces (Publisher, Spawner, Connector, Querier,
// Logger, EventNotifier, EventWatcher: the last carries events PMIx
// clients raise for processes on other nodes to those nodes' hosts, new
// in 1.1). It embeds Unimplemented so that methods it leaves
// out answer ErrNotSupported, which the shim turns into a PMI error whose
// message names the missing capability. GetInfo advertises the capabilities
// by name (the Cap* constants) so the host knows, before a task asks, what
// the backend can do.
//
// A vendor's main is one call: grpcplugin.Serve(mybackend.New()). Package
// plugin/plugintest has the conformance suite to run in the vendor's CI.
//
// # Errors
//
// Return errors that wrap one of the Err* sentinels (Errorf and Wrapf make
// them): grpcplugin carries the sentinel and the message across the
// process boundary, so errors.Is holds in the shim, which turns the
// sentinel into the PMI rc and the message into the client's errmsg. Never
// return gRPC status errors from Go: the conversion is grpcplugin's, and a
// status of your own loses the sentinel. Name the step and the cause in
// the message ("fence world/3 of job X: ranks 4-7 (node n2) did not arrive
// in 30s"); the shim adds its own step ("fence world/3", "lookup svc")
// only when your message does not start with it.
//
// # Process model
//
// The shim on each node (gopmi-shim, started by the RM's step daemon)
// starts its own backend process for the job, through go-plugin, and ends
// it with the job: one backend process per job per node. A backend process
// therefore sees only its node's calls. The Fence of node n0 and the Fence
// of node n1 arrive in two processes, as do each node's DirectModex,
// Publish and Lookup. Whatever spans nodes or jobs (a fence's exchange,
// another node's data, the name service, connect, spawn) must travel over
// the RM's own transport to something that sees them all: the RM's step or
// node daemon, or the step's other backend processes.
//
// The recommended shape is a thin per-node client of that daemon: Relay
// forwards every call to a backend the RM's daemon serves, dialled on the
// first call (gopmi's own gopmi-rm-local is a Relay to `gopmi run`'s
// universe). A backend that keeps cross-node state in its own memory works
// when every node shares one instance, and fails on two real nodes: every
// fence waits for a node whose calls went to another process. Run the
// conformance suite with plugintest.Plugin, which starts the backend
// binary once per node as the shim does.
//
// # Lifetimes
//
// No call says "the job ended". A backend process learns it by being
// ended: the shim stops its backend when its node's part of the job is
// over. State that outlives a backend process (a daemon's names with
// PersistApp or PersistProc, a job's fence data) ends when the RM itself
// sees the step or the process end; that is
// where a daemon drops them. ClientFinalized says a task finalized PMI,
// not that it exited.
//
// This package imports the standard library only; protobuf never reaches a
// vendor's code.
package plugin
