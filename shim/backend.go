package shim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
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
		if err := isExecutable(spec.Path); err != nil {
			return "", fmt.Errorf("%w: backend.path %s: %w", serve.ErrBackend, spec.Path, err)
		}
		return spec.Path, nil
	}
	bin := spec.BinaryName()
	var searched []string
	if self != "" {
		dirs := []string{filepath.Dir(self)}
		// A shim reached through a symlink (/usr/bin/gopmi-shim ->
		// /usr/lib/gopmi/gopmi-shim) finds the backends installed beside
		// the real file too.
		if real, err := filepath.EvalSymlinks(self); err == nil && filepath.Dir(real) != dirs[0] {
			dirs = append(dirs, filepath.Dir(real))
		}
		for _, d := range dirs {
			p := filepath.Join(d, bin)
			searched = append(searched, d)
			if isExecutable(p) == nil {
				return p, nil
			}
		}
	}
	pathEnv := getenv("PATH")
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			// exec.LookPath refuses relative PATH entries for the same
			// reason: the working directory is the job's, not ours.
			continue
		}
		if slices.Contains(searched, d) {
			continue
		}
		searched = append(searched, d)
		p := filepath.Join(d, bin)
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s not found in %s (next to the shim, then PATH); install it or set backend.path",
		serve.ErrBackend, bin, strings.Join(searched, ":"))
}

func isExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("is a directory")
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}
