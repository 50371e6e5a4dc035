package grpcplugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/hclogzero"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/service"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// How long Close lets the plugin shut down on its own before it kills it,
// and then how long it waits for go-plugin to finish reading its output.
const (
	closeGrace   = 2 * time.Second
	cleanupGrace = 5 * time.Second
	// goneWait is how long a call that lost its connection waits to see
	// the process exit, so its error can say how the plugin ended.
	goneWait = 200 * time.Millisecond
)

// ClientConfig says how to start a backend plugin process.
type ClientConfig struct {
	// Path is the plugin binary.
	Path string
	// Args are its arguments, not including Path.
	Args []string
	// Env is added to the host's environment for the plugin (KEY=VALUE;
	// later entries win). go-plugin's own variables win over both.
	Env []string
	// SocketDir is the private directory in which the plugin creates its
	// unix socket (in a subdirectory removed by Close); empty means the
	// system temporary directory.
	SocketDir string
	// Logger receives go-plugin's messages and the plugin's stderr lines,
	// re-levelled. Its level is passed to the plugin (EnvLogLevel). The
	// zero Logger drops every line, but its level is debug: the plugin
	// still writes its debug lines for nothing. zerolog.Nop() silences
	// both.
	Logger zerolog.Logger
	// StartTimeout bounds the start (fork to handshake line); 0 means
	// plugin.DefaultStartTimeout. A deadline on Start's context bounds it
	// too.
	StartTimeout time.Duration
	// Stderr, if set, also receives the plugin's stderr verbatim.
	Stderr io.Writer
	// MaxMessageSize bounds one gRPC message in either direction; 0 means
	// DefaultMaxMessageSize.
	MaxMessageSize int
}

// Client is a running backend plugin process and the connection to it.
type Client struct {
	gp      *goplugin.Client
	run     *procRunner
	backend plugin.Full
	info    *plugin.BackendInfo
	name    string

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Start starts the plugin at cfg.Path, connects to it and calls GetInfo
// once. ctx bounds the whole start; cancelling it kills the plugin. The
// plugin gets Pdeathsig SIGKILL, so it dies with the host.
func Start(ctx context.Context, cfg ClientConfig) (_ *Client, retErr error) {
	if cfg.Path == "" {
		return nil, fmt.Errorf("start backend: no path: %w", plugin.ErrInvalidArgument)
	}
	startTimeout := cfg.StartTimeout
	if startTimeout <= 0 {
		startTimeout = plugin.DefaultStartTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		startTimeout = min(startTimeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start backend %s: %w: %w", cfg.Path, err, convert.ContextKind(err))
	}
	if startTimeout <= 0 {
		return nil, fmt.Errorf("start backend %s: %w: %w", cfg.Path, context.DeadlineExceeded, plugin.ErrTimeout)
	}
	maxMsg := cfg.MaxMessageSize
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMessageSize
	}
	began := time.Now()

	env := append(os.Environ(), EnvLogLevel+"="+hclogzero.EffectiveLevel(cfg.Logger).String())
	env = append(env, cfg.Env...)
	run := newProcRunner(cfg.Path, cfg.Args, env)
	hl := hclogzero.New(cfg.Logger)
	gp := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{PluginName: &grpcPlugin{}},
		RunnerFunc: func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
			run.goEnv = spec.Env
			return run, nil
		},
		UnixSocketConfig: &goplugin.UnixSocketConfig{TempDir: cfg.SocketDir},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		// The runner builds the environment itself: go-plugin would put the
		// host's after cfg.Env, where it would win.
		SkipHostEnv:  true,
		Logger:       hl,
		StartTimeout: startTimeout,
		Stderr:       cfg.Stderr,
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg))},
	})
	c := &Client{gp: gp, run: run, name: filepath.Base(cfg.Path), closed: make(chan struct{})}
	defer func() {
		if retErr != nil {
			_ = c.Close()
		}
	}()

	// go-plugin's start takes no context: run it aside and kill the
	// process if ctx ends first, which makes it return.
	type started struct {
		proto goplugin.ClientProtocol
		err   error
	}
	done := make(chan started, 1)
	go func() {
		proto, err := gp.Client()
		done <- started{proto, err}
	}()
	var res started
	select {
	case res = <-done:
	case <-ctx.Done():
		// The caller gave up on this plugin: its killing is no news, so
		// go-plugin's reports of it ("failed to exit gracefully", "exited:
		// signal: killed") stay out of the log.
		hl.SetLevel(hclog.Off)
		run.kill()
		<-done // bounded by startTimeout at worst
		return nil, fmt.Errorf("start backend %s: %w: %w", cfg.Path, ctx.Err(), convert.ContextKind(ctx.Err()))
	}
	if res.err != nil {
		if time.Since(began) >= startTimeout {
			return nil, fmt.Errorf("start backend %s: no handshake in %s: %w: %w", cfg.Path, startTimeout, res.err, plugin.ErrTimeout)
		}
		// A plugin that died before its handshake leaves go-plugin with an
		// empty stdout ("Unrecognized remote plugin message"): how it
		// ended says more.
		if how, ok := run.exitedEarly(goneWait); ok {
			return nil, fmt.Errorf("start backend %s: it exited before its handshake (%s): %w", cfg.Path, how, plugin.ErrBackendGone)
		}
		return nil, fmt.Errorf("start backend %s: %w", cfg.Path, res.err)
	}
	raw, err := res.proto.Dispense(PluginName)
	if err != nil {
		return nil, fmt.Errorf("start backend %s: dispense: %w", cfg.Path, err)
	}
	c.backend = service.NewBackend(raw.(rmv1.ResourceManagerServiceClient), c.gone)
	info, err := c.backend.GetInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("start backend %s: %w", cfg.Path, err)
	}
	c.info = info
	cfg.Logger.Debug().Str("path", cfg.Path).Str("pid", run.ID()).Str("backend", info.Name).
		Str("version", info.Version).Strs("capabilities", info.Capabilities).
		Dur("elapsed", time.Since(began)).Msg("backend started")
	return c, nil
}

