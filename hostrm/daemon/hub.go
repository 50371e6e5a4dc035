package daemon

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
)

// A site whose runs and Slurm steps on different nodes must share one
// name space points every node's daemon at one hub: a daemon started with
// -listen, which serves the cluster's names, jobs and connects. A node's
// daemon then keeps no state of its own; it relays each local connection
// to the hub, vouching for the caller the kernel named (uid, pid and the
// pid's start time), and keeps one link of its own open on which the hub
// asks it what only the node can answer: whether a run's process still
// lives, and the keys of a run's job (its universe is a unix socket on
// that node).
//
// Both ends hold the same key, a file only root can read. Every
// connection is TLS 1.3, whose certificates nothing verifies: instead,
// inside it, each end proves it holds the key with an HMAC-SHA256 over
// both ends' fresh nonces, the caller's identity and the TLS session's
// exported keying material (channel binding, RFC 9266's idea). So neither
// a process without the key, nor a replay, nor a relay in the middle
// (whose two TLS sessions export different material) can pass for a node
// or for the hub, and what follows is private and cannot be altered.

// Roles of a connection to the hub.
const (
	// roleCall is a local caller's connection, relayed: the hub serves
	// it as the daemon serves a local one, with the vouched identity.
	roleCall = "call"
	// roleNode is the node's own link: the hub calls the node on it.
	roleNode = "node"
)

// hubProto starts the hub's side of every handshake.
const hubProto = "gopmi-hub/1"

// handshakeTimeout bounds a handshake, from either end: well within the
// 10 s a caller of the node's daemon waits, so that it hears why.
const handshakeTimeout = 5 * time.Second

// tlsTimeout bounds the TLS handshake, the part of it that an
// unauthenticated peer controls.
const tlsTimeout = 2 * time.Second

// bindingLabel names the TLS exporter the proofs are bound to.
const bindingLabel = "EXPORTER-gopmi-hub-link/1"

// hubTLS is a hub's TLS configuration: a certificate made when the hub
// starts, which nothing verifies (the key proves who the hub is, bound to
// the session).
func hubTLS() (*tls.Config, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gopmi hub"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(100, 0, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}}, MinVersion: tls.VersionTLS13}, nil
}

// nodeTLS is a node's: it takes any certificate, since the hub proves
// itself with the key, bound to the session, after the TLS handshake.
var nodeTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} //nolint:gosec // authenticated by the key, see acceptHello

// bindingOf is c's exported keying material: the same at both ends of
// one TLS session, different for two sessions spliced by a relay in the
// middle.
func bindingOf(c *tls.Conn) (string, error) {
	st := c.ConnectionState()
	b, err := st.ExportKeyingMaterial(bindingLabel, nil, 32)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// hello is what a node says of a connection: its role, its node and, for
// a relayed call, who the kernel said the caller is.
type hello struct {
	Role  string `json:"role"`
	Node  string `json:"node"`
	UID   uint32 `json:"uid"`
	PID   int32  `json:"pid"`
	Start string `json:"start,omitempty"`
}

// minKey is the shortest link key taken, in bytes.
const minKey = 16

// LoadKey reads the link key from path: a file that only its owner, root
// or the daemon's own user, may read or write, holding at least 16 bytes
// besides surrounding white space (`head -c 32 /dev/urandom | base64`).
func LoadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("link key %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("link key %s may be read or written by others (mode %04o): chmod 600 %s", path, perm, path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("link key %s belongs to uid %d, neither root nor this daemon's user", path, sys.Uid)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < minKey {
		return nil, fmt.Errorf("link key %s holds %d bytes; want %d at least (head -c 32 /dev/urandom | base64 > %s)", path, len(b), minKey, path)
	}
	return b, nil
}

// proof is the HMAC of parts under key, hex-encoded; parts are separated
// so that no two lists prove alike.
func proof(key []byte, parts ...string) string {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func nonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bufConn is a connection whose first bytes were read through r: the
// rest is read through it too, so that nothing it buffered is lost.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// readLine reads one handshake line.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("handshake line too long")
		}
		return "", err
	}
	return strings.TrimSuffix(string(line), "\n"), nil
}

