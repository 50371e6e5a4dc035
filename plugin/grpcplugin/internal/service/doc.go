// Package service holds the two sides of the gopmi.rm.v1
// ResourceManagerService that both transports share (go-plugin's
// connection in package grpcplugin, a plain socket in package direct):
// NewServer serves a plugin.Backend, NewBackend calls one. It is internal
// so that no protobuf type reaches the SDK's public API. The per-RPC
// methods of both sides (server_gen.go, remote_gen.go) are generated from
// the contract by plugin/internal/forwardgen (make generate); the shapes
// they share (the server type, call, the error mapping) are written here.
package service
