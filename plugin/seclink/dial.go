package seclink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Dialer makes links to accepting ends of one kind: the same key and
// roles for every address. It keeps the TLS sessions it made, so that a
// link made again to the same peer resumes one (an abbreviated TLS
// handshake, still with fresh keys; the proofs are made anew).
type Dialer struct {
	cfg      Config
	hello    []byte
	sessions tls.ClientSessionCache
}

// NewDialer returns a Dialer with cfg and the hello Dial says (nil: an
// empty one).
func NewDialer(cfg Config, hello []byte) (*Dialer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Dialer{cfg: cfg, hello: hello, sessions: tls.NewLRUClientSessionCache(16)}, nil
}

// Dial connects to addr (host:port, TCP) and passes the handshake with
// the Dialer's hello; the net.Conn is a *Conn. Its signature is
// direct.WithDialer's.
func (d *Dialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := d.DialHello(ctx, addr, d.hello)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DialHello is Dial with a hello of its own: a node daemon's hub learns
// from it who each relayed caller is.
func (d *Dialer) DialHello(ctx context.Context, addr string, hello []byte) (*Conn, error) {
	raw, err := d.connect(ctx, addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: connect: %w: %w", d.cfg.PeerRole, addr, err, plugin.ErrTimeout)
		}
		return nil, fmt.Errorf("%s %s: connect: %w: %w", d.cfg.PeerRole, addr, err, plugin.ErrUnavailable)
	}
	c, err := client(ctx, raw, &d.cfg, hello, d.sessions)
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("%s %s: %w", d.cfg.PeerRole, addr, err)
	}
	return c, nil
}

// Privileged ports a Privileged dialler binds, at random.
const (
	lowPort  = 600
	highPort = 1023
)

// connect makes the TCP connection: from a privileged port when asked
// and allowed, trying a few while they are taken.
func (d *Dialer) connect(ctx context.Context, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.cfg.timeout(), KeepAlive: 30 * time.Second}
	if d.cfg.Privileged {
		for range 16 {
			nd.LocalAddr = &net.TCPAddr{Port: lowPort + rand.IntN(highPort-lowPort+1)}
			c, err := nd.DialContext(ctx, "tcp", addr)
			switch {
			case err == nil:
				return c, nil
			case errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL):
				continue // taken: another
			case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
				// Not root: any port.
			default:
				return nil, err
			}
			break
		}
		nd.LocalAddr = nil
	}
	return nd.DialContext(ctx, "tcp", addr)
}
