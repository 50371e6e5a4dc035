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
// service, and converts the answer or the error back. Its methods, one
// per contract method, are generated (remote_gen.go).
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