// errRefused is a handshake the other end did not pass.
var errRefused = errors.New("refused")

// acceptHello is the hub's side of a handshake on c: TLS, then it
// challenges the node, checks its proof and its hello, and proves it
// holds the key too. The connection that comes back is the TLS session,
// reading what followed the handshake.
//
// admit, when not nil, may refuse a node that proved it holds the key,
// saying why.
func acceptHello(c net.Conn, key []byte, cfg *tls.Config, admit func(hello) error) (net.Conn, hello, error) {
	var h hello
	// TLS's first messages come at once from a real node: a connection
	// that sends nothing holds a handshake's place for a short while.
	_ = c.SetDeadline(time.Now().Add(tlsTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	tc := tls.Server(c, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, h, fmt.Errorf("TLS: %w", err)
	}
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	binding, err := bindingOf(tc)
	if err != nil {
		return nil, h, err
	}
	hubNonce := nonce()
	if _, err := io.WriteString(tc, hubProto+" "+hubNonce+"\n"); err != nil {
		return nil, h, err
	}
	r := bufio.NewReaderSize(tc, 4096)
	line, err := readLine(r)
	if err != nil {
		return nil, h, fmt.Errorf("read the node's hello: %w", err)
	}
	refuse := func(why string) (net.Conn, hello, error) {
		_, _ = io.WriteString(tc, "refused "+why+"\n")
		return nil, h, fmt.Errorf("%w: %s", errRefused, why)
	}
	parts := strings.SplitN(line, " ", 3)
	if len(parts) != 3 {
		return refuse("malformed hello")
	}
	nodeNonce, got, body := parts[0], parts[1], parts[2]
	if !hmac.Equal([]byte(got), []byte(proof(key, "node", hubNonce, nodeNonce, binding, body))) {
		return refuse("wrong proof: the node does not hold the hub's link key")
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || h.Node == "" || (h.Role != roleCall && h.Role != roleNode) {
		return refuse(fmt.Sprintf("bad hello %q", body))
	}
	if admit != nil {
		if err := admit(h); err != nil {
			return refuse(err.Error())
		}
	}
	if _, err := io.WriteString(tc, "ok "+proof(key, "hub", nodeNonce, hubNonce, binding, body)+"\n"); err != nil {
		return nil, h, err
	}
	return &bufConn{Conn: tc, r: r}, h, nil
}

// offerHello is a node's side of a handshake on c: TLS, then it answers
// the hub's challenge with h and checks that the hub proves it holds the
// key.
func offerHello(c net.Conn, key []byte, h hello) (net.Conn, error) {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	tc := tls.Client(c, nodeTLS)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	binding, err := bindingOf(tc)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(tc, 4096)
	line, err := readLine(r)
	if err != nil {
		return nil, fmt.Errorf("read the hub's challenge: %w", err)
	}
	hubNonce, ok := strings.CutPrefix(line, hubProto+" ")
	if !ok {
		return nil, fmt.Errorf("not a gopmi hub (it said %q)", line[:min(len(line), 40)])
	}
	body, _ := json.Marshal(h)
	nodeNonce := nonce()
	if _, err := io.WriteString(tc, nodeNonce+" "+proof(key, "node", hubNonce, nodeNonce, binding, string(body))+" "+string(body)+"\n"); err != nil {
		return nil, err
	}
	line, err = readLine(r)
	if err != nil {
		return nil, fmt.Errorf("read the hub's answer: %w", err)
	}
	if why, ok := strings.CutPrefix(line, "refused "); ok {
		return nil, fmt.Errorf("%w by the hub: %s", errRefused, why)
	}
	got, ok := strings.CutPrefix(line, "ok ")
	if !ok || !hmac.Equal([]byte(got), []byte(proof(key, "hub", nodeNonce, hubNonce, binding, string(body)))) {
		return nil, fmt.Errorf("%w: the hub does not prove it holds the link key", errRefused)
	}
	return &bufConn{Conn: tc, r: r}, nil
}

// Queries a node answers its hub on the node's own link.
const (
	// queryAlive: is the process (qualifiers "pid", "start") running on
	// the node? "yes" or "no".
	queryAlive = "gopmi.node.alive"
	// queryModex: a plugin.ModexRequest (qualifier "request", JSON) asked
	// of the universe at qualifier "universe", which must be served by
	// the run's process (qualifiers "uid", "pid"); the answer is the
	// plugin.ModexResponse, JSON.
	queryModex = "gopmi.node.modex"
)

// Bounds on what other nodes may hold open at the hub.
const (
	// maxHandshakes is how many connections may be in their handshake at
	// once, and maxHandshakesPerHost from one host; more are closed at
	// once. A host that floods the hub with connections that never speak
	// holds its own few places, each for tlsTimeout, not the cluster's.
	maxHandshakes        = 256
	maxHandshakesPerHost = 8
	// maxCallsPerUser is how many relayed connections one user of one
	// node may hold open: a run holds one, a tool one while it runs.
	maxCallsPerUser = 256
)

// ServeHub serves the cluster's name space on l (TCP) to the daemons of
// other nodes, which must hold key, until ctx ends. Each refused
// handshake is logged.
func (s *Server) ServeHub(ctx context.Context, l net.Listener, key []byte) error {
	cfg, err := hubTLS()
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("hub: TLS certificate: %w", err)
	}
	return link.Accept(ctx, l, func(ctx context.Context, c net.Conn) {
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		if !s.shaking.hold(host, maxHandshakesPerHost, maxHandshakes) {
			s.log.Debug().Str("from", c.RemoteAddr().String()).Msg("hub: too many handshakes at once; closing a connection")
			_ = c.Close()
			return
		}
		s.hubConn(ctx, c, key, cfg, func() { s.shaking.release(host) })
	})
}

// hubConn serves one connection from a node: a relayed call, or the node's
// own link. shaken is called once the handshake is over.
func (s *Server) hubConn(ctx context.Context, c net.Conn, key []byte, cfg *tls.Config, shaken func()) {
	from := c.RemoteAddr().String()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	host, _, _ := net.SplitHostPort(from)
	bc, h, err := acceptHello(c, key, cfg, func(h hello) error { return s.admitNode(h, host) })
	stop()
	shaken()
	if err != nil {
		ev := s.log.Debug()
		if errors.Is(err, errRefused) {
			// The same refusal of the same host once a minute: a node
			// with the wrong key tries every second.
			if ok, _ := s.refused.news("hub " + host + " " + err.Error()); ok {
				ev = s.log.Warn()
			}
		}
		ev.Str("from", from).Err(err).Msg("hub: handshake refused")
		_ = c.Close()
		return
	}
	switch h.Role {
	case roleCall:
		calls := h.Node + "/" + strconv.FormatUint(uint64(h.UID), 10)
		if !s.calls.hold(calls, maxCallsPerUser, 0) {
			s.log.Warn().Str("node", h.Node).Uint32("uid", h.UID).Int("open", maxCallsPerUser).Msg("hub: too many connections of one user of one node; refusing one")
			link.FailCalls(ctx, bc, plugin.Errorf(plugin.ErrUnavailable, "the hub holds %d connections of uid %d from node %s already", maxCallsPerUser, h.UID, h.Node), time.Second)
			return
		}
		defer s.calls.release(calls)
		link.ServeConn(ctx, bc, s, func(ctx context.Context, _ net.Conn) context.Context {
			return withPeer(ctx, peer{uid: h.UID, pid: h.PID, node: h.Node, start: h.Start})
		})
	case roleNode:
		lc := link.NewConn(bc)
		s.addNode(h.Node, from, lc)
		select {
		case <-lc.Done():
		case <-ctx.Done():
		}
		s.dropNode(h.Node, lc)
		_ = lc.Close()
	}
}

// nodeLink is a node's own link to its hub, and where it came from.
type nodeLink struct {
	c    *link.Conn
	from string // host:port
}

// admitNode refuses what would make two nodes share a name, which would
// take turns answering for each other: calls from a host other than the
// one node is linked from, and a second link of node while its first
// still answers (from the same host too: a daemon that restarted has
// closed its old link, or left one that no longer answers).
func (s *Server) admitNode(h hello, host string) error {
	s.mu.Lock()
	old := s.nodes[h.Node]
	s.mu.Unlock()
	if old == nil {
		return nil
	}
	oldHost, _, _ := net.SplitHostPort(old.from)
	if oldHost != host {
		return fmt.Errorf("duplicate node: %s is linked from host %s (-node must name each node once)", h.Node, oldHost)
	}
	if h.Role != roleNode {
		return nil
	}
	select {
	case <-old.c.Done():
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := old.c.Backend().GetInfo(ctx); err != nil {
		return nil // gone or wedged: the new link replaces it
	}
	return fmt.Errorf("duplicate node: %s is linked from %s, which still answers (-node must name each node once)", h.Node, old.from)
}

// addNode keeps a node's own link, replacing one admitNode found gone.
func (s *Server) addNode(node, from string, c *link.Conn) {
	s.mu.Lock()
	old := s.nodes[node]
	if s.nodes == nil {
		s.nodes = map[string]*nodeLink{}
	}
	s.nodes[node] = &nodeLink{c: c, from: from}
	s.mu.Unlock()
	if old != nil {
		_ = old.c.Close()
	}
	s.log.Info().Str("node", node).Str("from", from).Msg("hub: node linked")
}

func (s *Server) dropNode(node string, c *link.Conn) {
	s.mu.Lock()
	gone := s.nodes[node] != nil && s.nodes[node].c == c
	if gone {
		delete(s.nodes, node)
	}
	s.mu.Unlock()
	if gone {
		s.log.Warn().Str("node", node).Msg("hub: node's link closed")
	}
}

// linkOf is node's own link, nil when it has none.
func (s *Server) linkOf(node string) *link.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[node]; n != nil {
		return n.c
	}
	return nil
}

// remoteAlive asks r's node whether r's process runs; a node that does not
// answer leaves the question open (alive: the grace decides).
func (s *Server) remoteAlive(node string, pid int, start string) bool {
	c := s.linkOf(node)
	if c == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Backend().Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{queryAlive},
		Qualifiers: []plugin.Info{{Key: "pid", Value: fmt.Sprint(pid)}, {Key: "start", Value: start}}}}})
	if err != nil || len(resp.Results) != 1 {
		return true
	}
	return resp.Results[0].Value != "no"
}

// remoteModex reads a job's keys from its run's universe on node.
func (s *Server) remoteModex(ctx context.Context, node, universe string, uid uint32, pid int, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	c := s.linkOf(node)
	if c == nil {
		return nil, plugin.Errorf(plugin.ErrUnavailable, "node %s has no link to the hub", node)
	}
	body, _ := json.Marshal(req)
	resp, err := c.Backend().Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: []string{queryModex},
		Qualifiers: []plugin.Info{{Key: "universe", Value: universe}, {Key: "uid", Value: strconv.FormatUint(uint64(uid), 10)},
			{Key: "pid", Value: strconv.Itoa(pid)}, {Key: "request", Value: string(body)}}}}})
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != 1 {
		return nil, plugin.Errorf(plugin.ErrUnavailable, "node %s gave no answer", node)
	}
	out := &plugin.ModexResponse{}
	if err := json.Unmarshal([]byte(resp.Results[0].Value), out); err != nil {
		return nil, plugin.Errorf(plugin.ErrUnavailable, "node %s: bad answer: %v", node, err)
	}
	return out, nil
}
