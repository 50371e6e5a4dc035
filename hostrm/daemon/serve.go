package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// ServeLocal serves the node's callers on l, the daemon's unix socket,
// until ctx ends. Each connection's caller is who the kernel says it is
// (ConnContext); every user but root is held to the bounds in limits.go:
// her connections, the bytes of her calls not answered yet, her calls in
// flight and the size of each call. A connection past them is told why
// and closed, and the refusal logged with her uid and pid (once a minute
// for the same refusal, counting the others).
func (s *Server) ServeLocal(ctx context.Context, l net.Listener) error {
	return link.Accept(ctx, l, func(ctx context.Context, c net.Conn) {
		cred, err := peercred.Of(c)
		if err != nil {
			s.log.Warn().Err(err).Msg("refused: a caller without credentials")
			_ = c.Close()
			return
		}
		if s.opts.unbounded(cred.Uid) {
			link.ServeConn(ctx, c, s, ConnContext)
			return
		}
		p := peer{uid: cred.Uid, pid: cred.Pid}
		key := strconv.FormatUint(uint64(cred.Uid), 10)
		if !s.conns.hold(key, maxConnsPerUser, maxConns) {
			s.refuseConn(ctx, c, p, plugin.Errorf(plugin.ErrUnavailable,
				"the node daemon holds %d connections of uid %d already, the most one user may (or %d of every user's)", maxConnsPerUser, cred.Uid, maxConns))
			return
		}
		defer s.conns.release(key)
		link.ServeConnLimited(ctx, c, s, ConnContext, s.limitsOf(key, "uid "+key, p))
	})
}

// limitsOf are the bounds of a connection of p, counted under key with
// the other connections of its user.
func (s *Server) limitsOf(key, who string, p peer) link.Limits {
	return link.Limits{
		MaxFrame: maxFrame,
		Budget: func(context.Context) link.Budget {
			return userBudget{b: &s.budget, key: key, who: who, refused: func(err error) { s.logRefused(p, err) }}
		},
		Refused: func(_ context.Context, err error) {
			s.logRefused(p, fmt.Errorf("a connection closed: %w", err))
		},
	}
}

// refuseConn tells a connection's caller why it is refused, within a
// second, and closes it; past maxRefusing at once it is closed at once.
func (s *Server) refuseConn(ctx context.Context, c net.Conn, p peer, err error) {
	s.logRefused(p, err)
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		_ = c.Close()
		return
	}
	defer s.refusing.Add(-1)
	link.FailCalls(ctx, c, err, time.Second)
}
