package link

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// handler decodes a call's request, makes the call and encodes its answer.
type handler func(ctx context.Context, be plugin.Full, req json.RawMessage) (any, error)

// method makes the handler of a call that answers a response.
func method[Req, Resp any](f func(plugin.Full, context.Context, *Req) (*Resp, error)) handler {
	return func(ctx context.Context, be plugin.Full, raw json.RawMessage) (any, error) {
		req := new(Req)
		if err := json.Unmarshal(raw, req); err != nil {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "decode request: %v", err)
		}
		return f(be, ctx, req)
	}
}

// noRequest makes the handler of a call without a request.
func noRequest[Resp any](f func(plugin.Full, context.Context) (*Resp, error)) handler {
	return func(ctx context.Context, be plugin.Full, _ json.RawMessage) (any, error) {
		return f(be, ctx)
	}
}

// notice makes the handler of a call that answers only an error.
func notice[Req any](f func(plugin.Full, context.Context, *Req) error) handler {
	return method(func(be plugin.Full, ctx context.Context, req *Req) (*struct{}, error) {
		return &struct{}{}, f(be, ctx, req)
	})
}

// Serve serves be on l until ctx ends, then closes l and every connection,
// cancels the calls in flight and waits for them. It returns nil after
// ctx ended, or the error that stopped it accepting.
func Serve(ctx context.Context, l net.Listener, be plugin.Full) error {
	return ServeConns(ctx, l, be, nil)
}

// ServeConns is Serve with connCtx, when not nil, deriving each
// connection's context, which every call on the connection gets and which
// ends when the connection does: a server learns there who called (the
// peer's credentials) and when the caller went away.
func ServeConns(ctx context.Context, l net.Listener, be plugin.Full, connCtx func(context.Context, net.Conn) context.Context) error {
	return Accept(ctx, l, func(ctx context.Context, c net.Conn) { ServeConn(ctx, c, be, connCtx) })
}

// Accept accepts connections on l and serves each with serve, on a
// goroutine of its own, until ctx ends or l fails; then it closes l, ends
// the context every serve got (serve must then return, and close its
// connection) and waits for them. A failed Accept that is not the end
// (out of file descriptors) is tried again soon, keeping the connections
// that work. It returns nil after ctx ended, else the error that stopped
// it accepting.
func Accept(ctx context.Context, l net.Listener, serve func(context.Context, net.Conn)) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("link: accept: %w", err)
			}
			select {
			case <-time.After(acceptBackoff):
			case <-ctx.Done():
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(ctx, c)
		}()
	}
}

// callSafely runs a handler; a panic in it fails that call, not the
// server, whose other callers (every run on a node, for the node daemon)
// are unaffected.
func callSafely(h handler, ctx context.Context, be plugin.Full, req json.RawMessage) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, fmt.Errorf("link: the call panicked: %v", r)
		}
	}()
	return h(ctx, be, req)
}

// ServeConn serves one connection: each call on a goroutine of its own,
// answers written whole under a lock, until the caller closes it, it
// breaks or ctx ends; then the calls still running are cancelled and
// waited for, and c is closed. connCtx is as for ServeConns.
func ServeConn(ctx context.Context, c net.Conn, be plugin.Full, connCtx func(context.Context, net.Conn) context.Context) {
	ServeConnLimited(ctx, c, be, connCtx, Limits{})
}

// ServeConnLimited is ServeConn within lim.
func ServeConnLimited(ctx context.Context, c net.Conn, be plugin.Full, connCtx func(context.Context, net.Conn) context.Context, lim Limits) {
	ctx, cancelAll := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if connCtx != nil {
		ctx = connCtx(ctx, c)
	}
	var budget Budget
	if lim.Budget != nil {
		budget = lim.Budget(ctx)
	}
	var (
		wg      sync.WaitGroup
		writeMu sync.Mutex
		enc     = json.NewEncoder(c)
		mu      sync.Mutex
		running = map[uint64]context.CancelFunc{}
	)
	defer func() {
		cancelAll()
		wg.Wait()
		_ = c.Close()
	}()
	answer := func(r response) {
		writeMu.Lock()
		defer writeMu.Unlock()
		if err := enc.Encode(r); err != nil {
			_ = c.Close() // the caller is gone; the reader sees it
		}
	}
	frames := &frameReader{r: bufio.NewReaderSize(c, frameBuffer), max: lim.MaxFrame, budget: budget}
	for {
		frame, err := frames.next()
		if err != nil {
			var refused refusal
			if lim.Refused != nil && errors.As(err, &refused) {
				lim.Refused(ctx, refused.err)
			}
			return
		}
		var req request
		err = json.Unmarshal(frame, &req)
		if budget != nil && (err != nil || req.Cancel || handlers[req.Call] == nil) {
			budget.FreeBytes(len(frame))
		}
		switch {
		case err != nil && len(bytes.TrimSpace(frame)) == 0:
			continue
		case err != nil:
			return // not this wire: nothing to answer
		case req.Cancel:
			mu.Lock()
			if cancel := running[req.ID]; cancel != nil {
				cancel()
			}
			mu.Unlock()
			continue
		}
		h := handlers[req.Call]
		if h == nil {
			answer(response{ID: req.ID, Err: toWire(plugin.Errorf(plugin.ErrNotSupported, "link: no call %q", req.Call))})
			continue
		}
		size := len(frame)
		release := func() {}
		if budget != nil {
			if err := budget.TakeCall(); err != nil {
				budget.FreeBytes(size)
				answer(response{ID: req.ID, Err: toWire(err)})
				continue
			}
			release = func() { budget.FreeCall(); budget.FreeBytes(size) }
		}
		cctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		running[req.ID] = cancel
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			resp, err := callSafely(h, cctx, be, req.Req)
			mu.Lock()
			delete(running, req.ID)
			mu.Unlock()
			cancel()
			r := response{ID: req.ID}
			if err == nil {
				r.Resp, err = json.Marshal(resp)
			}
			if err != nil {
				r.Resp, r.Err = nil, toWire(err)
			}
			answer(r)
		}()
	}
}

// acceptBackoff is how long Serve waits after a failed Accept (out of
// fds, say) before it tries again.
const acceptBackoff = 100 * time.Millisecond

// errClosed is what a call on a closed Conn says.
var errClosed = errors.New("link closed")

// FailCalls answers every call on c with err, until the caller closes c,
// ctx ends or within passes: for a server that cannot serve (a node daemon whose
// hub is out of reach) to say why, instead of closing a connection its
// caller would see break with no reason.
func FailCalls(ctx context.Context, c net.Conn, err error, within time.Duration) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(within))
	w := toWire(err)
	enc, dec := json.NewEncoder(c), json.NewDecoder(c)
	for {
		var req request
		if dec.Decode(&req) != nil {
			return
		}
		if req.Cancel {
			continue
		}
		if enc.Encode(response{ID: req.ID, Err: w}) != nil {
			return
		}
	}
}
