package direct

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/service"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// DefaultMaxMessageSize bounds one gRPC message in either direction unless
// an option says otherwise: at scale a fence's collected data is hundreds
// of MiB.
const DefaultMaxMessageSize = 512 << 20

// window is the HTTP/2 flow-control window of every stream and link, at
// both ends. gRPC's default starts at 64 KiB and grows it only as it
// measures the link: a fence's answer of a 128-rank job under Slurm
// (200 KiB) waited on the way for the reader's window updates, each a
// wake-up of a process on a busy node. From the coordinator to a node it
// took 3.3-12.2 ms, and 2.4-10.5 with this window (6 runs each; most of
// the rest was the collector, see shim/serve's gc.go). It is a credit,
// not a buffer: nothing is allocated for it.
const window = 4 << 20

// DefaultGracePeriod is how long Serve lets running calls finish after its
// context ends, and then how long it waits for the calls it cancelled to
// return.
const DefaultGracePeriod = 5 * time.Second

// healthService is the name Serve reports SERVING for besides "": the one
// go-plugin's host checks, so one Dial works for both kinds of server.
const healthService = "plugin"

// ServeOption configures Serve (and grpcplugin.Serve).
type ServeOption func(*Options)

// Options are the resolved ServeOptions.
type Options struct {
	// Logger is the serving logger; nil leaves the choice to the server
	// (Serve discards).
	Logger *zerolog.Logger
	// MaxMessageSize bounds one message in either direction.
	MaxMessageSize int
	// GracePeriod is how long Serve waits for running calls when its
	// context ends.
	GracePeriod time.Duration
	// Services are served besides ResourceManagerService (Serve only).
	Services []Service
}

// Service is a gRPC service served on the same listener as the backend:
// its description (from the generated code) and its implementation.
type Service struct {
	Desc *grpc.ServiceDesc
	Impl any
}

// ResolveOptions applies opts to the defaults.
func ResolveOptions(opts []ServeOption) Options {
	o := Options{MaxMessageSize: DefaultMaxMessageSize, GracePeriod: DefaultGracePeriod}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithLogger sets the serving logger: every call finds it with
// zerolog.Ctx(ctx), and calls are logged at trace level, failures at
// debug.
func WithLogger(l zerolog.Logger) ServeOption {
	return func(o *Options) { o.Logger = &l }
}

// WithMaxMessageSize bounds one gRPC message in either direction (default
// DefaultMaxMessageSize). The caller's limit must be at least as large.
func WithMaxMessageSize(n int) ServeOption {
	return func(o *Options) {
		if n > 0 {
			o.MaxMessageSize = n
		}
	}
}

// WithGracePeriod sets how long Serve waits for running calls when its
// context ends (default DefaultGracePeriod).
func WithGracePeriod(d time.Duration) ServeOption {
	return func(o *Options) {
		if d > 0 {
			o.GracePeriod = d
		}
	}
}

// WithService serves a service of the caller's own besides the backend,
// on the same listener and link (Serve only): what the processes behind
// one link tell each other that is no call of the contract. Its handlers
// return errors through Status; its callers read them with CallError.
func WithService(desc *grpc.ServiceDesc, impl any) ServeOption {
	return func(o *Options) { o.Services = append(o.Services, Service{Desc: desc, Impl: impl}) }
}

// Status is what a handler of a WithService service returns for err: the
// status a backend's error travels in, so that CallError on the calling
// side gives back its kind and message.
func Status(err error) error { return convert.ToStatus(err) }

// CallError is what a call of a WithService service returned, as the
// caller sees a backend's errors: the remote error's kind and message,
// or the link's failure (plugin.ErrBackendGone, plugin.ErrUnavailable).
// op names the call for messages made here.
func CallError(ctx context.Context, op string, err error) error {
	return convert.FromCallError(ctx, op, err)
}

// ServerOptions are the grpc.Server options the service needs: the message
// limits, and log in every call's context.
func (o Options) ServerOptions(log zerolog.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(o.MaxMessageSize),
		grpc.MaxSendMsgSize(o.MaxMessageSize),
		grpc.ChainUnaryInterceptor(service.LogCalls(log)),
	}
}

// Serve serves b as ResourceManagerService on l, for a backend that lives
// in a long-running process and is reached by Dial. It also serves the
// gRPC health service ("" and "plugin" SERVING). It returns nil when ctx
// ends, after letting running calls finish for the grace period and then
// cancelling the rest, or an error if serving failed. It closes l.
func Serve(ctx context.Context, l net.Listener, b plugin.Backend, opts ...ServeOption) error {
	o := ResolveOptions(opts)
	log := zerolog.Nop()
	if o.Logger != nil {
		log = *o.Logger
	}
	// Stop then waits for handlers, so a backend that honours its context
	// leaves no goroutine behind.
	srv := grpc.NewServer(append(o.ServerOptions(log), grpc.WaitForHandlers(true), grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(window))...)
	hs := health.NewServer()
	hs.SetServingStatus(healthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	rmv1.RegisterResourceManagerServiceServer(srv, service.NewServer(b))
	for _, sv := range o.Services {
		srv.RegisterService(sv.Desc, sv.Impl)
	}

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
	timer := time.NewTimer(o.GracePeriod)
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
		timer.Reset(o.GracePeriod)
		for stopped != nil || killed != nil {
			select {
			case <-stopped:
				stopped = nil
			case <-killed:
				killed = nil
			case <-timer.C:
				return fmt.Errorf("stop rm backend on %s: calls still running %s after they were cancelled", l.Addr(), o.GracePeriod)
			}
		}
	}
	<-served
	return nil
}
