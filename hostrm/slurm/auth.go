package slurm

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// The link between a node's gopmi-rm-slurm and the step's coordinator is
// TCP, authenticated with the step's secret, which only the step's
// processes get (srun's plugin makes it and hands it to the stepds in the
// step's environment). The coordinator speaks first: "gopmi-slurm 1
// <nonce>\n", 32 random bytes in hex. The node answers with
// HMAC-SHA256(secret, nonce) in hex and a newline; the coordinator
// answers "ok\n" and the connection carries gRPC from then on, or closes
// it and logs the peer. The secret never crosses the wire.

const (
	authGreeting = "gopmi-slurm 1 "
	// authTimeout bounds the handshake: a peer that connects and says
	// nothing is dropped.
	authTimeout = 5 * time.Second
)

// NewSecret returns a fresh step secret, hex.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("step secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func proof(secret, nonce string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// authListener hands out only connections that proved the secret. Each
// handshake runs on its own goroutine, so a silent peer holds up no
// other.
type authListener struct {
	net.Listener
	secret string
	log    zerolog.Logger

	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
}

// AuthListener wraps l so that Accept returns only connections whose peer
// proved it holds secret; the others are closed and logged.
func AuthListener(l net.Listener, secret string, log zerolog.Logger) net.Listener {
	a := &authListener{Listener: l, secret: secret, log: log, conns: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *authListener) loop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := a.Listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && isTemporary(err) {
				// Out of file descriptors, say: the next node's
				// connection may well be accepted later.
				a.log.Warn().Err(err).Msg("accept failed; retrying")
				select {
				case <-time.After(backoff):
				case <-a.done:
					return
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			select {
			case a.errs <- err:
			case <-a.done:
			}
			return
		}
		backoff = 5 * time.Millisecond
		go a.handshake(c)
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

func (a *authListener) handshake(c net.Conn) {
	if err := serverHandshake(c, a.secret); err != nil {
		ev := a.log.Warn()
		if errors.Is(err, io.EOF) {
			// A node process that ended before it answered (its job
			// ended while it started) is no intruder.
			ev = a.log.Debug()
		}
		ev.Str("peer", c.RemoteAddr().String()).Err(err).Msg("connection refused: it did not prove the step secret")
		_ = c.Close()
		return
	}
	select {
	case a.conns <- c:
	case <-a.done:
		_ = c.Close()
	}
}

func (a *authListener) Accept() (net.Conn, error) {
	select {
	case c := <-a.conns:
		return c, nil
	case err := <-a.errs:
		return nil, err
	case <-a.done:
		return nil, net.ErrClosed
	}
}

func (a *authListener) Close() error {
	a.once.Do(func() { close(a.done) })
	return a.Listener.Close()
}

func serverHandshake(c net.Conn, secret string) error {
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	nb := make([]byte, 32)
	if _, err := rand.Read(nb); err != nil {
		return err
	}
	nonce := hex.EncodeToString(nb)
	if _, err := fmt.Fprintf(c, "%s%s\n", authGreeting, nonce); err != nil {
		return err
	}
	// One byte at a time: nothing after the newline may be consumed, it
	// is gRPC's.
	line, err := readLine(c, 128)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(line), []byte(proof(secret, nonce))) {
		return errors.New("wrong answer to the challenge")
	}
	_, err = c.Write([]byte("ok\n"))
	return err
}

// readLine reads up to a newline without reading past it.
func readLine(c net.Conn, max int) (string, error) {
	var b strings.Builder
	one := make([]byte, 1)
	for b.Len() <= max {
		if _, err := c.Read(one); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(one[0])
	}
	return "", fmt.Errorf("handshake line longer than %d bytes", max)
}

// AuthDialer returns a dial function for direct.WithDialer that connects
// to addr and proves secret.
func AuthDialer(secret string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if err := clientHandshake(ctx, c, secret); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("coordinator %s: %w", addr, err)
		}
		return c, nil
	}
}

func clientHandshake(ctx context.Context, c net.Conn, secret string) error {
	deadline := time.Now().Add(authTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	// Byte by byte, as the coordinator reads: gRPC's first frame may
	// follow "ok" at once and is not ours to read.
	greet, err := readLine(c, 128)
	if err != nil {
		return fmt.Errorf("no greeting: %w", err)
	}
	nonce, ok := strings.CutPrefix(greet, authGreeting)
	if !ok {
		return fmt.Errorf("not a gopmi-slurm coordinator (it said %q)", greet)
	}
	if _, err := fmt.Fprintf(c, "%s\n", proof(secret, nonce)); err != nil {
		return err
	}
	if ack, err := readLine(c, 16); err != nil || ack != "ok" {
		return errors.New("the coordinator refused the step secret")
	}
	return nil
}