// Backend returns the plugin's backend. Calls fail with an error wrapping
// plugin.ErrBackendGone once the plugin exited or Close was called.
func (c *Client) Backend() plugin.Full { return c.backend }

// Info returns what the plugin's GetInfo answered in Start.
func (c *Client) Info() *plugin.BackendInfo {
	cp := *c.info
	cp.APIVersions = append([]string(nil), c.info.APIVersions...)
	cp.Capabilities = append([]string(nil), c.info.Capabilities...)
	return &cp
}

// Exited is closed when the plugin process has exited, whatever the cause.
func (c *Client) Exited() <-chan struct{} { return c.run.exited }

// Close shuts the plugin down: go-plugin asks it to stop, and if it has
// not exited after a short grace period it is killed. It waits for the
// plugin's last log lines. It can be called many times; later calls return
// the first one's result.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		cleaned := make(chan struct{})
		go func() {
			c.gp.Kill()
			close(cleaned)
		}()
		timer := time.NewTimer(closeGrace)
		defer timer.Stop()
		if c.run.ID() != "" {
			select {
			case <-c.run.exited:
			case <-timer.C:
				// go-plugin's graceful path has no bound while the plugin
				// does not answer its shutdown call.
				c.run.kill()
			}
		}
		timer.Reset(cleanupGrace)
		select {
		case <-cleaned:
		case <-timer.C:
			// Something else holds the plugin's stdout or stderr open (a
			// child of the plugin); stop reading them.
			c.run.closePipes()
			c.closeErr = fmt.Errorf("close backend %s: output still open %s after exit", c.name, cleanupGrace)
		}
	})
	return c.closeErr
}

// gone is the backend's check: after the process exited or Close, every call
// fails with ErrBackendGone.
func (c *Client) gone(wait bool) error {
	if wait {
		t := time.NewTimer(goneWait)
		defer t.Stop()
		select {
		case <-c.run.exited:
		case <-c.closed:
		case <-t.C:
		}
	}
	select {
	case <-c.run.exited:
		if c.run.waitErr != nil {
			return fmt.Errorf("backend %s exited (%v): %w", c.name, c.run.waitErr, plugin.ErrBackendGone)
		}
		return fmt.Errorf("backend %s exited: %w", c.name, plugin.ErrBackendGone)
	default:
	}
	select {
	case <-c.closed:
		return fmt.Errorf("backend %s closed: %w", c.name, plugin.ErrBackendGone)
	default:
	}
	return nil
}
