package seclink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Proto starts the accepting end's first line: a version of the
// handshake, so that a later one can be told apart.
const Proto = "gopmi-seclink/1"

// Bounds of a handshake.
const (
	// DefaultTimeout bounds a whole handshake, from either end, unless
	// Config.Timeout says otherwise: well within the 10 s a caller of a
	// node daemon waits, so that it hears why.
	DefaultTimeout = 5 * time.Second
	// DefaultTLSTimeout bounds the accepting end's TLS handshake, the
	// part a peer without the key controls: a real peer's first messages
	// come at once, so one that sends nothing holds a place only briefly.
	DefaultTLSTimeout = 2 * time.Second
	// MaxHello is the longest hello, in bytes.
	MaxHello = 4096
	// MinKey is the shortest key taken, in bytes.
	MinKey = 16
	// maxRole is the longest role.
	maxRole = 64
	// maxLine bounds a handshake line: a role, a nonce, a proof and a
	// hello, with their separators.
	maxLine = MaxHello + maxRole + 2*64 + 16
)

// bindingLabel names the TLS exporter the proofs are bound to.
const bindingLabel = "EXPORTER-gopmi-seclink/1"

// ErrRefused is what a handshake that one end did not pass wraps, at
// both ends; it is a plugin.ErrPermission.
var ErrRefused = plugin.Errorf(plugin.ErrPermission, "refused")

// Config is one end of a link: the key both ends hold, this end's role
// and the role the other end must have.
type Config struct {
	// Key is the shared key, MinKey bytes at least.
	Key []byte
	// Role is this end's role ("hub", "coordinator", "tree-parent" at an
	// accepting end; "node", "tree-child" at a dialling one), PeerRole
	// the other end's. A role is a word: no space, no newline.
	Role, PeerRole string
	// Timeout bounds the whole handshake; default DefaultTimeout. A
	// dialler's context deadline shortens it.
	Timeout time.Duration
	// TLSTimeout bounds the accepting end's TLS handshake; default
	// DefaultTLSTimeout.
	TLSTimeout time.Duration
	// Admit, at an accepting end and when not nil, may refuse a peer
	// that proved the key, given its address and hello: the error's
	// text is what the peer reads as the reason.
	Admit func(from net.Addr, hello []byte) error
	// Privileged, at a dialling end, connects from a privileged port
	// (below 1024) when the process may bind one (root may): the
	// accepting end can then tell root's connections from any other
	// user's before the handshake (a node daemon's hub keeps places for
	// them). A process that may not dials from any port, as without it.
	Privileged bool
}

// check refuses a Config that cannot make a handshake.
func (c *Config) check() error {
	switch {
	case len(c.Key) < MinKey:
		return plugin.Errorf(plugin.ErrInvalidArgument, "seclink: the key holds %d bytes, want %d at least", len(c.Key), MinKey)
	case !validRole(c.Role) || !validRole(c.PeerRole):
		return plugin.Errorf(plugin.ErrInvalidArgument, "seclink: roles %q and %q: each must be a word of at most %d bytes", c.Role, c.PeerRole, maxRole)
	}
	return nil
}

func validRole(r string) bool {
	return r != "" && len(r) <= maxRole && !strings.ContainsAny(r, " \n\r\t\x00")
}

func (c *Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Config) tlsTimeout() time.Duration {
	t := DefaultTLSTimeout
	if c.TLSTimeout > 0 {
		t = c.TLSTimeout
	}
	return min(t, c.timeout())
}

// Conn is a connection that passed the handshake: a TLS 1.3 session
// whose peer proved the key in its role.
type Conn struct {
	*tls.Conn
	r     *bufio.Reader // what the handshake's reader buffered past its lines
	hello []byte
	role  string
}

// Read reads what the peer sent after the handshake.
func (c *Conn) Read(b []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(b)
		}
		c.r = nil // drained: read the session itself, without a copy
	}
	return c.Conn.Read(b)
}

// Hello is what the dialling end said of itself.
func (c *Conn) Hello() []byte { return c.hello }

// PeerRole is the role the peer proved.
func (c *Conn) PeerRole() string { return c.role }

// SelfSigned is a TLS server configuration with a fresh certificate that
// signs itself: what an accepting end of the layer shows (nothing
// verifies it: the key proves who an end is, bound to the session), and
// what a test's impostor shows.
func SelfSigned() (*tls.Config, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gopmi seclink"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(100, 0, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}}, MinVersion: tls.VersionTLS13}, nil
}

