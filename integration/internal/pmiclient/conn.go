package pmiclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 30 * time.Second

var (
	// ErrNotFound: the server answered rc=0 but found=FALSE (PMI-2), or a
	// lookup reply carried no port.
	ErrNotFound = errors.New("not found")
	// ErrProtocol: the reply is not what the request calls for (wrong
	// cmd=, missing or unreadable attribute).
	ErrProtocol = errors.New("unexpected reply")
	// ErrBroken: an earlier exchange failed part way (a deadline, a
	// protocol error), so replies may be out of step; close the client.
	ErrBroken = errors.New("connection out of step after a failed exchange")
	// ErrNoPMI: the environment names no PMI_FD or PMI_PORT.
	ErrNoPMI = errors.New("no PMI_FD or PMI_PORT in the environment")
)

// Error is a reply with rc != 0.
type Error struct {
	// Cmd is the request's command.
	Cmd string
	Rc  int
	// Msg is the reply's msg= (PMI-1) or errmsg= (PMI-2), if any.
	Msg   string
	Reply *wire.Message
}

// Error reads "pmi <cmd>: rc=<n> (<C name>): <msg>".
func (e *Error) Error() string {
	s := fmt.Sprintf("pmi %s: rc=%d (%s)", e.Cmd, e.Rc, wire.RcName(e.Rc))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Env is what a PMI client reads from its environment. Integer fields are
// -1 when the variable is unset.
type Env struct {
	FD      int    // PMI_FD
	Port    string // PMI_PORT, host:port
	ID      int    // PMI_ID (PMI_PORT mode)
	Rank    int    // PMI_RANK
	Size    int    // PMI_SIZE
	JobID   string // PMI_JOBID
	Spawned bool   // PMI_SPAWNED=1
}

// EnvFrom reads the PMI variables through getenv (os.Getenv, or a map in
// tests).
func EnvFrom(getenv func(string) string) (Env, error) {
	e := Env{Port: getenv("PMI_PORT"), JobID: getenv("PMI_JOBID"), Spawned: getenv("PMI_SPAWNED") == "1"}
	for _, v := range []struct {
		name string
		dst  *int
	}{{"PMI_FD", &e.FD}, {"PMI_ID", &e.ID}, {"PMI_RANK", &e.Rank}, {"PMI_SIZE", &e.Size}} {
		s := getenv(v.name)
		if s == "" {
			*v.dst = -1
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return Env{}, fmt.Errorf("read environment: %s=%q is not a non-negative integer", v.name, s)
		}
		*v.dst = n
	}
	return e, nil
}

// dial opens the connection env names: PMI_FD first, as MPICH does, else
// PMI_PORT.
func dial(ctx context.Context, env Env) (net.Conn, error) {
	switch {
	case env.FD >= 0:
		f := os.NewFile(uintptr(env.FD), "PMI_FD")
		if f == nil {
			return nil, fmt.Errorf("dial PMI_FD=%d: not a valid descriptor", env.FD)
		}
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, fmt.Errorf("dial PMI_FD=%d: %w", env.FD, err)
		}
		return c, nil
	case env.Port != "":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", env.Port)
		if err != nil {
			return nil, fmt.Errorf("dial PMI_PORT=%s: %w", env.Port, err)
		}
		return c, nil
	}
	return nil, ErrNoPMI
}

// transport is the connection shared by both protocol views: one read
// buffer whose split function switches from PMI-1 to PMI-2 after a PMI-2
// client's init line, so no byte is lost in between.
type transport struct {
	mu      sync.Mutex // serialises exchanges
	conn    net.Conn
	fr      *wire.FrameReader
	s1      pmi1.Splitter
	s2      pmi2.Splitter
	v2      bool // reading PMI-2 frames
	timeout time.Duration
	broken  error
}

func newTransport(conn net.Conn) *transport {
	t := &transport{conn: conn, timeout: DefaultTimeout}
	t.fr = wire.NewFrameReader(conn, t.s1.Split)
	return t
}

func (t *transport) setV2() {
	t.v2 = true
	t.fr.SetSplit(t.s2.Split)
}

// begin applies ctx to the connection: its deadline, or DefaultTimeout,
// and cancellation, which moves the deadline into the past to interrupt
// blocked I/O. The returned end undoes both; it waits for a cancellation
// callback already running so it cannot hit the next exchange.
func (t *transport) begin(ctx context.Context) (end func(), err error) {
	if t.broken != nil {
		return nil, t.broken
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(t.timeout)
	}
	if err := t.conn.SetDeadline(dl); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		_ = t.conn.SetDeadline(time.Unix(1, 0))
	})
	return func() {
		if !stop() {
			<-done
		}
		_ = t.conn.SetDeadline(time.Time{})
	}, nil
}

