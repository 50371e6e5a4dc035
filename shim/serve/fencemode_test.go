package serve

import (
	"testing"

	"github.com/gopmi/gopmi/bridge"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// TestFenceModes holds the one table of fence modes: every bootstrap value
// has a name and a bridge mode, and the names read back.
func TestFenceModes(t *testing.T) {
	if got := FenceModeNames(); got != "collect, lazy or modex" {
		t.Errorf("names %q", got)
	}
	if DefaultFenceMode != "collect" {
		t.Errorf("default %q", DefaultFenceMode)
	}
	want := map[string]bridge.FenceMode{"": bridge.FenceCollect, "collect": bridge.FenceCollect, "lazy": bridge.FenceLazy, "modex": bridge.FenceModex}
	for name, mode := range want {
		wire, err := ParseFenceMode(name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		got, err := bridgeFenceMode(wire)
		if err != nil || got != mode {
			t.Errorf("%q: bridge mode %v, %v; want %v", name, got, err, mode)
		}
	}
	// Every value the bootstrap defines is in the table.
	for v := range shimv1.FenceMode_name {
		if _, err := bridgeFenceMode(shimv1.FenceMode(v)); err != nil {
			t.Errorf("bootstrap value %v: %v", shimv1.FenceMode(v), err)
		}
	}
	if _, err := ParseFenceMode("eager"); err == nil || err.Error() != `"eager" is not a fence mode; want collect, lazy or modex` {
		t.Errorf("eager: %v", err)
	}
	if _, err := bridgeFenceMode(9); err == nil {
		t.Error("value 9 accepted")
	}
}
