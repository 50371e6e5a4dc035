// Package proto holds gopmi's wire contracts as .proto files with their
// generated Go code committed beside them: gopmi.rm.v1, the backend
// service every resource manager's plugin serves (package
// proto/gopmi/rm/v1), and gopmi.shim.v1, the bootstrap message a step
// daemon hands the shim (package proto/gopmi/shim/v1). `make proto`
// regenerates the code with the pinned generators, and this package's
// test checks that what is committed is current. Vendors never see these
// types: package plugin is the contract in Go, and plugin/grpcplugin
// converts.
package proto
