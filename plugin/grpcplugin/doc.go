// Package grpcplugin carries the plugin contract over gRPC: it serves a
// plugin.Backend as the gopmi.rm.v1 ResourceManagerService and gives the
// host a plugin.Full that calls one.
//
// Two transports share the same service and the same conversions:
//
//   - A plugin process, started by the host through hashicorp/go-plugin.
//     A vendor's main is one call, Serve(mybackend.New()); the host (the
//     shim) calls Start, which runs the binary with the handshake, a private
//     unix socket, Pdeathsig so the plugin dies with the host, and the
//     plugin's stderr re-logged into the host's zerolog logger.
//   - A plain socket, for backends that live in a long-running daemon
//     (gopmi run's universe, a node daemon): package direct, Serve on the
//     daemon's side, Dial on the caller's. It does not link go-plugin, and
//     this package uses its server and client on go-plugin's connection.
//
// Errors keep their meaning across the wire: a backend's error wrapping a
// plugin sentinel (plugin.ErrTimeout, ...) travels as a gRPC code plus an
// ErrorInfo reason, and comes out on the host with the backend's message
// unchanged and errors.Is true for the same sentinel. On the host side a
// call whose own context ended fails with plugin.ErrTimeout or
// plugin.ErrAborted (and the context error), and a call to a backend whose
// process died or whose connection broke fails with plugin.ErrBackendGone.
//
// Host-side calls have no deadline of their own: the caller's context
// bounds each one.
//
// A plugin process serves one job on one node: each node's shim starts
// its own (see package plugin, "Process model"), so state that spans
// nodes belongs in the resource manager's daemon, not in the plugin.
package grpcplugin
