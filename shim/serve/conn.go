package serve

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge"
)

const (
	// A task's reads start at readBufSize bytes, enough for any request
	// of MPICH's but its business cards; a read that fills the buffer
	// grows it to readBufMax. The codecs reassemble lines that span
	// reads. A job of 1,024 ranks on a node has 1,024 of these.
	readBufSize = 4 << 10
	readBufMax  = 64 << 10
	// writeTimeout bounds one write to a task: a task that stops reading
	// its PMI socket for this long is failed rather than left to fill the
	// shim's memory.
	writeTimeout = 10 * time.Second
	// minQueueBytes is the least a connection may have queued; the real
	// bound is a few lines of the job's line_max.
	minQueueBytes = 4 << 20
)

// errSlowReader fails a connection whose task does not read its replies.
var errSlowReader = errors.New("task is not reading its PMI replies")

// errStopped is what the session hears when the server stops reading.
var errStopped = errors.New("PMI server shutting down")

// taskConn is one task connection: the bridge.Sender side with a bounded
// queue drained by a writer goroutine, and a reader goroutine feeding the
// bridge. Send never blocks, so the bridge can answer many tasks from one
// goroutine.
type taskConn struct {
	conn     net.Conn
	raw      syscall.RawConn // nil when conn has no fd (tests)
	log      zerolog.Logger
	maxQueue int

	mu      sync.Mutex
	queue   [][]byte // guarded by mu
	queued  int      // bytes in queue, guarded by mu
	writing bool     // the writer holds a batch it has not written; guarded by mu
	closing bool     // no more Sends; drain then close; guarded by mu
	err     error    // why the connection failed; guarded by mu

	// spoke is set once the task has sent a byte (the connect check).
	spoke atomic.Bool
	// stopped is set when the shim stops reading to shut down.
	stopped atomic.Bool
	// unclosed is the session the reader left open when it stopped: the
	// shim closes it once the answers still owed were sent (a closed
	// session drops them). Written by the reader before it exits.
	unclosed *bridge.Session

	wake    chan struct{} // capacity 1: the queue or closing changed
	written chan struct{} // closed when the writer has exited
}

func newTaskConn(conn net.Conn, maxQueue int, log zerolog.Logger) *taskConn {
	var raw syscall.RawConn
	if sc, ok := conn.(syscall.Conn); ok {
		raw, _ = sc.SyscallConn()
	}
	return &taskConn{
		conn:     conn,
		raw:      raw,
		log:      log,
		maxQueue: maxQueue,
		wake:     make(chan struct{}, 1),
		written:  make(chan struct{}),
	}
}

var _ bridge.Sender = (*taskConn)(nil)

// Send queues b for the task. It fails the connection instead of blocking
// when the task has stopped reading.
func (c *taskConn) Send(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != nil:
		return c.err
	case c.closing:
		return net.ErrClosed
	case c.queued+len(b) > c.maxQueue:
		c.failLocked(fmt.Errorf("send: %d bytes already queued: %w", c.queued, errSlowReader))
		return c.err
	}
	if len(c.queue) == 0 && !c.writing {
		// Nothing is ahead of b: try to write it at once, without
		// waiting. A reply then costs one syscall, not a hand-off to
		// the writer goroutine and its wake-up, which on a busy node is
		// most of what serving a request costs.
		b = b[c.tryWrite(b):]
		if len(b) == 0 {
			return nil
		}
	}
	// The bridge may reuse b once Send returns.
	c.queue = append(c.queue, append([]byte(nil), b...))
	c.queued += len(b)
	c.poke()
	return nil
}

// tryWrite writes what the socket takes now and returns how much; it
// never blocks. Errors are left for the writer goroutine to meet.
func (c *taskConn) tryWrite(b []byte) int {
	if c.raw == nil {
		return 0
	}
	n := 0
	_ = c.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			k, err := syscall.Write(int(fd), b[n:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil || k <= 0 {
				break
			}
			n += k
		}
		return true // done either way: never wait for the socket
	})
	return n
}

// Close lets the queued replies drain (within writeTimeout) and then
// closes the connection; the bridge calls it after finalize or a fatal
// error.
func (c *taskConn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.poke()
	return nil
}

// abort closes the connection now, dropping anything queued.
func (c *taskConn) abort(err error) {
	c.mu.Lock()
	c.failLocked(err)
	c.mu.Unlock()
}

// failLocked records err and closes the socket, which wakes both
// goroutines.
func (c *taskConn) failLocked(err error) {
	if c.err == nil {
		c.err = err
		c.queue, c.queued = nil, 0
		_ = c.conn.Close()
	}
	c.poke()
}

func (c *taskConn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stopReading makes the reader return without closing the socket, so the
// answers still owed can be written.
func (c *taskConn) stopReading() {
	c.stopped.Store(true)
	_ = c.conn.SetReadDeadline(time.Now())
}

// closedByShim reports whether the connection was closed from this side.
func (c *taskConn) closedByShim() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing || c.err != nil
}

// writeLoop drains the queue until the connection is closed.
func (c *taskConn) writeLoop() {
	defer close(c.written)
	for {
		c.mu.Lock()
		batch, closing, failed := c.queue, c.closing, c.err != nil
		c.queue, c.queued = nil, 0
		c.writing = len(batch) > 0
		c.mu.Unlock()
		if failed {
			return
		}
		if len(batch) > 0 {
			bufs := net.Buffers(batch)
			_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := bufs.WriteTo(c.conn); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = fmt.Errorf("write: no progress in %v: %w", writeTimeout, errSlowReader)
				} else {
					err = fmt.Errorf("write: %w", err)
				}
				c.log.Warn().Err(err).Msg("task connection failed")
				c.abort(err)
				return
			}
			c.mu.Lock()
			c.writing = false
			c.mu.Unlock()
			continue
		}
		if closing {
			c.abort(net.ErrClosed)
			return
		}
		<-c.wake
	}
}

// readLoop feeds what the task writes to the session until EOF or an
// error, then tells the session why it ended.
func (c *taskConn) readLoop(sess *bridge.Session) {
	buf := make([]byte, readBufSize)
	for !c.stopped.Load() {
		n, err := c.conn.Read(buf)
		if n > 0 {
			c.spoke.Store(true)
			sess.Feed(buf[:n])
			if n == len(buf) && n < readBufMax {
				buf = make([]byte, readBufMax)
			}
		}
		if err == nil {
			continue
		}
		switch {
		case errors.Is(err, io.EOF):
			err = nil
		case c.stopped.Load():
			c.unclosed = sess
			return
		case c.closedByShim():
			// The bridge closed the connection (after finalize) or the
			// shim is shutting down: the session already knows.
			c.mu.Lock()
			err = c.err
			c.mu.Unlock()
			if errors.Is(err, net.ErrClosed) {
				err = nil
			}
		default:
			err = fmt.Errorf("read: %w", err)
		}
		sess.Close(err)
		// Whatever is still queued goes out before the socket closes; a
		// task that already closed its end makes that fail fast.
		_ = c.Close()
		return
	}
	c.unclosed = sess
}
