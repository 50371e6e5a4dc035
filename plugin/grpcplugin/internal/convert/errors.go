package convert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gopmi/gopmi/plugin"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the errors a gopmi
// backend returns; the reason then names the plugin sentinel.
const ErrorDomain = "gopmi.rm.v1"

// kind ties a plugin sentinel error to its gRPC code and ErrorInfo reason.
type kind struct {
	err    error
	code   codes.Code
	reason string
}

// kinds is the mapping both directions use. ErrBackendGone is absent on
// purpose: a backend never sends it (its upstream being gone is, to the
// host, ErrUnavailable), and the host produces it only from the state of
// its connection.
var kinds = []kind{
	{plugin.ErrNotSupported, codes.Unimplemented, "NOT_SUPPORTED"},
	{plugin.ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{plugin.ErrAlreadyExists, codes.AlreadyExists, "ALREADY_EXISTS"},
	{plugin.ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{plugin.ErrTimeout, codes.DeadlineExceeded, "TIMEOUT"},
	{plugin.ErrAborted, codes.Aborted, "ABORTED"},
	{plugin.ErrPermission, codes.PermissionDenied, "PERMISSION_DENIED"},
	{plugin.ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
}

const reasonUnknown = "UNKNOWN"

// Error is an error that crossed the wire. Its message is the remote
// side's message, unchanged, and it unwraps to the plugin sentinel its code
// or reason names, so errors.Is works on the calling side. It keeps its gRPC
// status, so a process that forwards it to its own caller (a per-node
// plugin in front of a daemon) sends the same code and message on.
type Error struct {
	msg  string
	code codes.Code
	kind error // a plugin sentinel, or nil
	// ctxErr is the caller's context error when its context had ended by
	// the time the backend's answer came: the backend saw the same
	// deadline, and the caller may test for either.
	ctxErr error
	// answered: the backend itself returned it (the status carries the
	// gopmi ErrorInfo), as opposed to a broken or never-made connection.
	answered bool
}

// Answered reports whether the backend itself returned the error: the
// call reached it and it answered, whatever the error's kind.
func (e *Error) Answered() bool { return e.answered }

// Error returns the remote message.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the plugin sentinel and the caller's context error, if
// any.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// GRPCStatus returns the status the error came in.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

// ToStatus turns a backend's error into the status the server returns. The
// message is err.Error() unchanged; the code and the ErrorInfo reason come
// from the first plugin sentinel err wraps. Context errors (the call's own
// deadline or cancellation reaching the backend) map to ErrTimeout and
// ErrAborted. ToStatus(nil) is nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	code, reason := codes.Unknown, reasonUnknown
	if k, ok := kindOf(sentinel(err)); ok {
		code, reason = k.code, k.reason
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	st := status.New(code, err.Error())
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Domain: ErrorDomain, Reason: reason}); derr == nil {
		st = withInfo
	}
	return st.Err()
}

// sentinel is the plugin sentinel err travels as, or nil.
func sentinel(err error) error {
	if errors.Is(err, plugin.ErrBackendGone) {
		// Checked first: an error wrapping both gone and something else is
		// about the backend's own upstream, which to our caller is
		// unavailability, not the death of the process it talks to.
		return plugin.ErrUnavailable
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.err
		}
	}
	return ContextKind(err)
}

// ContextKind is the plugin sentinel a context error stands for:
// ErrTimeout for a passed deadline, ErrAborted for a cancellation, nil for
// any other error.
func ContextKind(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return plugin.ErrTimeout
	case errors.Is(err, context.Canceled):
		return plugin.ErrAborted
	}
	return nil
}

// FromCallError turns what a gRPC call to a backend returned into the error
// the host sees. op names the call for messages the host side writes
// itself ("fence", "direct modex").
//
// In order: a status with a gopmi ErrorInfo is the backend's own error and
// keeps its message and reason; otherwise, if ctx ended, the host's own
// deadline or cancellation is the cause (ErrTimeout, ErrAborted, and the
// context error itself); otherwise a bare UNAVAILABLE is a broken
// connection (ErrBackendGone); otherwise the code alone picks the
// sentinel (a non-Go backend that attaches no detail).
func FromCallError(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		// Not from gRPC at all (an interceptor, a closed client).
		return fmt.Errorf("%s: %w", op, err)
	}
	cerr := ctxErr(ctx)
	if reason, ok := reasonOf(st); ok {
		e := newError(op, st.Message(), st.Code(), kindOfReason(reason))
		e.ctxErr = cerr
		e.answered = true
		return e
	}
	if cerr != nil {
		return fmt.Errorf("%s: %w: %w", op, cerr, ContextKind(cerr))
	}
	if st.Code() == codes.Unavailable {
		return fmt.Errorf("%s: %s: %w", op, st.Message(), plugin.ErrBackendGone)
	}
	// No gopmi detail: gRPC's own error (a message over the size limit) or
	// a backend that attaches none. Name the call unless the message
	// already starts with it.
	msg := st.Message()
	if msg != "" && !strings.HasPrefix(msg, op) {
		msg = op + ": " + msg
	}
	return newError(op, msg, st.Code(), kindOfCode(st.Code()))
}

// ctxErr is ctx.Err(), or DeadlineExceeded once the deadline has passed
// even if the context's timer has not fired yet: gRPC's own deadline
// handling (here and in the backend, which got the deadline in the
// request) can beat it by microseconds.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// newError keeps a backend's message as is: it already names its step and
// ends with the sentinel's text, so adding op or the code would only
// repeat them. Only an empty message gets a made-up one.
func newError(op, msg string, code codes.Code, kind error) *Error {
	if msg == "" {
		msg = op + ": backend error " + code.String()
		if kind != nil {
			msg += ": " + kind.Error()
		}
	}
	return &Error{msg: msg, code: code, kind: kind}
}

func reasonOf(st *status.Status) (string, bool) {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason(), true
		}
	}
	return "", false
}

func kindOfReason(reason string) error {
	for _, k := range kinds {
		if k.reason == reason {
			return k.err
		}
	}
	return nil
}

func kindOf(err error) (kind, bool) {
	for _, k := range kinds {
		if k.err == err {
			return k, true
		}
	}
	return kind{}, false
}

// kindOfCode reads a status without a gopmi detail. CANCELLED is not in
// kinds (no sentinel is sent as it) but means the remote side gave up on
// the call: ErrAborted.
func kindOfCode(code codes.Code) error {
	if code == codes.Canceled {
		return plugin.ErrAborted
	}
	for _, k := range kinds {
		if k.code == code {
			return k.err
		}
	}
	return nil
}

// FromBackend reports whether err is a status a gopmi backend produced
// (one carrying the gopmi ErrorInfo), as opposed to one made by the gRPC
// machinery or a backend that attaches no detail.
func FromBackend(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	_, ok = reasonOf(st)
	return ok
}
