package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
	"github.com/gopmi/gopmi/plugin/seclink"
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
// connection is gopmi's authenticated link (plugin/seclink): TLS 1.3,
// inside which each end proves it holds the key, in its role ("hub" or
// "node"), over both ends' fresh nonces, the caller's identity (the
// link's hello) and the TLS session's exported keying material. So
// neither a process without the key, nor a replay, nor a relay in the
// middle can pass for a node or for the hub, and what follows is private
// and cannot be altered. What the hub adds is policy: how many
// handshakes a host may hold, which hello it takes, which node names.

// Roles of a connection to the hub, as its hello says.
const (
	// roleCall is a local caller's connection, relayed: the hub serves
	// it as the daemon serves a local one, with the vouched identity.
	roleCall = "call"
	// roleNode is the node's own link: the hub calls the node on it.
	roleNode = "node"
)

// The roles of the two ends of every hub connection in the link layer
// (plugin/seclink): a proof made by one cannot pass for the other.
const (
	linkHub  = "hub"
	linkNode = "node"
)

// hello is what a node says of a connection: its role, its node and, for
// a relayed call, who the kernel said the caller is. It is the link's
// hello, sealed by the node's proof.
type hello struct {
	Role  string `json:"role"`
	Node  string `json:"node"`
	UID   uint32 `json:"uid"`
	PID   int32  `json:"pid"`
	Start string `json:"start,omitempty"`
}

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
	if len(b) < seclink.MinKey {
		return nil, fmt.Errorf("link key %s holds %d bytes; want %d at least (head -c 32 /dev/urandom | base64 > %s)", path, len(b), seclink.MinKey, path)
	}
	return b, nil
}

// hubLink is the hub's end of a connection from host: the node must
// prove key and say a well-formed hello, which admitNode may still
// refuse; the hello is left in h.
func (s *Server) hubLink(key []byte, host string, h *hello) *seclink.Config {
	return &seclink.Config{Key: key, Role: linkHub, PeerRole: linkNode, Admit: func(_ net.Addr, body []byte) error {
		if err := json.Unmarshal(body, h); err != nil || h.Node == "" || (h.Role != roleCall && h.Role != roleNode) {
			return fmt.Errorf("bad hello %q", body)
		}
		return s.admitNode(*h, host)
	}}
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
	// once, and maxHandshakesPerHost from one host (one user, on the
	// hub's own host); more are closed at once. Root's connections, from
	// a privileged port (a relay's), have places of their own that no
	// other user's take. A host or user that floods the hub with
	// connections that never speak holds its own few places, each for
	// the link's TLS time-out (seclink.DefaultTLSTimeout), not the
	// cluster's, nor root's.
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
	if len(key) < seclink.MinKey {
		_ = l.Close()
		return fmt.Errorf("hub: a link key of %d bytes; want %d at least", len(key), seclink.MinKey)
	}
	return link.Accept(ctx, l, func(ctx context.Context, c net.Conn) {
		who, root := handshaker(c)
		pool := &s.shaking
		if root {
			pool = &s.shakingRoot
		}
		if !pool.hold(who, maxHandshakesPerHost, maxHandshakes) {
			if ok, notLogged := s.refused.news("handshakes " + who); ok {
				ev := s.log.Warn().Str("from", c.RemoteAddr().String()).Str("who", who).Int("per_host", maxHandshakesPerHost).Int("all", maxHandshakes)
				if notLogged > 0 {
					ev = ev.Int("same_refusals_not_logged", notLogged)
				}
				ev.Msg("hub: too many handshakes at once; closing a connection")
			}
			_ = c.Close()
			return
		}
		s.hubConn(ctx, c, key, func() { pool.release(who) })
	})
}

// handshaker is whose places a connection to the hub takes while in its
// handshake, and whether they are root's: a connection from a privileged
// port (below 1024; only root binds one, as a node's relay does) takes
// root's places of its host, any other the places of its host for every
// other user; a connection from the hub's own host (a loopback address,
// every one of 127.0.0.0/8, or the hub's own) takes its user's places,
// by the uid the kernel gives for its 4-tuple, so that addresses of her
// own cost a user only her own.
func handshaker(c net.Conn) (who string, root bool) {
	ra, _ := c.RemoteAddr().(*net.TCPAddr)
	la, _ := c.LocalAddr().(*net.TCPAddr)
	if ra == nil || la == nil {
		return c.RemoteAddr().String(), false
	}
	return handshakerOf(ra, la, func() (int, error) {
		sk, err := peercred.LookupTCP(ra, la)
		return sk.UID, err
	})
}

// handshakerOf is handshaker for a connection from ra to la, with the
// uid of its peer's socket from owner (asked for a local peer only).
func handshakerOf(ra, la *net.TCPAddr, owner func() (int, error)) (who string, root bool) {
	root = ra.Port < 1024
	if ra.IP.IsLoopback() || ra.IP.Equal(la.IP) {
		if uid, err := owner(); err == nil {
			return "uid " + strconv.Itoa(uid) + " of this host", root
		}
	}
	return ra.IP.String(), root
}

// hubConn serves one connection from a node: a relayed call, or the node's
// own link. shaken is called once the handshake is over.
func (s *Server) hubConn(ctx context.Context, c net.Conn, key []byte, shaken func()) {
	from := c.RemoteAddr().String()
	host, _, _ := net.SplitHostPort(from)
	var h hello
	bc, err := seclink.Server(ctx, c, s.hubLink(key, host, &h))
	shaken()
	if err != nil {
		ev := s.log.Debug()
		if errors.Is(err, seclink.ErrRefused) {
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
		p := peer{uid: h.UID, pid: h.PID, node: h.Node, start: h.Start}
		lim := link.Limits{}
		if !s.opts.unbounded(h.UID) {
			lim = s.limitsOf(calls, fmt.Sprintf("uid %d of node %s", h.UID, h.Node), p)
		}
		link.ServeConnLimited(ctx, bc, s, func(ctx context.Context, _ net.Conn) context.Context { return withPeer(ctx, p) }, lim)
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
