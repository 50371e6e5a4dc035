package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// Session is one task connection. Feed and Close are called from one
// goroutine (the shim's reader for this connection); replies may be sent
// from any goroutine.
type Session struct {
	j   *Job
	out Sender

	sendMu sync.Mutex // serializes out.Send
	dead   atomic.Bool

	// Used only by the Feed goroutine.
	buf      []byte
	c        *codec // nil before init, then PMI-1's or PMI-2's
	split1   pmi1.Splitter
	split2   pmi2.Splitter
	spawn1   []*pmi1.SpawnBlock // PMI-1 mcmd=spawn blocks until the last one
	spawnErr error              // first bad block of the spawn being collected
	fatal    bool

	// rank is -1 until a port session is bound; written by the Feed
	// goroutine under j.mu, read by it without.
	rank int32

	// port is the peer of a PMI_PORT connection (nil: a task's own
	// socket). The rest is the challenge-sha256 handshake, used only by
	// the Feed goroutine.
	port        *PortPeer
	authed      bool
	nonce       string
	pendingInit *wire.Message
}

func newSession(j *Job, out Sender) *Session {
	max := j.cfg.Limits.LineMax
	return &Session{
		j:      j,
		out:    out,
		split1: pmi1.Splitter{Max: max},
		split2: pmi2.Splitter{Max: max},
	}
}

// Feed hands bytes read from the connection to the engine. It never blocks
// on the backend; replies go to the session's Sender.
func (s *Session) Feed(data []byte) {
	if s.fatal {
		return
	}
	// Whole requests are cut from data itself; only a partial one is
	// kept, to be completed by the next read (the caller reuses data).
	in := data
	if len(s.buf) > 0 {
		s.buf = append(s.buf, data...)
		in = s.buf
	}
	for len(in) > 0 && !s.fatal {
		var (
			adv int
			tok []byte
			err error
		)
		adv, tok, err = s.codec().split(s, in)
		if adv == 0 && tok == nil && err == nil {
			break
		}
		if err != nil {
			s.frameError(in, err)
		} else if tok != nil {
			s.handle(tok)
		}
		in = in[min(adv, len(in)):]
	}
	switch {
	case len(in) == 0 || s.fatal:
		s.buf = nil // let a large buffer go once drained
	case len(s.buf) == 0:
		s.buf = append([]byte(nil), in...)
	default:
		s.buf = append(s.buf[:0], in...)
	}
}

// Close reports that the connection ended: err is nil at EOF.
func (s *Session) Close(err error) {
	if err == nil && len(bytes.TrimSpace(s.buf)) > 0 && !s.fatal {
		err = fmt.Errorf("connection closed in the middle of a message (%d bytes: %q)", len(s.buf), preview(s.buf))
	}
	s.dead.Store(true)
	s.j.sessionClosed(s, err)
}

func preview(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// frameError answers a frame the codec could not cut out of the stream.
func (s *Session) frameError(frame []byte, err error) {
	cmd := peekCmd(frame)
	r := s.newRequest(cmd, "")
	switch {
	case errors.Is(err, wire.ErrBadLength):
		// Without a length the stream cannot be resynchronised: say why
		// and stop reading this connection.
		s.fatal = true
		s.j.log.Error().Int32("rank", s.rank).Err(err).Msg("unrecoverable framing error")
		r.fail(wire.RcInvalidLength, fmt.Errorf("%w; closing the connection", err))
		s.closeOut()
	case errors.Is(err, wire.ErrTooLong):
		r.fail(wire.RcInvalidLength, fmt.Errorf("%s request longer than %d bytes: %w", cmdName(cmd), s.j.cfg.Limits.LineMax, err))
	default:
		r.fail(wire.RcInvalidArg, err)
	}
}

func cmdName(cmd string) string {
	if cmd == "" {
		return "a"
	}
	return cmd
}

// peekCmd finds the command name at the start of a frame that failed to
// parse, so its error reply carries the name the client waits for. Only
// what a command name may hold is taken (letters, digits, '-', '_'): the
// reply must parse whatever the request held.
func peekCmd(frame []byte) string {
	s := string(frame[:min(len(frame), 256)])
	i := strings.Index(s, "cmd=")
	if i < 0 {
		return ""
	}
	s = s[i+4:]
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
	if end >= 0 {
		s = s[:end]
	}
	return s
}

func (s *Session) closeOut() {
	s.dead.Store(true)
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_ = s.out.Close()
}

func (s *Session) send(b []byte) {
	if s.dead.Load() {
		return
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := s.out.Send(b); err != nil {
		s.j.log.Warn().Int32("rank", s.rank).Err(err).Msg("reply lost: connection write failed")
	}
}

// handle parses one frame and dispatches it.
func (s *Session) handle(frame []byte) {
	c := s.codec()
	m, err := c.parse(frame)
	if err != nil {
		r := s.newRequest(peekCmd(frame), "")
		r.fail(wire.RcInvalidArg, fmt.Errorf("cannot parse request: %w", err))
		return
	}
	r := s.newRequest(m.Cmd, c.thread(m))
	if key, dup := m.Duplicate(); dup && !allowsDuplicates(m) {
		r.fail(wire.RcInvalidArg, fmt.Errorf("%s: field %q given twice", m.Cmd, key))
		return
	}
	c.dispatch(s, r, m)
}

// codec is the session's wire: PMI-1's until an init names PMI-2.
func (s *Session) codec() *codec {
	if s.c == nil {
		return codec1
	}
	return s.c
}

// allowsDuplicates: a PMI-2 spawn repeats its per-command keys in every
// subcmd section and a PMI-1 spawn arrives as blocks.
func allowsDuplicates(m *wire.Message) bool {
	return m.Cmd == "spawn"
}

// request is one client request awaiting its single answer.
type request struct {
	s        *Session
	c        *codec
	cmd      string
	thrid    string
	rank     int32
	answered atomic.Bool
}

func (s *Session) newRequest(cmd, thrid string) *request {
	return &request{s: s, c: s.codec(), cmd: cmd, thrid: thrid, rank: s.rank}
}

// park records r as owed an answer, so a job failure answers it. Call
// with j.mu held.
func (r *request) park() {
	r.s.j.pending[r] = struct{}{}
}

// unpark forgets r. Call with j.mu held.
func (r *request) unpark() {
	delete(r.s.j.pending, r)
}

// ok answers rc=0 with the given key, value pairs (value= last).
func (r *request) ok(kv ...string) {
	r.answer(wire.RcSuccess, nil, kv...)
}

// fail answers rc with err's text as msg (PMI-1) or errmsg (PMI-2).
func (r *request) fail(rc int, err error) {
	r.answer(rc, err)
}

// failKV answers rc with extra pairs before the message (e.g. found=FALSE).
func (r *request) failKV(rc int, err error, kv ...string) {
	r.answer(rc, err, kv...)
}

func (r *request) answer(rc int, err error, kv ...string) {
	if !r.answered.CompareAndSwap(false, true) {
		return
	}
	b := r.c.reply(r.cmd, r.thrid, rc, err, kv)
	if err != nil {
		r.s.j.log.Debug().Int32("rank", r.rank).Str("cmd", r.cmd).Int("rc", rc).Err(err).Msg("request failed")
	}
	r.s.send(b)
}

// sendRaw writes pre-formatted PMI-1 lines (the initack handshake).
func (r *request) sendRaw(b []byte) {
	if r.answered.CompareAndSwap(false, true) {
		r.s.send(b)
	}
}
