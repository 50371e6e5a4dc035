// Package serve is the shim's serving loop as a library: it serves PMI-1
// and PMI-2 to the tasks of one job on one node, over connections and a
// backend its host hands it. Two hosts use it: gopmi-shim (package shim),
// the process a step daemon starts, whose backend is a plugin process
// reached over go-plugin; and `gopmi run`, which serves a job on one node
// from its own process, with its local universe as an in-process backend.
//
// # Data flow
//
//	task connections (net.Conn by rank; a PMI_PORT net.Listener)
//	       │  one reader goroutine per task: bytes ──► bridge.Session.Feed
//	       ◄── bounded write queue ◄── bridge.Sender.Send (one writer each)
//	bridge.Job (the PMI engine) ──► bridge.Backend ──► the host's backend
//
// A host validates a gopmi.shim.v1.Bootstrap into a Config (NewConfig:
// every rule and default lives there, so both hosts serve a job alike)
// and calls Host with the task connections and its own ways (HostOptions:
// how its backend starts, how it tells its launcher the tasks are
// served). Host is the one host protocol both follow (host.go): it makes
// the bridge.Backend handle, calls Start, reports readiness, brings the
// backend up beside the job when the job needs it (HostOptions.Start,
// Configure, then Backend.Up) and fails the job when the backend does
// not start or dies. Wait returns when every local task has finalized
// and closed its connection, the job fails or is aborted, or the host's
// context ends; it shuts down without losing an answer owed and returns
// an error that ExitCode maps to the shim's exit statuses; Close then
// ends the backend. What stays each host's own: reading the bootstrap
// and the fds, signals, and how the exit status is reported.
//
// The package links neither go-plugin nor protojson: a host that serves
// its tasks in-process pays neither at start-up.
package serve
