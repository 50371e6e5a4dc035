// Package direct carries the plugin contract over a plain gRPC connection,
// without go-plugin: Serve serves a plugin.Backend as the gopmi.rm.v1
// ResourceManagerService on a listener, and Dial gives a caller a
// plugin.Full that calls one. It is for backends that live in a
// long-running process of their own (gopmi run's universe, a node daemon)
// rather than in a plugin process the shim starts (package grpcplugin,
// which uses this package's server and client on go-plugin's connection).
//
// It does not link go-plugin, so a program that only serves or dials
// (gopmi run) starts without go-plugin's dependencies (net/rpc, gob, gRPC
// reflection), a few milliseconds of CPU per start.
//
// Errors keep their meaning across the wire as in grpcplugin: a backend's
// error wrapping a plugin sentinel comes out on the caller's side with the
// backend's message and errors.Is true for the same sentinel. The
// connection has no transport security: use unix sockets in a directory
// only the callers can reach, or a trusted network.
package direct
