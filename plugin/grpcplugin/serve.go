package grpcplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/hclogzero"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// HCLogTimeFormat is the @timestamp format go-plugin parses in a plugin's
// JSON log lines.
const HCLogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// DefaultGracePeriod is how long ServeListener lets running calls finish
// after its context ends, and then how long it waits for the calls it
// cancelled to return.
const DefaultGracePeriod = 5 * time.Second

// ServeOption configures Serve and ServeListener.
type ServeOption func(*serveConfig)

type serveConfig struct {
	logger *zerolog.Logger
	maxMsg int
	grace  time.Duration
}

func newServeConfig(opts []ServeOption) serveConfig {
	cfg := serveConfig{maxMsg: DefaultMaxMessageSize, grace: DefaultGracePeriod}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// WithLogger sets the logger. For Serve it must write to the process's
// stderr (Serve sets zerolog's field names so the host re-levels its
// lines); the default writes JSON to stderr at the level the host passed
// in EnvLogLevel. For ServeListener the default discards.
func WithLogger(l zerolog.Logger) ServeOption {
	return func(c *serveConfig) { c.logger = &l }
}

// WithMaxMessageSize bounds one gRPC message in either direction (default
// DefaultMaxMessageSize). The host's limit must be at least as large.
func WithMaxMessageSize(n int) ServeOption {
	return func(c *serveConfig) {
		if n > 0 {
			c.maxMsg = n
		}
	}
}

// WithGracePeriod sets how long ServeListener waits for running calls when
// its context ends (default DefaultGracePeriod).
func WithGracePeriod(d time.Duration) ServeOption {
	return func(c *serveConfig) {
		if d > 0 {
			c.grace = d
		}
	}
}

func (c serveConfig) serverOptions(log zerolog.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(c.maxMsg),
		grpc.MaxSendMsgSize(c.maxMsg),
		grpc.ChainUnaryInterceptor(logCalls(log)),
	}
}

// Serve runs b as a go-plugin backend plugin and returns when the host
// shuts it down. It is a backend binary's whole main:
//
//	func main() { grpcplugin.Serve(mybackend.New()) }
//
// It speaks gRPC only and ignores SIGPIPE, so a log line written after the
// host went away does not kill the plugin. It sets zerolog's global field
// names to hclog's (@level, @message, @timestamp with HCLogTimeFormat), so
// that every zerolog logger in the process that writes to stderr produces
// lines the host re-logs at their level. Run by hand (without the magic
// cookie in its environment) it prints a notice and exits with status 1.
//
// Once serving, os.Stderr is a pipe of go-plugin's whose output the host
// drops: a backend logs through zerolog.Ctx(ctx), which holds Serve's
// logger in every call, or through a logger it made before calling Serve.
func Serve(b plugin.Backend, opts ...ServeOption) {
	signal.Ignore(syscall.SIGPIPE)
	cfg := newServeConfig(opts)
	zerolog.LevelFieldName = "@level"
	zerolog.MessageFieldName = "@message"
	zerolog.TimestampFieldName = "@timestamp"
	zerolog.TimeFieldFormat = HCLogTimeFormat
	var log zerolog.Logger
	if cfg.logger != nil {
		log = *cfg.logger
	} else {
		// go-plugin swaps os.Stderr for a pipe of its own once serving; the
		// host re-levels only what reaches the real stderr, so the logger
		// keeps the file it has now.
		log = zerolog.New(os.Stderr).Level(levelFromEnv()).With().Timestamp().Logger()
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{PluginName: &grpcPlugin{backend: b}},
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(o, cfg.serverOptions(log)...)...)
		},
		Logger: hclogzero.New(log),
	})
}

func levelFromEnv() zerolog.Level {
	if lv, err := zerolog.ParseLevel(os.Getenv(EnvLogLevel)); err == nil && lv != zerolog.NoLevel {
		return lv
	}
	return zerolog.InfoLevel
}

// grpcPlugin is the go-plugin adapter: the plugin side registers the
// service, the host side dispenses its raw client (Start wraps it).
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	backend plugin.Backend
}

// GRPCServer registers ResourceManagerService on go-plugin's server.
func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	rmv1.RegisterResourceManagerServiceServer(s, newServer(p.backend))
	return nil
}

// GRPCClient returns the generated client on go-plugin's connection.
func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return rmv1.NewResourceManagerServiceClient(cc), nil
}

// ServeListener serves b as ResourceManagerService on l, without
// go-plugin: for a backend that lives in a daemon and is reached by Dial.
// It also serves the gRPC health service ("" and "plugin" SERVING). It
// returns nil when ctx ends, after letting running calls finish for the
// grace period and then cancelling the rest, or an error if serving
// failed. It closes l.
func ServeListener(ctx context.Context, l net.Listener, b plugin.Backend, opts ...ServeOption) error {
	cfg := newServeConfig(opts)
	log := zerolog.Nop()
	if cfg.logger != nil {
		log = *cfg.logger
	}
	// Stop then waits for handlers, so a backend that honours its context
	// leaves no goroutine behind. (Not in Serve: go-plugin's shutdown call
	// stops the server from inside a handler.)
	srv := grpc.NewServer(append(cfg.serverOptions(log), grpc.WaitForHandlers(true))...)
	hs := health.NewServer()
	hs.SetServingStatus(goplugin.GRPCServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	rmv1.RegisterResourceManagerServiceServer(srv, newServer(b))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		srv.Stop()
		if err == nil || errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return fmt.Errorf("serve rm backend on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(cfg.grace)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		// Stop cancels the calls still running and waits for their
		// handlers (WaitForHandlers), which a backend honouring its context
		// ends quickly. One that does not gets a second grace period, and
		// then is left behind.
		killed := make(chan struct{})
		go func() {
			srv.Stop()
			close(killed)
		}()
		timer.Reset(cfg.grace)
		for stopped != nil || killed != nil {
			select {
			case <-stopped:
				stopped = nil
			case <-killed:
				killed = nil
			case <-timer.C:
				return fmt.Errorf("stop rm backend on %s: calls still running %s after they were cancelled", l.Addr(), cfg.grace)
			}
		}
	}
	<-served
	return nil
}
