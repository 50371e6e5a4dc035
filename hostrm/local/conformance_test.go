package local

import (
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

// TestConformanceDirect runs the plugin conformance suite against one
// shared universe: every node of every job is the same Universe, as for
// the jobs gopmi run serves itself. (Served to other processes, it passes
// the suite in packages link and forwarder.)
func TestConformanceDirect(t *testing.T) {
	u := NewUniverse(UniverseOptions{})
	t.Cleanup(u.Close)
	plugintest.RunConformance(t, plugintest.Harness{
		NewNode: func(t *testing.T, job plugin.Job, nodeID int32) plugin.Backend { return u },
		Timeout: 500 * time.Millisecond,
	})
}
