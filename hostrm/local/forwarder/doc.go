// Package forwarder is the backend of gopmi-rm-local, the plugin that
// every gopmi-shim of a `gopmi run -ppn` job starts: a thin per-node
// client of the run's universe (package local), which it dials on a unix
// socket (package link) and forwards every call to, returning
// the universe's answers and errors unchanged. It is the shape this
// project recommends to a resource manager's backend: one process per job
// per node, started by that node's shim, that carries what spans nodes
// over the RM's own transport.
//
// It imports only the SDK (plugin) and the link; its main is one call:
// grpcplugin.Serve(forwarder.New()).
package forwarder
