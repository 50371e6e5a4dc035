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
// Logger, EventNotifier). It embeds Unimplemented so that methods it leaves
// out answer ErrNotSupported, which the shim turns into a PMI error whose
// message names the missing capability. GetInfo advertises the capabilities
// by name (the Cap* constants) so the host knows, before a task asks, what
// the backend can do.
//
// A vendor's main is one call: grpcplugin.Serve(mybackend.New()). Package
// plugin/plugintest has the conformance suite to run in the vendor's CI.
//
// This package imports the standard library only; protobuf never reaches a
// vendor's code.
package plugin
