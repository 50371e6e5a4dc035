package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/shim/peercred"
)

// abstractName is a unix socket name in Linux's abstract namespace for
// this run: nothing in the file system, gone with the socket, so a run
// killed with SIGKILL (and its shims with it) leaves no socket or
// directory behind. Any local process may reach such a name, so every
// peer is checked: it must be this user or root (credListener, notifier),
// as a 0700 directory would have ensured.
func abstractName(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "@gopmi-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:]) + "-" + kind
}

// trustedUID: this user, or root (the node daemon may run as root).
func trustedUID(uid uint32) bool {
	return int(uid) == os.Geteuid() || uid == 0
}

// credListener accepts only connections from trusted users; the first
// refusal is logged.
type credListener struct {
	net.Listener
	log    zerolog.Logger
	warned *atomic.Bool
}

func (l credListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := peercred.Of(c)
		if err == nil && trustedUID(cred.Uid) {
			return c, nil
		}
		if l.warned.CompareAndSwap(false, true) {
			ev := l.log.Warn().Str("addr", l.Addr().String())
			if cred != nil {
				ev = ev.Uint32("uid", cred.Uid).Int32("pid", cred.Pid)
			}
			ev.Msg("refused a connection to the run's universe from another user (later ones are not logged)")
		}
		c.Close()
	}
}
