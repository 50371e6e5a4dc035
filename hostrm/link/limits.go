package link

import (
	"bufio"
	"context"
	"errors"
	"fmt"
)

// Limits bound what one connection's caller may make a server hold
// (ServeConnLimited); the zero value bounds nothing. A server that serves
// callers it does not trust (the node daemon serves every user of its
// node) sets them: a frame that never ends, or calls that never end,
// would otherwise take its memory.
type Limits struct {
	// MaxFrame is the largest request frame, in bytes, its newline
	// included; a longer one closes the connection. 0: no bound.
	MaxFrame int
	// Budget, when set, is asked once per connection, with the
	// connection's context (connCtx's), for what bounds its caller across
	// all its connections; nil from it bounds nothing.
	Budget func(ctx context.Context) Budget
	// Refused, when set, is told why a connection was closed (a frame over
	// MaxFrame, or over the budget's bytes), for the server's log.
	Refused func(ctx context.Context, err error)
}

// Budget is what one caller may hold at once across its connections:
// bytes of frames read whose calls are not answered yet, and calls in
// flight. Its methods are called from every connection of the caller at
// once.
type Budget interface {
	// TakeBytes charges n bytes of a frame being read; an error refuses
	// them, and the connection closes.
	TakeBytes(n int) error
	// FreeBytes gives n back.
	FreeBytes(n int)
	// TakeCall charges one call in flight; an error answers the call
	// with it.
	TakeCall() error
	// FreeCall gives one back.
	FreeCall()
}

// ErrFrameTooLarge is why a connection whose caller sent a frame over
// Limits.MaxFrame was closed.
var ErrFrameTooLarge = errors.New("link: a frame over the server's limit")

// frameBuffer is a connection's read buffer: frames longer than it are
// read in pieces of it.
const frameBuffer = 32 << 10

// refusal is a frame the limits refused, as opposed to a connection that
// ended.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }
func (r refusal) Unwrap() error { return r.err }

// frameReader reads a connection's frames, one JSON value to a line as
// json.Encoder writes them, each bounded by the limits.
type frameReader struct {
	r      *bufio.Reader
	max    int
	budget Budget // nil: none
}

// next returns the next frame, its bytes charged to the budget (the
// caller frees them); on an error nothing is left charged.
func (f *frameReader) next() ([]byte, error) {
	var frame []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(chunk) > 0 {
			if f.max > 0 && len(frame)+len(chunk) > f.max {
				f.free(len(frame))
				return nil, refusal{fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, f.max)}
			}
			if f.budget != nil {
				if berr := f.budget.TakeBytes(len(chunk)); berr != nil {
					f.free(len(frame))
					return nil, refusal{berr}
				}
			}
			frame = append(frame, chunk...)
		}
		switch {
		case err == nil:
			return frame, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			f.free(len(frame))
			return nil, err
		}
	}
}

func (f *frameReader) free(n int) {
	if f.budget != nil && n > 0 {
		f.budget.FreeBytes(n)
	}
}
