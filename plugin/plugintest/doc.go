// Package plugintest helps test RM backends and the code that uses them.
//
//   - RunConformance is the suite a backend vendor runs in CI: it drives the
//     backend the way gopmi's shims on two nodes would (GetInfo, Configure,
//     fences, direct modex, the name service, job connect, unsupported
//     calls, abort), once directly and once through the real gRPC layer.
//   - NewPair serves a backend in process through real gRPC and returns the
//     host side, so a test covers the conversions and error mapping
//     without building a plugin binary.
//   - Fake is a plugin.Full whose methods call function fields, for tests of
//     code that calls a backend.
package plugintest
