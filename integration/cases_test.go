package integration

import (
	"testing"

	"github.com/gopmi/gopmi/integration/clients"
)

// TestConformanceTable holds gopmi to the shared expectations table,
// clients.Cases(), with the gopmi launcher: every case a topical test does
// not already run (ownedCases).
func TestConformanceTable(t *testing.T) {
	begin(t)
	names := map[string]bool{}
	for _, c := range clients.Cases() {
		names[c.Name] = true
	}
	for name, owner := range ownedCases {
		if !names[name] {
			t.Errorf("%s claims case %s, which the table no longer has", owner, name)
		}
	}
	for _, c := range clients.Cases() {
		if _, owned := ownedCases[c.Name]; owned {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			runCase(t, c, nil)
		})
	}
}
