package service

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// server serves a plugin.Backend as ResourceManagerService. Optional calls
// go through plugin.Complete, so a backend that lacks an optional interface
// answers ErrNotSupported, which travels as codes.Unimplemented.
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

func (s *server) GetInfo(ctx context.Context, _ *rmv1.GetInfoRequest) (*rmv1.GetInfoResponse, error) {
	info, err := s.b.GetInfo(ctx)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToGetInfoResponse(info), nil
}

func (s *server) Configure(ctx context.Context, req *rmv1.ConfigureRequest) (*rmv1.ConfigureResponse, error) {
	resp, err := s.b.Configure(ctx, convert.FromConfigureRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToConfigureResponse(resp), nil
}

func (s *server) ClientConnected(ctx context.Context, req *rmv1.ClientConnectedRequest) (*rmv1.ClientConnectedResponse, error) {
	if err := s.b.ClientConnected(ctx, convert.FromClientConnectedRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.ClientConnectedResponse{}, nil
}

func (s *server) ClientFinalized(ctx context.Context, req *rmv1.ClientFinalizedRequest) (*rmv1.ClientFinalizedResponse, error) {
	if err := s.b.ClientFinalized(ctx, convert.FromClientFinalizedRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.ClientFinalizedResponse{}, nil
}

func (s *server) Abort(ctx context.Context, req *rmv1.AbortRequest) (*rmv1.AbortResponse, error) {
	if err := s.b.Abort(ctx, convert.FromAbortRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.AbortResponse{}, nil
}

func (s *server) Fence(ctx context.Context, req *rmv1.FenceRequest) (*rmv1.FenceResponse, error) {
	resp, err := s.b.Fence(ctx, convert.FromFenceRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToFenceResponse(resp), nil
}

func (s *server) DirectModex(ctx context.Context, req *rmv1.DirectModexRequest) (*rmv1.DirectModexResponse, error) {
	resp, err := s.b.DirectModex(ctx, convert.FromDirectModexRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToDirectModexResponse(resp), nil
}

func (s *server) Publish(ctx context.Context, req *rmv1.PublishRequest) (*rmv1.PublishResponse, error) {
	if err := s.b.Publish(ctx, convert.FromPublishRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.PublishResponse{}, nil
}

func (s *server) Lookup(ctx context.Context, req *rmv1.LookupRequest) (*rmv1.LookupResponse, error) {
	resp, err := s.b.Lookup(ctx, convert.FromLookupRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToLookupResponse(resp), nil
}

func (s *server) Unpublish(ctx context.Context, req *rmv1.UnpublishRequest) (*rmv1.UnpublishResponse, error) {
	if err := s.b.Unpublish(ctx, convert.FromUnpublishRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.UnpublishResponse{}, nil
}

func (s *server) Spawn(ctx context.Context, req *rmv1.SpawnRequest) (*rmv1.SpawnResponse, error) {
	resp, err := s.b.Spawn(ctx, convert.FromSpawnRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToSpawnResponse(resp), nil
}

func (s *server) Connect(ctx context.Context, req *rmv1.ConnectRequest) (*rmv1.ConnectResponse, error) {
	resp, err := s.b.Connect(ctx, convert.FromConnectRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToConnectResponse(resp), nil
}

func (s *server) Disconnect(ctx context.Context, req *rmv1.DisconnectRequest) (*rmv1.DisconnectResponse, error) {
	if err := s.b.Disconnect(ctx, convert.FromDisconnectRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.DisconnectResponse{}, nil
}

func (s *server) Query(ctx context.Context, req *rmv1.QueryRequest) (*rmv1.QueryResponse, error) {
	resp, err := s.b.Query(ctx, convert.FromQueryRequest(req))
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return convert.ToQueryResponse(resp), nil
}

func (s *server) Log(ctx context.Context, req *rmv1.LogRequest) (*rmv1.LogResponse, error) {
	if err := s.b.Log(ctx, convert.FromLogRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.LogResponse{}, nil
}

func (s *server) NotifyEvent(ctx context.Context, req *rmv1.NotifyEventRequest) (*rmv1.NotifyEventResponse, error) {
	if err := s.b.NotifyEvent(ctx, convert.FromNotifyEventRequest(req)); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &rmv1.NotifyEventResponse{}, nil
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
