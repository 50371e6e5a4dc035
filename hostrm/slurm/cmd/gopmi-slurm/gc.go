package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// A step's node process and its coordinator live for one step, and a
// small step's hold little: about 2 MiB of heap, then a collecting fence
// of a 128-rank PMIx job moves 200-600 KiB through each of them several
// times (gRPC, TLS, the parts). Go's collector, which first runs at a 4
// MiB heap, ran once or twice in that fence in each node process, on the
// fence's way (perf: its marking and the page faults of its fresh spans
// were most of the nodes' CPU there), and the fence took 4.5-15 ms
// between the last rank's arrival and libpmix's answer (median 5.3, six
// runs) against 2.7-4.4 (median 3.1) with the collector off.
//
// So these processes start with the collector at startGC percent: a
// small step's whole life passes without a collection. Once what is live
// after a collection passes liveCap, the step is a big one, whose heap
// should not grow to startGC/100 times what it holds: the default (100)
// comes back. GOGC in the environment is the user's choice and is left
// alone.
const (
	startGC = 400
	liveCap = 8 << 20
)

// gcForAStep sets the collector for a step's process (above).
func gcForAStep() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(startGC)
	watchLive()
}

// watchLive checks, after each collection, what is live: a cleanup of an
// object nobody holds runs once a collection found it unreachable, and
// each makes the next one. Past liveCap it puts the collector back to the
// default, if it is still at startGC: shim/serve's KVS tuning may have
// set it lower for a while (and will put back what it found), so the
// watch goes on for the process's life, at the cost of a cleanup per
// collection.
func watchLive() {
	sentinel := new([64]byte) // not a tiny allocation: those are batched
	runtime.AddCleanup(sentinel, func(struct{}) {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > liveCap &&
			sample[1].Value.Kind() == metrics.KindUint64 && sample[1].Value.Uint64() == startGC {
			debug.SetGCPercent(100)
		}
		watchLive()
	}, struct{}{})
}