// serverTLS is the process's own certificate, made on first use: one
// serves every link of the process.
var serverTLS = sync.OnceValues(SelfSigned)

// clientTLS takes any certificate: the accepting end proves itself with
// the key, bound to the session, after the TLS handshake. sessions, when
// not nil, resumes earlier sessions with the same peer.
func clientTLS(sessions tls.ClientSessionCache) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, ClientSessionCache: sessions} //nolint:gosec // authenticated by the key, see proveServer
}

// bindingOf is c's exported keying material: the same at both ends of
// one TLS session, different for two sessions spliced by a relay.
func bindingOf(c *tls.Conn) ([]byte, error) {
	st := c.ConnectionState()
	return st.ExportKeyingMaterial(bindingLabel, nil, 32)
}

// Which end made a proof.
const (
	byDialler  = "dialler"
	byAcceptor = "acceptor"
)

// proof is the HMAC under key of who made it (side, its role, the role of
// the end it proves itself to), both nonces, the session's binding and
// the hello, hex. Each part goes in with its length, so that no two lists
// prove alike.
func proof(key []byte, side, prover, verifier, acceptorNonce, diallerNonce string, binding, hello []byte) string {
	h := hmac.New(sha256.New, key)
	var n [8]byte
	for _, p := range [][]byte{[]byte(Proto), []byte(side), []byte(prover), []byte(verifier), []byte(acceptorNonce), []byte(diallerNonce), binding, hello} {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func nonce() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// readLine reads one handshake line, bounded by r's buffer.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", fmt.Errorf("%w: a handshake line longer than %d bytes", ErrRefused, r.Size())
		}
		return "", err
	}
	return strings.TrimSuffix(string(line), "\n"), nil
}

// watch makes ctx's end interrupt c's blocking calls (a deadline in the
// past) until the returned stop is called.
func watch(ctx context.Context, c net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
}

// stepErr names a failed step; a passed deadline or an ended ctx wraps
// plugin.ErrTimeout, a peer gone plugin.ErrUnavailable.
func stepErr(ctx context.Context, step string, err error) error {
	switch {
	case errors.Is(err, ErrRefused):
		return fmt.Errorf("%s: %w", step, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w: %w", step, ctx.Err(), plugin.ErrTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%s: no answer before the handshake's deadline: %w", step, plugin.ErrTimeout)
	}
	return fmt.Errorf("%s: %w: %w", step, err, plugin.ErrUnavailable)
}

