package launcher

import (
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/shim/serve"
)

// notifier receives one shim's sd_notify datagrams for its whole life:
// READY=1 once its tasks are served, STATUS= with ERRNO= when it fails to
// start, STATUS= with STOPPING=1 when it ends.
type notifier struct {
	conn   *net.UnixConn
	ready  chan struct{} // closed on READY=1
	failed chan struct{} // closed on ERRNO=
	read   chan struct{} // closed when the reader goroutine returned
	log    zerolog.Logger

	mu     sync.Mutex
	status string   // last STATUS=; guarded by mu
	errno  string   // guarded by mu
	env    []string // GOPMI_PMIX_ENV= with READY=1: what a PMIx job's tasks need; guarded by mu
}

// newNotifier listens on path (an abstract name: see link.AbstractName) and
// takes datagrams only from this user or root, by their credentials.
func newNotifier(path string, log zerolog.Logger) (*notifier, error) {
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	n := &notifier{conn: conn, ready: make(chan struct{}), failed: make(chan struct{}), read: make(chan struct{}), log: log}
	go func() {
		defer close(n.read)
		buf := make([]byte, 64<<10) // a PMIx face's READY carries its tasks' environment
		oob := make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
		warned := false
		for {
			size, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			if flags&syscall.MSG_TRUNC != 0 {
				n.log.Error().Int("bytes", size).Msg("a shim's notification was cut: it is larger than the launcher reads")
			}
			if !fromTrusted(oob[:oobn]) {
				if !warned {
					warned = true
					n.log.Warn().Msg("dropped a notification from another user (later ones are not logged)")
				}
				continue
			}
			n.handle(buf[:size])
		}
	}()
	return n, nil
}

// fromTrusted reads a datagram's SCM_CREDENTIALS.
func fromTrusted(oob []byte) bool {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if cred, err := syscall.ParseUnixCredentials(&m); err == nil {
			return link.TrustedUID(cred.Uid)
		}
	}
	return false
}

// handle applies one datagram.
func (n *notifier) handle(b []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if env := serve.ParsePMIxEnv(string(b)); len(env) > 0 {
		n.env = env
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "READY":
			if v == "1" && !isClosed(n.ready) {
				close(n.ready)
			}
		case "STATUS":
			n.status = v
			n.log.Debug().Str("status", v).Msg("shim status")
		case "ERRNO":
			n.errno = v
			if !isClosed(n.failed) {
				close(n.failed)
			}
		}
	}
}

// isClosed reports whether ch is closed; callers serialize closing.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pmixEnv is the environment a PMIx face said its tasks need.
func (n *notifier) pmixEnv() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.env
}

func (n *notifier) lastStatus() (status, errno string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.status, n.errno
}

// close ends the reader goroutine, after reading what is still queued:
// a shim that said READY=1 and exited at once must not look as if it
// never got ready.
func (n *notifier) close() {
	_ = n.conn.SetReadDeadline(time.Now())
	<-n.read
	_ = n.conn.SetReadDeadline(time.Time{})
	if rc, err := n.conn.SyscallConn(); err == nil {
		buf := make([]byte, 64<<10) // a PMIx face's READY carries its tasks' environment
		oob := make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
		_ = rc.Read(func(fd uintptr) bool {
			for {
				size, oobn, _, _, err := syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_DONTWAIT)
				if err != nil {
					return true // EAGAIN: nothing more
				}
				if fromTrusted(oob[:oobn]) {
					n.handle(buf[:size])
				}
			}
		})
	}
	n.conn.Close()
}
