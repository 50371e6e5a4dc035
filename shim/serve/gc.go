package serve

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The Go collector's target is set here and nowhere else in gopmi's
// processes, from two things: what the process's jobs hold in their KVS,
// and the process's role.
//
// What the jobs hold. The collector lets the heap grow to twice what is
// live before it collects (GOGC=100). A job whose KVS is large would then
// hold twice its data, most of it garbage from parsing the requests that
// put it. While the process's jobs hold more than bigKVS bytes of KVS
// records, the collector runs when the heap is a quarter above what is
// live instead (bigKVSGC): a shim holding D bytes for its jobs stays near
// 1.25 D plus what it needs without them (measured: docs/admin/
// shared-node.md, "A job's KVS is bounded"); below kvsOff it goes back.
// Small jobs, the common case, never pay for the extra collections, which
// cost a big one about 2% of its CPU (GODEBUG=gctrace=1). A lower target
// for every job (GOGC=40, for about 20% less peak RSS on a 64-task job)
// ran four collections during a 64-rank MPI_Init instead of one, CPU the
// job pays while it starts.
//
// The role. A Slurm step's node process and its coordinator (StepGC) live
// for one step, and a small step's hold little: about 2 MiB of heap, then
// a collecting fence of a 128-rank PMIx job moves 200-600 KiB through
// each of them several times (gRPC, TLS, the parts). The collector,
// which first runs at a 4 MiB heap, ran once or twice in that fence in
// each node process, on the fence's way (perf: its marking and the page
// faults of its fresh spans were most of the nodes' CPU there), and the
// fence took 4.5-15 ms between the last rank's arrival and libpmix's
// answer (median 5.3, six runs) against 2.7-4.4 (median 3.1) with the
// collector off. So a step's processes start at stepGC percent: a small
// step's whole life passes without a collection. Once what is live after
// a collection passes stepLiveCap, the step is a big one, whose heap
// should not grow to stepGC/100 times what it holds: the default comes
// back.
//
// GOGC in the environment is the user's choice: the role leaves it alone,
// and the KVS rule lowers it only when it is above bigKVSGC (never when
// the collector is off).
const (
	bigKVS      = 16 << 20
	bigKVSGC    = 25
	kvsOff      = bigKVS / 2
	stepGC      = 400
	stepLiveCap = 8 << 20
)

// gcInputs is what the target is decided from.
type gcInputs struct {
	base    int  // the target the process started with: GOGC's, else 100 (negative: off)
	user    bool // GOGC is in the environment
	step    bool // a step's process (StepGC)
	bigStep bool // what was live after a collection passed stepLiveCap
	bigKVS  bool // the jobs hold a big KVS (with its hysteresis)
}

// gcTarget is the collector's target for in.
func gcTarget(in gcInputs) int {
	t := in.base
	if in.step && !in.user && !in.bigStep {
		t = stepGC
	}
	if in.bigKVS && t > bigKVSGC {
		t = bigKVSGC
	}
	return t
}

// gc is the process's one owner of the target.
var gc struct {
	mu     sync.Mutex
	init   bool
	in     gcInputs
	kvs    int64 // what the jobs hold
	set    int   // the target last set
	closed bool  // tests: stop the live watch
}

// gcLocked starts the owner on first use. Called with gc.mu held.
func gcLocked() {
	if gc.init {
		return
	}
	gc.init = true
	gc.in.user = os.Getenv("GOGC") != ""
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	gc.in.base = 100
	if s[0].Value.Kind() == metrics.KindUint64 {
		gc.in.base = int(s[0].Value.Uint64())
	}
	if gc.in.user && os.Getenv("GOGC") == "off" {
		gc.in.base = -1
	}
	gc.set = gc.in.base
}

// applyLocked sets the target when it changed. Called with gc.mu held.
func applyLocked() {
	if t := gcTarget(gc.in); t != gc.set {
		debug.SetGCPercent(t)
		gc.set = t
	}
}

// StepGC makes this process a step's (gopmi-slurm's node process and
// coordinator): the collector starts at stepGC percent, and goes back to
// the default once the step proves a big one.
func StepGC() {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	gcLocked()
	gc.in.step = true
	applyLocked()
	if !gc.in.user {
		watchLive()
	}
}

// watchLive checks, after each collection, what is live: a cleanup of an
// object nobody holds runs once a collection found it unreachable, and
// each makes the next one, until the step proves a big one.
func watchLive() {
	sentinel := new([64]byte) // not a tiny allocation: those are batched
	runtime.AddCleanup(sentinel, func(struct{}) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		gc.mu.Lock()
		defer gc.mu.Unlock()
		if gc.closed {
			return
		}
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > stepLiveCap {
			gc.in.bigStep = true
			applyLocked()
			return
		}
		watchLive()
	}, struct{}{})
}

// kvsHeldHook is one job's bridge.Config.KVSHeld: it adds what the job
// holds to the process's sum.
func kvsHeldHook() func(int64) {
	var last int64
	return func(held int64) {
		gc.mu.Lock()
		defer gc.mu.Unlock()
		gcLocked()
		gc.kvs += held - last
		last = held
		switch {
		case !gc.in.bigKVS && gc.kvs > bigKVS:
			gc.in.bigKVS = true
		case gc.in.bigKVS && gc.kvs < kvsOff:
			gc.in.bigKVS = false
		default:
			return
		}
		applyLocked()
	}
}