// Server runs the accepting end's handshake on c: TLS, then it
// challenges the peer, checks the peer's role, proof and (Admit) hello,
// and proves it holds the key in turn. It returns the session, which
// reads what followed the handshake; on an error the caller closes c.
func Server(ctx context.Context, c net.Conn, cfg *Config) (*Conn, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	tcfg, err := serverTLS()
	if err != nil {
		return nil, fmt.Errorf("seclink: certificate: %w", err)
	}
	start := time.Now()
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	stop := watch(ctx, c)
	defer stop()
	_ = c.SetDeadline(start.Add(cfg.tlsTimeout()))
	tc := tls.Server(c, tcfg)
	if err := tc.Handshake(); err != nil {
		return nil, stepErr(ctx, "TLS", err)
	}
	_ = c.SetDeadline(start.Add(cfg.timeout()))
	binding, err := bindingOf(tc)
	if err != nil {
		return nil, fmt.Errorf("TLS binding: %w", err)
	}
	ours, err := nonce()
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tc, Proto+" "+cfg.Role+" "+ours+"\n"); err != nil {
		return nil, stepErr(ctx, "send the challenge", err)
	}
	r := bufio.NewReaderSize(tc, maxLine)
	line, err := readLine(r)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			_, _ = io.WriteString(tc, "refused hello longer than "+fmt.Sprint(MaxHello)+" bytes\n")
		}
		return nil, stepErr(ctx, "read the "+cfg.PeerRole+"'s hello", err)
	}
	refuse := func(why string) (*Conn, error) {
		_, _ = io.WriteString(tc, "refused "+why+"\n")
		return nil, fmt.Errorf("%w: %s", ErrRefused, why)
	}
	parts := strings.SplitN(line, " ", 4)
	if len(parts) != 4 {
		return refuse("malformed hello")
	}
	role, theirs, got, hello := parts[0], parts[1], parts[2], []byte(parts[3])
	if role != cfg.PeerRole {
		return refuse(fmt.Sprintf("a %s is not served here, only a %s", clip(role), cfg.PeerRole))
	}
	if len(theirs) != 64 {
		return refuse("malformed nonce")
	}
	if !hmac.Equal([]byte(got), []byte(proof(cfg.Key, byDialler, role, cfg.Role, ours, theirs, binding, hello))) {
		return refuse("wrong proof: the " + cfg.PeerRole + " does not hold the key")
	}
	if cfg.Admit != nil {
		if err := cfg.Admit(c.RemoteAddr(), hello); err != nil {
			return refuse(strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	if _, err := io.WriteString(tc, "ok "+proof(cfg.Key, byAcceptor, cfg.Role, role, ours, theirs, binding, hello)+"\n"); err != nil {
		return nil, stepErr(ctx, "send the proof", err)
	}
	if ctx.Err() != nil {
		return nil, stepErr(ctx, "handshake", ctx.Err())
	}
	return &Conn{Conn: tc, r: r, hello: hello, role: role}, nil
}

// Client runs the dialling end's handshake on c with hello (at most
// MaxHello bytes, no newline): TLS, then it answers the accepting end's
// challenge and checks that the accepting end proves it holds the key in
// the role cfg.PeerRole. On an error the caller closes c.
func Client(ctx context.Context, c net.Conn, cfg *Config, hello []byte) (*Conn, error) {
	return client(ctx, c, cfg, hello, nil)
}

func client(ctx context.Context, c net.Conn, cfg *Config, hello []byte, sessions tls.ClientSessionCache) (*Conn, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if len(hello) > MaxHello || bytes.ContainsAny(hello, "\n\r") {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "seclink: a hello of %d bytes, or with a newline: at most %d, on one line", len(hello), MaxHello)
	}
	deadline := time.Now().Add(cfg.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	stop := watch(ctx, c)
	defer stop()
	tc := tls.Client(c, clientTLS(sessions))
	if err := tc.Handshake(); err != nil {
		return nil, stepErr(ctx, "TLS", err)
	}
	binding, err := bindingOf(tc)
	if err != nil {
		return nil, fmt.Errorf("TLS binding: %w", err)
	}
	r := bufio.NewReaderSize(tc, maxLine)
	line, err := readLine(r)
	if err != nil {
		return nil, stepErr(ctx, "read the "+cfg.PeerRole+"'s challenge", err)
	}
	rest, ok := strings.CutPrefix(line, Proto+" ")
	role, theirs, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%w: not a gopmi %s (it said %q)", ErrRefused, cfg.PeerRole, clip(line))
	}
	if role != cfg.PeerRole {
		return nil, fmt.Errorf("%w: not a %s: it says it is a %s", ErrRefused, cfg.PeerRole, clip(role))
	}
	ours, err := nonce()
	if err != nil {
		return nil, err
	}
	msg := cfg.Role + " " + ours + " " + proof(cfg.Key, byDialler, cfg.Role, role, theirs, ours, binding, hello) + " " + string(hello) + "\n"
	if _, err := io.WriteString(tc, msg); err != nil {
		return nil, stepErr(ctx, "send the hello", err)
	}
	line, err = readLine(r)
	if err != nil {
		return nil, stepErr(ctx, "read the "+cfg.PeerRole+"'s answer", err)
	}
	if why, ok := strings.CutPrefix(line, "refused "); ok {
		return nil, fmt.Errorf("%w by the %s: %s", ErrRefused, cfg.PeerRole, why)
	}
	got, ok := strings.CutPrefix(line, "ok ")
	if !ok || !hmac.Equal([]byte(got), []byte(proof(cfg.Key, byAcceptor, role, cfg.Role, theirs, ours, binding, hello))) {
		return nil, fmt.Errorf("%w: the %s does not prove it holds the key", ErrRefused, cfg.PeerRole)
	}
	if ctx.Err() != nil {
		return nil, stepErr(ctx, "handshake", ctx.Err())
	}
	return &Conn{Conn: tc, r: r, hello: hello, role: role}, nil
}

// clip shortens what a peer said for a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
