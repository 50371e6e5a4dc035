package grpcplugin

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/hclogzero"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/service"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// HCLogTimeFormat is the @timestamp format go-plugin parses in a plugin's
// JSON log lines.
const HCLogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// ServeOption configures Serve.
type ServeOption = direct.ServeOption

// WithLogger sets the logger. It must write to the process's stderr (Serve
// sets zerolog's field names so the host re-levels its lines); the default
// writes JSON to stderr at the level the host passed in EnvLogLevel.
func WithLogger(l zerolog.Logger) ServeOption { return direct.WithLogger(l) }

// WithMaxMessageSize bounds one gRPC message in either direction (default
// DefaultMaxMessageSize). The host's limit must be at least as large.
func WithMaxMessageSize(n int) ServeOption { return direct.WithMaxMessageSize(n) }

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
	cfg := direct.ResolveOptions(opts)
	zerolog.LevelFieldName = "@level"
	zerolog.MessageFieldName = "@message"
	zerolog.TimestampFieldName = "@timestamp"
	zerolog.TimeFieldFormat = HCLogTimeFormat
	var log zerolog.Logger
	if cfg.Logger != nil {
		log = *cfg.Logger
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
			return grpc.NewServer(append(o, cfg.ServerOptions(log)...)...)
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
	rmv1.RegisterResourceManagerServiceServer(s, service.NewServer(p.backend))
	return nil
}

// GRPCClient returns the generated client on go-plugin's connection.
func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return rmv1.NewResourceManagerServiceClient(cc), nil
}
