package bridge

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// AuthChallengeSHA256 is the PMI-2 authtype gopmi offers on PMI_PORT (the
// PMI-2 wire protocol draft's challenge-response): the server answers
// fullinit with "cmd=auth-response;authinfo=<n>;", the client answers
// "cmd=auth-response-complete;authinfo=<hex sha256(secret || n)>;", and only
// then gets its fullinit-response.
const AuthChallengeSHA256 = "challenge-sha256"

// PortPeer is what the host knows of the process at the other end of a
// PMI_PORT connection.
type PortPeer struct {
	// Owner is set when the process belongs to the job's user on this
	// host: it may claim a rank without authenticating, as MPICH's PMI-1
	// client and Slurm's libpmi2 cannot. Any other peer must answer the
	// challenge-sha256 handshake with the job's secret.
	Owner bool
	// Describe names the peer in refusals and logs ("uid 1001, pid 4242
	// (prog)"). It may be slow and is called only then; nil: "unknown".
	Describe func() string
}

func (p *PortPeer) String() string {
	if p == nil {
		return "the task's own socket"
	}
	if p.Describe == nil {
		return "an unknown peer"
	}
	return p.Describe()
}

// ChallengeAnswer is what a client that knows secret answers to nonce:
// the authinfo of auth-response-complete.
func ChallengeAnswer(secret, nonce string) string {
	sum := sha256.Sum256([]byte(secret + nonce))
	return hex.EncodeToString(sum[:])
}

// authenticate runs before fullinit binds a rank. It returns true when the
// fullinit may go on: the connection is a task's own socket, its peer is
// the job's user, or it has just proved it knows the secret. Otherwise it
// has answered r (a challenge, or a refusal that closes the connection).
func (s *Session) authenticate(r *request, m *wire.Message) bool {
	authtype, asked := m.Get("authtype")
	switch {
	case s.authed:
		return true
	case asked && authtype != AuthChallengeSHA256:
		s.refuse(r, fmt.Errorf("fullinit: authtype=%q is not offered; gopmi offers authtype=%s", authtype, AuthChallengeSHA256))
		return false
	case asked && s.j.cfg.PortSecret == "" && s.port == nil:
		// A task's own socket is its credential; a job started
		// without PMI_PORT has no secret to check.
		return true
	case asked && s.j.cfg.PortSecret == "":
		s.refuse(r, fmt.Errorf("fullinit: authtype=%s: this job has no PMI_PORT secret", AuthChallengeSHA256))
		return false
	case asked:
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.nonce = strconv.FormatUint(binary.BigEndian.Uint64(b[:])>>1, 10)
		s.pendingInit = m
		c := wire.New("auth-response")
		if r.thrid != "" {
			c.Add("thrid", r.thrid)
		}
		c.Add("authinfo", s.nonce)
		r.sendRaw(pmi2.Append(nil, c))
		return false
	case s.port != nil && !s.port.Owner:
		s.refuse(r, fmt.Errorf("fullinit: refused: this PMI_PORT connection comes from %s, not from a process of the job's user; "+
			"a task of another user or host must send authtype=%s and answer with PMI_AUTH_SECRET", s.port, AuthChallengeSHA256))
		return false
	}
	return true
}

// authComplete checks the answer to the challenge and, when it is right,
// serves the fullinit that asked for it.
func (s *Session) authComplete(r *request, m *wire.Message) {
	init := s.pendingInit
	r.cmd = "fullinit" // the client waits for fullinit-response
	if init == nil {
		r.fail(wire.RcFail, fmt.Errorf("auth-response-complete: no authentication in progress: send fullinit with authtype=%s first", AuthChallengeSHA256))
		return
	}
	s.pendingInit = nil
	want := ChallengeAnswer(s.j.cfg.PortSecret, s.nonce)
	got := strings.ToLower(m.Value("authinfo"))
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		s.refuse(r, fmt.Errorf("fullinit: authentication failed: wrong answer to the %s challenge (from %s)", AuthChallengeSHA256, s.port))
		return
	}
	s.authed = true
	s.fullinit(r, init)
}

// refuse answers r with an error, logs who was refused and closes the
// connection: a peer that failed to prove who it is gets nothing more.
func (s *Session) refuse(r *request, err error) {
	s.j.log.Warn().Str("peer", s.port.String()).Str("cmd", r.cmd).Err(err).Msg("PMI connection refused")
	r.fail(wire.RcFail, err)
	s.fatal = true
	s.closeOut()
}
