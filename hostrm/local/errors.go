package local

import (
	"fmt"
	"time"
)

// kindError is an error whose message reads well on its own ("fence world/3
// of job X: ranks 4-7 (node vm-1) did not arrive in 30s") while errors.Is
// still finds the plugin sentinel it belongs to.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf builds a kindError: kind is a plugin sentinel, the message is
// formatted without it.
func errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// roundDuration keeps time-out messages short: "30s", "1.5s", "120ms".
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}
