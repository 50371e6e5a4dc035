package serve

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc reads the collector's percent without setting it.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// resetGC gives a test a fresh owner, and puts the default back after it.
func resetGC(t *testing.T) {
	t.Helper()
	gc.mu.Lock()
	gc.closed = true
	gc.mu.Unlock()
	debug.SetGCPercent(100)
	gc.mu.Lock()
	gc.init, gc.in, gc.kvs, gc.set, gc.closed = false, gcInputs{}, 0, 0, false
	gc.mu.Unlock()
	t.Cleanup(func() {
		gc.mu.Lock()
		gc.closed = true
		gc.mu.Unlock()
		debug.SetGCPercent(100)
	})
}

// The target from the KVS held and the role, the user's GOGC first.
func TestGCTarget(t *testing.T) {
	for _, tc := range []struct {
		in   gcInputs
		want int
	}{
		{gcInputs{base: 100}, 100},
		{gcInputs{base: 100, step: true}, stepGC},
		{gcInputs{base: 100, step: true, bigStep: true}, 100},
		{gcInputs{base: 100, step: true, bigKVS: true}, bigKVSGC},
		{gcInputs{base: 100, bigKVS: true}, bigKVSGC},
		{gcInputs{base: 50, user: true, step: true}, 50},
		{gcInputs{base: 200, user: true, bigKVS: true}, bigKVSGC},
		{gcInputs{base: 10, user: true, bigKVS: true}, 10},
		{gcInputs{base: -1, user: true, step: true, bigKVS: true}, -1},
	} {
		if got := gcTarget(tc.in); got != tc.want {
			t.Errorf("gcTarget(%+v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A step's process starts with the collector at stepGC percent and goes
// back to the default once what is live after a collection passes
// stepLiveCap; GOGC in the environment is left alone.
func TestStepGC(t *testing.T) {
	resetGC(t)
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	StepGC()
	if got := gogc(); got != 50 {
		t.Fatalf("with GOGC=50 the collector is at %d%%", got)
	}

	resetGC(t)
	t.Setenv("GOGC", "")
	StepGC()
	if got := gogc(); got != stepGC {
		t.Fatalf("a step's process starts with the collector at %d%%, want %d%%", got, stepGC)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := gogc(); got != stepGC {
		t.Fatalf("with little live, a collection set the collector to %d%%", got)
	}
	hold := make([][]byte, 3)
	for i := range hold {
		hold[i] = make([]byte, stepLiveCap)
	}
	for deadline := time.Now().Add(10 * time.Second); gogc() != 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("with %d MiB live the collector stays at %d%%", 3*stepLiveCap>>20, gogc())
		}
		runtime.GC()
	}
	runtime.KeepAlive(hold)
}

// The jobs' KVS held lowers the target past bigKVS and puts it back below
// kvsOff, in a step's process too.
func TestKVSHeldGC(t *testing.T) {
	resetGC(t)
	t.Setenv("GOGC", "")
	StepGC()
	a, b := kvsHeldHook(), kvsHeldHook()
	a(bigKVS / 2)
	if got := gogc(); got != stepGC {
		t.Fatalf("half of bigKVS held: %d%%", got)
	}
	b(bigKVS/2 + 1)
	if got := gogc(); got != bigKVSGC {
		t.Fatalf("past bigKVS held by two jobs: %d%%, want %d%%", got, bigKVSGC)
	}
	a(0)
	if got := gogc(); got != bigKVSGC {
		t.Fatalf("between kvsOff and bigKVS: %d%%, want it still %d%%", got, bigKVSGC)
	}
	b(kvsOff - 1)
	if got := gogc(); got != stepGC {
		t.Fatalf("below kvsOff: %d%%, want the step's %d%% back", got, stepGC)
	}
}
