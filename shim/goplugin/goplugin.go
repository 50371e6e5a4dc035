// Package goplugin starts a shim's backend as a go-plugin process: it is
// the shim.StartFunc gopmi-shim runs with. It is a package of its own so
// that the shim's serving loop does not link go-plugin, which a binary
// serving its backend in process (shim.RunConfig.Backend) never uses but
// would pay for in package initialisation at every start.
package goplugin

import (
	"context"
	"errors"

	"github.com/gopmi/gopmi/plugin/grpcplugin"
	"github.com/gopmi/gopmi/shim"
)

// Start launches the backend binary with go-plugin.
func Start(ctx context.Context, l shim.Launch) (shim.Process, error) {
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path:      l.Path,
		Args:      l.Args,
		Env:       l.Env,
		SocketDir: l.SocketDir,
		// The logger receives every stderr line of the plugin,
		// re-levelled, so Stderr stays nil: the lines would show twice.
		Logger:       l.Log,
		StartTimeout: l.Timeout,
	})
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("grpcplugin.Start returned no client")
	}
	return c, nil
}
