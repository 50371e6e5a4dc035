package service

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gopmi/gopmi/plugin"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// server serves a plugin.Backend as ResourceManagerService. Optional calls
// go through plugin.Complete, so a backend that lacks an optional interface
// answers ErrNotSupported, which travels as codes.Unimplemented. Its
// methods, one per RPC, are generated (server_gen.go).
type server struct {
	rmv1.UnimplementedResourceManagerServiceServer
	b plugin.Full
}

var _ rmv1.ResourceManagerServiceServer = (*server)(nil)

// NewServer is the backend's side of the service: b served as
// ResourceManagerService. Register it on a grpc.Server made with
// Options.ServerOptions.
func NewServer(b plugin.Backend) rmv1.ResourceManagerServiceServer {
	return &server{b: plugin.Complete(b)}
}

// LogCalls puts the serving logger in every call's context, where a
// backend finds it with zerolog.Ctx(ctx), and logs every call at trace
// level and every failure at debug: the host logs what matters to users,
// the backend's side is for debugging it.
func LogCalls(log zerolog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(log.WithContext(ctx), req)
		if err != nil {
			log.Debug().Str("method", info.FullMethod).Dur("elapsed", time.Since(start)).Err(err).Msg("rm call failed")
		} else {
			log.Trace().Str("method", info.FullMethod).Dur("elapsed", time.Since(start)).Msg("rm call")
		}
		return resp, err
	}
}
