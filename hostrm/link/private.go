package link

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin/peercred"
)

// AbstractName is a fresh unix socket name in Linux's abstract namespace
// for this process: nothing in the file system, gone with the socket, so
// a process killed with SIGKILL leaves no socket or directory behind. Any
// local process may reach such a name, so every peer must be checked
// (ListenPrivate, TrustedUID), as a 0700 directory would have ensured.
func AbstractName(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return abstractPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:]) + "-" + kind
}

// abstractPrefix starts every AbstractName.
const abstractPrefix = "@gopmi-"

// PrivatePath is the socket name of addr when addr is one ListenPrivate
// gives ("unix://@gopmi-..."), else false: a process that dials an
// address another one named, with more rights than it (the node daemon
// as root), dials nothing else.
func PrivatePath(addr string) (string, bool) {
	path, ok := strings.CutPrefix(addr, "unix://")
	return path, ok && strings.HasPrefix(path, abstractPrefix)
}

// TrustedUID reports whether uid may reach this process's private
// sockets: this user, or root (the node daemon may run as root).
func TrustedUID(uid uint32) bool {
	return int(uid) == os.Geteuid() || uid == 0
}

// ListenPrivate listens on a fresh AbstractName(kind) and accepts only
// connections from trusted users (TrustedUID); the first refusal is
// logged. It returns the listener and its address for Dial.
func ListenPrivate(kind string, log zerolog.Logger) (net.Listener, string, error) {
	name := AbstractName(kind)
	l, err := net.Listen("unix", name)
	if err != nil {
		return nil, "", err
	}
	return privateListener{Listener: l, log: log, warned: new(atomic.Bool)}, "unix://" + name, nil
}

// privateListener accepts only connections from trusted users.
type privateListener struct {
	net.Listener
	log    zerolog.Logger
	warned *atomic.Bool
}

func (l privateListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := peercred.Of(c)
		if err == nil && TrustedUID(cred.Uid) {
			return c, nil
		}
		if l.warned.CompareAndSwap(false, true) {
			ev := l.log.Warn().Str("addr", l.Addr().String())
			if cred != nil {
				ev = ev.Uint32("uid", cred.Uid).Int32("pid", cred.Pid)
			}
			ev.Msg("refused a connection from another user to a private socket (later ones are not logged)")
		}
		c.Close()
	}
}