// fail records a failed exchange and returns its error, adding ctx's
// error when the context ended the I/O.
func (t *transport) fail(ctx context.Context, step string, err error) error {
	cerr := ctx.Err()
	if cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's deadline is the context's and may fire a
		// moment before the context's own timer.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	err = fmt.Errorf("pmi %s: %w", step, err)
	t.broken = fmt.Errorf("%w: %w", ErrBroken, err)
	return err
}

func (t *transport) write(b []byte) error {
	_, err := t.conn.Write(b)
	return err
}

func (t *transport) readMsg() (*wire.Message, error) {
	frame, err := t.fr.Next()
	if err != nil {
		return nil, err
	}
	if t.v2 {
		return pmi2.Parse(frame)
	}
	return pmi1.Parse(frame)
}

// exchange writes req (already encoded) and, when want is not empty,
// reads one reply that must be cmd=want.
func (t *transport) exchange(ctx context.Context, cmd string, req []byte, want string) (*wire.Message, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end, err := t.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pmi %s: %w", cmd, err)
	}
	defer end()
	if err := t.write(req); err != nil {
		return nil, t.fail(ctx, cmd+": write", err)
	}
	if want == "" {
		return nil, nil
	}
	m, err := t.readMsg()
	if err != nil {
		return nil, t.fail(ctx, cmd+": read reply", err)
	}
	if m.Cmd != want {
		return nil, t.fail(ctx, cmd, fmt.Errorf("%w: cmd=%s, want %s", ErrProtocol, m.Cmd, want))
	}
	return m, nil
}

// send writes without reading.
func (t *transport) send(ctx context.Context, cmd string, b []byte) error {
	_, err := t.exchange(ctx, cmd, b, "")
	return err
}

// recv reads one message.
func (t *transport) recv(ctx context.Context) (*wire.Message, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end, err := t.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pmi recv: %w", err)
	}
	defer end()
	m, err := t.readMsg()
	if err != nil {
		return nil, t.fail(ctx, "recv", err)
	}
	return m, nil
}

// session is what Client and Client2 share: the transport and the calls
// that do not depend on the protocol.
type session struct {
	t *transport
}

// SetTimeout replaces DefaultTimeout for calls without a deadline.
func (s *session) SetTimeout(d time.Duration) { s.t.timeout = d }

// Close closes the connection.
func (s *session) Close() error { return s.t.conn.Close() }

// SendRaw writes b as is, for junk and malformed-input tests.
func (s *session) SendRaw(ctx context.Context, b []byte) error { return s.t.send(ctx, "raw", b) }

// Recv reads one message: a PMI-1 line, or a PMI-2 frame once a Client2's
// InitLine succeeded.
func (s *session) Recv(ctx context.Context) (*wire.Message, error) { return s.t.recv(ctx) }

// abortMessage is abort in MPICH >= 4.1's form, for both protocols:
// exitcode=, and message= when msg is not empty.
func abortMessage(code int, msg string) *wire.Message {
	m := wire.New("abort").AddInt("exitcode", code)
	if msg != "" {
		m.Add("message", msg)
	}
	return m
}

// checkRc turns rc != 0 into *Error. The message is msgKey's value (msg
// for PMI-1, errmsg for PMI-2), else the other protocol's key, since
// servers mix them up.
func checkRc(cmd string, m *wire.Message, msgKey string) error {
	rc, err := m.Int("rc", 0)
	if err != nil {
		return fmt.Errorf("pmi %s: %w: %w", cmd, ErrProtocol, err)
	}
	if rc == 0 {
		return nil
	}
	msg := m.Value(msgKey)
	if msg == "" {
		other := "errmsg"
		if msgKey == "errmsg" {
			other = "msg"
		}
		msg = m.Value(other)
	}
	return &Error{Cmd: cmd, Rc: rc, Msg: msg, Reply: m}
}

func needInt(cmd string, m *wire.Message, key string) (int, error) {
	v, ok := m.Get(key)
	if !ok {
		return 0, fmt.Errorf("pmi %s: %w: cmd=%s has no %s", cmd, ErrProtocol, m.Cmd, key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("pmi %s: %w: %s=%q is not an integer", cmd, ErrProtocol, key, v)
	}
	return n, nil
}

func needStr(cmd string, m *wire.Message, key string) (string, error) {
	v, ok := m.Get(key)
	if !ok {
		return "", fmt.Errorf("pmi %s: %w: cmd=%s has no %s", cmd, ErrProtocol, m.Cmd, key)
	}
	return v, nil
}
