package serve

import (
	"errors"
	"fmt"
)

// Exit statuses of gopmi-shim, and how `gopmi run` judges a job it
// served itself. The step daemon reads them to tell what happened; the
// shim's last log line gives the details.
const (
	// ExitOK: every local task finalized, or closed its connection
	// cleanly.
	ExitOK = 0
	// ExitInternal: a failure of the shim itself.
	ExitInternal = 1
	// ExitUsage: the bootstrap message or the inherited fds are wrong.
	ExitUsage = 2
	// ExitBackend: the backend plugin could not be started or configured,
	// or it died during the job.
	ExitBackend = 3
	// ExitJobFailed: the job failed: a task ended before finalize, a fence
	// could not complete, the shim was told to stop.
	ExitJobFailed = 4
	// ExitAborted: a task aborted the job (PMI abort). The abort's own
	// status went to the backend, which ends the job with it.
	ExitAborted = 5
)

// Errors a host of the serving loop returns, wrapped with the details;
// ExitCode maps them to the Exit* statuses.
var (
	// ErrUsage: the bootstrap message or the inherited fds are wrong.
	ErrUsage = errors.New("bad bootstrap")
	// ErrBackend: the backend failed to start, to configure, or died.
	ErrBackend = errors.New("backend failed")
	// ErrJobFailed: the job failed on this node.
	ErrJobFailed = errors.New("job failed")
	// ErrJobAborted: a task aborted the job.
	ErrJobAborted = errors.New("job aborted")
)

// ExitCode returns the exit status for an error returned by Wait, or by
// a host that failed before it could serve.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrBackend):
		return ExitBackend
	case errors.Is(err, ErrJobAborted):
		return ExitAborted
	case errors.Is(err, ErrJobFailed):
		return ExitJobFailed
	default:
		return ExitInternal
	}
}

// FieldError is a bootstrap error about one field, named by its path in
// the message (e.g. "tasks[2].fd_name").
type FieldError struct {
	Field string // protojson path of the field, e.g. "job.nodes[1].ranks"
	Msg   string // what is wrong with it
}

// Error formats the error as "bad bootstrap: <field>: <msg>".
func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrUsage, e.Field, e.Msg)
}

// Unwrap makes errors.Is(err, ErrUsage) hold.
func (e *FieldError) Unwrap() error { return ErrUsage }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
