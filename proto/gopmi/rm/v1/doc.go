// Package rmv1 is the generated Go code of gopmi.rm.v1 (rm.proto): the
// gRPC service a backend plugin serves to the shim, one RPC per call of
// package plugin's contract. Only plugin/grpcplugin uses it; vendors
// implement plugin.Backend and never see these types.
package rmv1
