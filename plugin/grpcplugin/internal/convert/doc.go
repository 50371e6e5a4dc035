// Package convert turns the plugin contract's Go types into the gopmi.rm.v1
// wire messages and back, and errors into gRPC statuses and back.
//
// It is the only place that knows both sides, so that protobuf never reaches
// a vendor's code and the wire can evolve without breaking it (the idea of
// terraform-plugin-go's toproto/fromproto). To* functions build wire
// messages from Go values; From* functions build Go values from wire
// messages and accept nil, which reads as the empty message. Repeated fields
// round-trip as nil when empty.
//
// Errors: the serving side calls ToStatus on whatever the backend returned;
// the calling side calls FromCallError on whatever the gRPC call returned.
// Each plugin sentinel error travels as a gRPC code plus a
// google.rpc.ErrorInfo detail (domain "gopmi.rm.v1", a reason string), and
// the backend's message travels as the status message, unchanged.
package convert
