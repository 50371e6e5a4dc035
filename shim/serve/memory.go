package serve

import (
	"runtime/debug"
	"sync"
)

// The Go collector lets the heap grow to twice what is live before it
// collects (GOGC=100). A job whose KVS is large would then hold twice its
// data, most of it garbage from parsing the requests that put it. While
// the jobs of this process hold more than bigKVS bytes of KVS records, the
// collector runs when the heap is a quarter above what is live instead: a
// shim holding D bytes for its jobs stays near 1.25 D plus what it needs
// without them (measured: docs/admin/shared-node.md, "A job's KVS is bounded"). Small jobs, the common
// case, never pay for the extra collections, which cost a big one about 2%
// of its CPU (GODEBUG=gctrace=1).
const (
	bigKVS    = 16 << 20
	bigKVSGC  = 25
	kvsMemOff = bigKVS / 2 // back to the default below this
)

// kvsMemory sums what the process's jobs hold and sets the GC target.
var kvsMemory struct {
	mu      sync.Mutex
	total   int64
	lowered bool
	saved   int // the GC percent before lowering it
}

// kvsHeldHook is one job's bridge.Config.KVSHeld.
func kvsHeldHook() func(int64) {
	var last int64
	return func(held int64) {
		m := &kvsMemory
		m.mu.Lock()
		defer m.mu.Unlock()
		m.total += held - last
		last = held
		switch {
		case !m.lowered && m.total > bigKVS:
			m.saved = debug.SetGCPercent(bigKVSGC)
			if m.saved < 0 || m.saved < bigKVSGC {
				// GC off or already tighter (GOGC): leave it.
				debug.SetGCPercent(m.saved)
				return
			}
			m.lowered = true
		case m.lowered && m.total < kvsMemOff:
			debug.SetGCPercent(m.saved)
			m.lowered = false
		}
	}
}
