package plugintest_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// roleEnv makes the test binary a backend plugin for the Plugin harness:
//
//	memrm  the in-memory reference backend, alone in its process: a
//	       backend that keeps cross-node state in its own memory
//	relay  a plugin.Relay to the daemon at $GOPMI_PLUGINTEST_DAEMON: the
//	       recommended shape
const (
	roleEnv   = "GOPMI_PLUGINTEST_ROLE"
	daemonEnv = "GOPMI_PLUGINTEST_DAEMON"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "memrm":
		grpcplugin.Serve(newUniverse(faults{}).node())
		return
	case "relay":
		grpcplugin.Serve(plugin.NewRelay(func(ctx context.Context) (plugin.Full, io.Closer, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c, err := direct.Dial(ctx, os.Getenv(daemonEnv))
			if err != nil {
				return nil, nil, err
			}
			return c.Backend(), c, nil
		}))
		return
	}
	goleak.VerifyTestMain(m)
}
