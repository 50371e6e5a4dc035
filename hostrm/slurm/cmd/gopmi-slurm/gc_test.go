package main

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

// A step's process starts with the collector at startGC percent and goes
// back to the default once what is live after a collection passes
// liveCap; GOGC in the environment is left alone.
func TestGCForAStep(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	gcForAStep()
	if got := gogc(); got != 50 {
		t.Fatalf("with GOGC=50 the collector is at %d%%", got)
	}

	t.Setenv("GOGC", "")
	debug.SetGCPercent(100)
	gcForAStep()
	if got := gogc(); got != startGC {
		t.Fatalf("a step's process starts with the collector at %d%%, want %d%%", got, startGC)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := gogc(); got != startGC {
		t.Fatalf("with little live, a collection set the collector to %d%%", got)
	}
	hold := make([][]byte, 3)
	for i := range hold {
		hold[i] = make([]byte, liveCap)
	}
	for deadline := time.Now().Add(10 * time.Second); gogc() != 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("with %d MiB live the collector stays at %d%%", 3*liveCap>>20, gogc())
		}
		runtime.GC()
	}
	runtime.KeepAlive(hold)
}
