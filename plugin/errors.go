package plugin

import (
	"errors"
	"fmt"
)

// Sentinel errors a backend returns (wrapped with %w and a message that names
// the failed step). They survive the process boundary: grpcplugin maps each to
// a gRPC status code and back, so errors.Is works in the shim.
var (
	// ErrNotSupported: the backend does not implement this call or an
	// option of it (a spawn info key, a publish range).
	ErrNotSupported = errors.New("not supported")
	// ErrNotFound: no such key, name, job or process.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a name is already published in the range.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalidArgument: the request is malformed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTimeout: the operation did not complete before its deadline; the
	// message names who did not arrive.
	ErrTimeout = errors.New("timed out")
	// ErrAborted: the job was aborted or the operation cancelled.
	ErrAborted = errors.New("aborted")
	// ErrPermission: the caller may not do this.
	ErrPermission = errors.New("permission denied")
	// ErrUnavailable: the backend cannot reach what it needs (a peer node,
	// the RM's controller) right now.
	ErrUnavailable = errors.New("unavailable")
	// ErrBackendGone: the backend process died or its connection broke. The
	// host side produces it; a backend never returns it.
	ErrBackendGone = errors.New("backend gone")
)

// sentinels are the Err* errors, in the order KindOf looks for them.
var sentinels = []error{ErrNotSupported, ErrNotFound, ErrAlreadyExists, ErrInvalidArgument,
	ErrTimeout, ErrAborted, ErrPermission, ErrUnavailable, ErrBackendGone}

// Kinds returns every Err* sentinel, for a transport that names them on
// the wire.
func Kinds() []error { return append([]error(nil), sentinels...) }

// KindOf returns the Err* sentinel err wraps (the first, in the order
// they are declared), or nil when it wraps none: what a transport carries
// across a process boundary for errors.Is to hold on the other side.
func KindOf(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// kindError is an error whose message reads well on its own ("fence
// world/3 of job X: ranks 4-7 (node vm-1) did not arrive in 30s") while
// errors.Is still finds the sentinel it belongs to.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Errorf returns an error of kind (one of the Err* sentinels) whose
// message is the formatted text alone: errors.Is(err, kind) holds, and
// the message does not end in the sentinel's own words.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Wrapf prefixes err's message with the formatted text and keeps err's
// sentinel for errors.Is; an err without one gets kind.
func Wrapf(err, kind error, format string, args ...any) error {
	if k := KindOf(err); k != nil {
		kind = k
	}
	return &kindError{msg: fmt.Sprintf(format, args...) + ": " + err.Error(), kind: kind}
}
