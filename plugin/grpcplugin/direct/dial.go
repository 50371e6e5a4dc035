package direct

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/convert"
	"github.com/gopmi/gopmi/plugin/grpcplugin/internal/service"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	maxMsg int
	dialer func(ctx context.Context, addr string) (net.Conn, error)
}

// WithDialer makes the connection with dial instead of a plain TCP or
// unix connect, for a transport that must first authenticate (a
// resource manager's per-job secret) or that tunnels. addr is target
// without its scheme. Over TCP, plugin/seclink's Dialer.Dial is one: a
// private link on which both ends prove a shared key.
func WithDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) DialOption {
	return func(c *dialConfig) { c.dialer = dial }
}

// WithDialMaxMessageSize bounds one gRPC message in either direction
// (default DefaultMaxMessageSize).
func WithDialMaxMessageSize(n int) DialOption {
	return func(c *dialConfig) {
		if n > 0 {
			c.maxMsg = n
		}
	}
}

// Conn is a connection to a backend served by Serve.
type Conn struct {
	cc      *grpc.ClientConn
	backend plugin.Full
	target  string

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Dial connects to a backend served by Serve at target:
// "unix:///path/to/socket", "/path/to/socket" or "host:port" (any gRPC
// target). It returns once the connection works (a health check answers),
// bounded by ctx; an unreachable target fails with plugin.ErrUnavailable.
// The connection has no transport security of its own: use unix sockets
// whose directory permissions admit only the callers, or TCP through
// plugin/seclink (WithDialer, and Serve on its Listener).
func Dial(ctx context.Context, target string, opts ...DialOption) (_ *Conn, retErr error) {
	cfg := dialConfig{maxMsg: DefaultMaxMessageSize}
	for _, o := range opts {
		o(&cfg)
	}
	if strings.HasPrefix(target, "/") {
		target = "unix://" + target
	}
	gopts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.maxMsg), grpc.MaxCallSendMsgSize(cfg.maxMsg)),
		// A link is kept until Close, never idled: an idle one is one
		// whose peer went away (Lost).
		grpc.WithIdleTimeout(0),
		// Large fence answers flow without waiting on window updates
		// (window).
		grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window),
	}
	if cfg.dialer != nil {
		gopts = append(gopts, grpc.WithContextDialer(cfg.dialer))
		if !strings.Contains(target, "://") {
			target = "passthrough:///" + target
		}
	}
	cc, err := grpc.NewClient(target, gopts...)
	if err != nil {
		return nil, fmt.Errorf("dial rm backend %s: %w: %w", target, err, plugin.ErrInvalidArgument)
	}
	defer func() {
		if retErr != nil {
			_ = cc.Close()
		}
	}()
	// A fail-fast call connects and, if the target is unreachable, fails
	// with the dial error's text, which a connectivity-state watch would
	// not give.
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil && status.Code(err) != codes.Unimplemented {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("dial rm backend %s: %w: %w", target, cerr, convert.ContextKind(cerr))
		}
		return nil, fmt.Errorf("dial rm backend %s: %s: %w", target, status.Convert(err).Message(), plugin.ErrUnavailable)
	}
	c := &Conn{cc: cc, target: target, closed: make(chan struct{})}
	c.backend = service.NewBackend(rmv1.NewResourceManagerServiceClient(cc), c.gone)
	return c, nil
}

// Lost reports whether the connection is no longer usable as it was:
// closed, or idle or reconnecting after the peer went away or broke it. A caller
// with somewhere else to go may close it and dial there.
func (c *Conn) Lost() bool {
	select {
	case <-c.closed:
		return true
	default:
	}
	return c.cc.GetState() != connectivity.Ready
}

// ClientConn is the connection, for the clients of services served
// besides the backend (WithService).
func (c *Conn) ClientConn() grpc.ClientConnInterface { return c.cc }

// Backend returns the remote backend. Calls fail with an error wrapping
// plugin.ErrBackendGone once Close was called or the connection broke.
func (c *Conn) Backend() plugin.Full { return c.backend }

// Close closes the connection; calls in flight fail. It can be called many
// times.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if err := c.cc.Close(); err != nil {
			c.closeErr = fmt.Errorf("close rm backend connection %s: %w", c.target, err)
		}
	})
	return c.closeErr
}

func (c *Conn) gone(bool) error {
	select {
	case <-c.closed:
		return fmt.Errorf("connection to %s closed: %w", c.target, plugin.ErrBackendGone)
	default:
		return nil
	}
}

// Answered reports whether err is an error the backend at the other end
// returned (the call reached it and it answered), as opposed to a link
// that broke or was never made: a relay that wraps the failure of its own
// link up in words of its own (a node naming the parent it cannot reach)
// passes a further relay's answer on as it is, without saying it again.
func Answered(err error) bool {
	var e *convert.Error
	return errors.As(err, &e) && e.Answered()
}
