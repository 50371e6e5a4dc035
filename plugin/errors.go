package plugin

import "errors"

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
