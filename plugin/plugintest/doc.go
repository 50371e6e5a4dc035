// Package plugintest helps test RM backends and the code that uses them.
//
//   - RunConformance is the suite a backend vendor runs in CI: it drives the
//     backend the way gopmi's shims on two nodes would (GetInfo, Configure,
//     fences as collectives and barriers, their time-outs and late
//     arrivals, two jobs at once, direct modex, the name service, job
//     connect, unsupported calls, abort and what it does to pending waits).
//   - Plugin runs a built backend binary once per node of every job, through
//     go-plugin's handshake, as each node's gopmi-shim does. A go-plugin
//     backend must pass the suite with Plugin.Harness: only separate
//     processes show whether it reaches across nodes.
//   - NewPair serves a backend in process through real gRPC and returns the
//     host side, so a test covers the conversions and error mapping
//     without building a plugin binary.
//   - Fake is a plugin.Full whose methods call function fields, for tests of
//     code that calls a backend.
//
// A vendor's test, with the backend built by `go build` beforehand:
//
//	func TestConformance(t *testing.T) {
//		p := plugintest.Plugin{Path: "./bin/gopmi-rm-myrm", Args: []string{"-daemon", addr}}
//		plugintest.RunConformance(t, p.Harness(2*time.Second, nil))
//	}
//
// The suite's own tests hold it to its word: each case fails a backend
// built with the bug it targets (TestConformanceCatches).
package plugintest
