package shim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/execpath"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
	"github.com/gopmi/gopmi/shim/serve"
)

// backendProc is a running backend plugin; *grpcplugin.Client is one.
type backendProc interface {
	Backend() plugin.Full
	Info() *plugin.BackendInfo
	Exited() <-chan struct{}
	Close() error
}

// launch is what starting a backend needs beyond the bootstrap.
type launch struct {
	path      string // resolved binary
	spec      serve.BackendSpec
	socketDir string
	log       zerolog.Logger
	env       []string
	// timeout bounds the start and handshake.
	timeout time.Duration
}

// startFunc starts a backend; tests replace it.
type startFunc func(ctx context.Context, l launch) (backendProc, error)

// startPlugin launches the backend binary with go-plugin.
func startPlugin(ctx context.Context, l launch) (backendProc, error) {
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path:      l.path,
		Args:      l.spec.Args,
		Env:       l.env,
		SocketDir: l.socketDir,
		// The logger receives every stderr line of the plugin,
		// re-levelled, so Stderr stays nil: the lines would show twice.
		Logger:       l.log,
		StartTimeout: l.timeout,
	})
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("grpcplugin.Start returned no client")
	}
	return c, nil
}

// resolveBackend finds the backend binary: backend.path if given, else
// gopmi-rm-<name> next to the shim's own executable, then in PATH. The
// error names every place it looked.
func resolveBackend(spec serve.BackendSpec, self string, getenv func(string) string) (string, error) {
	if spec.Path != "" {
		if err := execpath.Check(spec.Path); err != nil {
			return "", fmt.Errorf("%w: backend.path %s: %w", serve.ErrBackend, spec.Path, err)
		}
		return spec.Path, nil
	}
	bin := spec.BinaryName()
	p, searched := execpath.Find(bin, append(execpath.Beside(self), execpath.PathDirs(getenv("PATH"))...)...)
	if p == "" {
		return "", fmt.Errorf("%w: %s not found in %s (next to the shim, then PATH); install it or set backend.path",
			serve.ErrBackend, bin, strings.Join(searched, ":"))
	}
	return p, nil
}
