package shim

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/execpath"
	"github.com/gopmi/gopmi/shim/serve"
)

// Process is a running backend process; *grpcplugin.Client is one.
type Process interface {
	Backend() plugin.Full
	// Info is what the backend said in its handshake, nil when it said
	// nothing: the shim then asks GetInfo.
	Info() *plugin.BackendInfo
	// Exited closes when the process has died on its own.
	Exited() <-chan struct{}
	Close() error
}

// Launch is what starting a backend process needs beyond the bootstrap.
type Launch struct {
	// Path is the resolved binary; Args are the bootstrap's.
	Path string
	Args []string
	// SocketDir is a private 0700 directory for the plugin's socket.
	SocketDir string
	// Log receives the backend's stderr lines.
	Log zerolog.Logger
	// Env is added to the backend's environment.
	Env []string
	// Timeout bounds the start and handshake.
	Timeout time.Duration
}

// StartFunc starts a backend process: shim/goplugin.Start does it with
// go-plugin, as gopmi-shim does.
type StartFunc func(ctx context.Context, l Launch) (Process, error)

// inProcess adapts RunConfig.Backend to a startFunc.
func inProcess(newBackend func(context.Context, serve.BackendSpec) (plugin.Full, error), spec serve.BackendSpec) StartFunc {
	return func(ctx context.Context, l Launch) (Process, error) {
		// The backend's log is the shim's: zerolog.Ctx(ctx) has it.
		b, err := newBackend(l.Log.WithContext(ctx), spec)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (in-process): %w", serve.ErrBackend, spec.BinaryName(), err)
		}
		return localBackend{b}, nil
	}
}

// localBackend is a backend served in the shim's own process.
type localBackend struct{ b plugin.Full }

func (l localBackend) Backend() plugin.Full { return l.b }

// Info is nil: serve.Configure asks the backend itself.
func (l localBackend) Info() *plugin.BackendInfo { return nil }

// Exited never closes: the backend lives and dies with the shim.
func (l localBackend) Exited() <-chan struct{} { return nil }

func (l localBackend) Close() error {
	if c, ok := l.b.(io.Closer); ok {
		return c.Close()
	}
	return nil
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
