package seclink

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// MaxHandshakes is how many handshakes a Listener runs at once; a
// connection beyond them is closed at once (a flood of silent peers holds
// that many places, each until its deadline, and no more).
const MaxHandshakes = 256

// Listener hands out only connections whose peer passed the handshake in
// its role; the others are closed and logged. Each handshake runs on a
// goroutine of its own, so a silent peer holds up no other, and Close
// waits for every goroutine the Listener started.
type Listener struct {
	l   net.Listener
	cfg Config
	log zerolog.Logger

	conns  chan *Conn
	errs   chan error // the error that ended the accept loop
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
	slots  chan struct{} // one per handshake running
}

// Listen serves the accepting end of cfg on l (TCP). Refused and failed
// handshakes are logged on log: a peer that closes before it answers
// (a node process whose job ended while it started) at debug level,
// others at warn.
func Listen(l net.Listener, cfg Config, log zerolog.Logger) (*Listener, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if _, err := serverTLS(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sl := &Listener{l: l, cfg: cfg, log: log, conns: make(chan *Conn), errs: make(chan error, 1),
		ctx: ctx, cancel: cancel, slots: make(chan struct{}, MaxHandshakes)}
	sl.wg.Add(1)
	go sl.loop()
	return sl, nil
}

// acceptBackoff bounds the wait after a failed accept that may pass.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

func (l *Listener) loop() {
	defer l.wg.Done()
	backoff := minBackoff
	for {
		c, err := l.l.Accept()
		if err != nil {
			if l.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && isTemporary(err) {
				// Out of file descriptors, say: the next peer's
				// connection may well be accepted later.
				l.log.Warn().Err(err).Str("role", l.cfg.Role).Msg("seclink: accept failed; retrying")
				select {
				case <-time.After(backoff):
				case <-l.ctx.Done():
					return
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			l.errs <- err
			return
		}
		backoff = minBackoff
		select {
		case l.slots <- struct{}{}:
		default:
			l.log.Debug().Str("peer", c.RemoteAddr().String()).Str("role", l.cfg.Role).Msg("seclink: too many handshakes at once; closing a connection")
			_ = c.Close()
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.handshake(c)
			<-l.slots
		}()
	}
}

// isTemporary reports an accept error worth retrying: too many open
// files, a connection aborted before it was accepted.
func isTemporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (l *Listener) handshake(c net.Conn) {
	sc, err := Server(l.ctx, c, &l.cfg)
	if err != nil {
		_ = c.Close()
		if l.ctx.Err() != nil {
			return // closing
		}
		ev := l.log.Warn()
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			// A peer that ended before it answered is no intruder.
			ev = l.log.Debug()
		}
		ev.Str("peer", c.RemoteAddr().String()).Str("role", l.cfg.Role).Str("want", l.cfg.PeerRole).Err(err).Msg("seclink: handshake refused")
		return
	}
	select {
	case l.conns <- sc:
	case <-l.ctx.Done():
		_ = sc.Close()
	}
}

// Accept returns the next connection that passed the handshake, a
// *Conn.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	case err := <-l.errs:
		// Kept for the next caller too: the loop has ended.
		l.errs <- err
		return nil, err
	}
}

// Close stops accepting, ends the handshakes running and waits for them.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.cancel()
		err = l.l.Close()
	})
	l.wg.Wait()
	return err
}

// Addr is the address listened on.
func (l *Listener) Addr() net.Addr { return l.l.Addr() }
