package shim

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/shim/serve"
)

// notifyTimeout bounds one sd_notify datagram: a step daemon that stopped
// reading its socket must not hold the shim up.
const notifyTimeout = 2 * time.Second

// notifier sends sd_notify messages to the address NOTIFY_SOCKET held when
// the shim started. go-systemd's daemon.SdNotify reads the address from
// the environment at each call, but the shim removes NOTIFY_SOCKET from
// its environment before it starts the backend (which would inherit it
// and could report readiness on the shim's behalf), so the shim keeps the
// address and speaks the same protocol itself: one unixgram datagram of
// newline-separated VAR=value assignments.
type notifier struct {
	addr string // "" when nobody listens
}

// send delivers one state message; with no address it does nothing.
func (n notifier) send(state string) error {
	if n.addr == "" {
		return nil
	}
	// A leading '@' names an abstract socket; net handles it.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: dial %s: %w", n.addr, err)
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(notifyTimeout)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: send to %s: %w", n.addr, err)
	}
	return nil
}

// ready reports that every task connection is served.
func (n notifier) ready(tasks int) error {
	return n.send(fmt.Sprintf("READY=1\nSTATUS=serving %d tasks", tasks))
}

// failed reports a start-up failure: the step daemon prints STATUS.
func (n notifier) failed(err error) error {
	return n.send(fmt.Sprintf("STATUS=%s\nERRNO=%d", oneLine(err.Error()), errnoFor(err)))
}

// stopping reports that the shim is shutting down and why.
func (n notifier) stopping(reason string) error {
	return n.send("STOPPING=1\nSTATUS=" + oneLine(reason))
}

// oneLine keeps a message inside its VAR= assignment.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// errnoFor picks the ERRNO= value sent with a start-up failure: the
// underlying errno when there is one, else one that fits the class.
func errnoFor(err error) int {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	switch {
	case errors.Is(err, serve.ErrUsage):
		return int(syscall.EINVAL)
	case errors.Is(err, serve.ErrBackend):
		return int(syscall.EHOSTDOWN)
	default:
		return int(syscall.EIO)
	}
}
