package daemon

import (
	"context"
	"net"
	"os/user"
	"strconv"
	"sync"
	"syscall"
)

// peer is who is at the other end of a connection, from the kernel
// (SO_PEERCRED), not from anything the caller says.
type peer struct {
	uid uint32
	pid int32
}

// nobody is the peer of a call whose credentials are unknown: it may see
// nothing but what uid 65534 owns.
var nobody = peer{uid: 65534, pid: -1}

// conn is one connection's context: its peer, its life and the runs it
// registered.
type conn struct {
	ctx  context.Context // ends when the connection does
	peer peer
	mu   sync.Mutex
	runs map[string]bool
}

// attach records that the connection registered run; it reports whether
// that is new.
func (c *conn) attach(run string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs[run] {
		return false
	}
	if c.runs == nil {
		c.runs = map[string]bool{}
	}
	c.runs[run] = true
	return true
}

type connKey struct{}

// ConnContext is link.ServeConns's hook: it reads the peer's credentials
// from the unix socket and keeps them, with the connection's life, in the
// context every call on it gets.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	p := nobody
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
					p = peer{uid: cred.Uid, pid: cred.Pid}
				}
			})
		}
	}
	cc := &conn{peer: p}
	ctx = context.WithValue(ctx, connKey{}, cc)
	cc.ctx = ctx
	return ctx
}

// connOf is the connection a call came on, nil outside ServeConns.
func connOf(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

// peerOf is the caller; nobody when unknown.
func peerOf(ctx context.Context) peer {
	if c := connOf(ctx); c != nil {
		return c.peer
	}
	return nobody
}

var userNames sync.Map // uint32 -> string

// userName is uid's login name, or the number when it has none.
func userName(uid uint32) string {
	if v, ok := userNames.Load(uid); ok {
		return v.(string)
	}
	n := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(n); err == nil {
		n = u.Username
	}
	userNames.Store(uid, n)
	return n
}
