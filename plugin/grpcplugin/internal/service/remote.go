package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// remote is the host's plugin.Full: every call converts, calls the
// service, and converts the answer or the error back.
type remote struct {
	c rmv1.ResourceManagerServiceClient
	// gone reports, wrapping plugin.ErrBackendGone, that the backend can no
	// longer answer (process exited, connection closed by the host), or
	// nil. With wait set it may wait briefly for the process's exit to be
	// seen, so the message can carry its exit status.
	gone func(wait bool) error
}

var _ plugin.Full = (*remote)(nil)

// NewBackend is the host's side of the service on c: a plugin.Full whose
// every call converts its request, calls the service and converts the
// answer or the error back (errors.Is holds for the backend's sentinel).
// gone reports, wrapping plugin.ErrBackendGone, that the backend can no
// longer answer (its process exited, the host closed the connection), or
// nil; with wait set it may wait briefly for the process's exit to be
// seen, so the message can carry its exit status. Calls fail at once
// while gone says so, and a call that failed without an answer from the
// backend reports gone's reason when there is one.
func NewBackend(c rmv1.ResourceManagerServiceClient, gone func(wait bool) error) plugin.Full {
	return &remote{c: c, gone: gone}
}

// call is the shape of every host-side call. A backend known to be gone
// fails at once; otherwise the caller's ctx is the only bound.
func call[Req, Resp any](ctx context.Context, r *remote, op string, req Req,
	f func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	if err := r.gone(false); err != nil {
		return zero, fmt.Errorf("%s: %w", op, err)
	}
	resp, err := f(ctx, req)
	if err != nil {
		return zero, r.fail(ctx, op, err)
	}
	return resp, nil
}

func (r *remote) fail(ctx context.Context, op string, err error) error {
	out := convert.FromCallError(ctx, op, err)
	if convert.FromBackend(err) {
		// The backend answered: its error stands even if it died since.
		return out
	}
	// Without an answer, a backend known to be gone explains the failure
	// best (a Close racing with the call shows up as a cancellation).
	wait := errors.Is(out, plugin.ErrBackendGone)
	if g := r.gone(wait); g != nil {
		return fmt.Errorf("%s: %w", op, g)
	}
	return out
}

func (r *remote) GetInfo(ctx context.Context) (*plugin.BackendInfo, error) {
	resp, err := call(ctx, r, "get info", &rmv1.GetInfoRequest{}, r.c.GetInfo)
	if err != nil {
		return nil, err
	}
	return convert.FromGetInfoResponse(resp), nil
}

func (r *remote) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	resp, err := call(ctx, r, "configure", convert.ToConfigureRequest(req), r.c.Configure)
	if err != nil {
		return nil, err
	}
	return convert.FromConfigureResponse(resp), nil
}

func (r *remote) ClientConnected(ctx context.Context, req *plugin.ClientRequest) error {
	_, err := call(ctx, r, "client connected", convert.ToClientConnectedRequest(req), r.c.ClientConnected)
	return err
}

func (r *remote) ClientFinalized(ctx context.Context, req *plugin.ClientRequest) error {
	_, err := call(ctx, r, "client finalized", convert.ToClientFinalizedRequest(req), r.c.ClientFinalized)
	return err
}

func (r *remote) Abort(ctx context.Context, req *plugin.AbortRequest) error {
	_, err := call(ctx, r, "abort", convert.ToAbortRequest(req), r.c.Abort)
	return err
}

func (r *remote) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	resp, err := call(ctx, r, "fence", convert.ToFenceRequest(req), r.c.Fence)
	if err != nil {
		return nil, err
	}
	return convert.FromFenceResponse(resp), nil
}

func (r *remote) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	resp, err := call(ctx, r, "direct modex", convert.ToDirectModexRequest(req), r.c.DirectModex)
	if err != nil {
		return nil, err
	}
	return convert.FromDirectModexResponse(resp), nil
}

func (r *remote) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	_, err := call(ctx, r, "publish", convert.ToPublishRequest(req), r.c.Publish)
	return err
}

func (r *remote) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	resp, err := call(ctx, r, "lookup", convert.ToLookupRequest(req), r.c.Lookup)
	if err != nil {
		return nil, err
	}
	return convert.FromLookupResponse(resp), nil
}

func (r *remote) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	_, err := call(ctx, r, "unpublish", convert.ToUnpublishRequest(req), r.c.Unpublish)
	return err
}

func (r *remote) Spawn(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error) {
	resp, err := call(ctx, r, "spawn", convert.ToSpawnRequest(req), r.c.Spawn)
	if err != nil {
		return nil, err
	}
	return convert.FromSpawnResponse(resp), nil
}

func (r *remote) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	resp, err := call(ctx, r, "connect", convert.ToConnectRequest(req), r.c.Connect)
	if err != nil {
		return nil, err
	}
	return convert.FromConnectResponse(resp), nil
}

func (r *remote) Disconnect(ctx context.Context, req *plugin.DisconnectRequest) error {
	_, err := call(ctx, r, "disconnect", convert.ToDisconnectRequest(req), r.c.Disconnect)
	return err
}

func (r *remote) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	resp, err := call(ctx, r, "query", convert.ToQueryRequest(req), r.c.Query)
	if err != nil {
		return nil, err
	}
	return convert.FromQueryResponse(resp), nil
}

func (r *remote) Log(ctx context.Context, req *plugin.LogRequest) error {
	_, err := call(ctx, r, "log", convert.ToLogRequest(req), r.c.Log)
	return err
}

func (r *remote) NotifyEvent(ctx context.Context, req *plugin.EventRequest) error {
	_, err := call(ctx, r, "notify event", convert.ToNotifyEventRequest(req), r.c.NotifyEvent)
	return err
}
