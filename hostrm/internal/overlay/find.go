package overlay

// The links between a job's nodes are TCP through gopmi's authenticated
// link layer (plugin/seclink), keyed with the job's secret, which only the
// job's processes get: TLS 1.3, inside which both ends prove the secret,
// each in its role, bound to the TLS session. A node talks to no parent
// that cannot prove it, what crosses the network is encrypted, and a
// relay in the middle fails. The secret never crosses the wire.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/seclink"
)

// Roles in the links between nodes: a proof made in one cannot pass for
// another.
const (
	// RoleTreeParent begins a node's role at its listener (ParentRole
	// adds which job and node), and RoleTreeChild is the role of the
	// nodes that link to it: its children and its data's readers.
	RoleTreeParent = "tree-parent"
	RoleTreeChild  = "tree-child"
)

// Listen is l behind the job's private link: Accept returns only links
// whose peer proved secret in role peer, proving it in role; the others
// are closed and logged on log.
func Listen(l net.Listener, secret, role, peer string, log zerolog.Logger) (net.Listener, error) {
	sl, err := seclink.Listen(l, seclink.Config{Key: []byte(secret), Role: role, PeerRole: peer}, log)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("%s: the job's secret: %w", role, err)
	}
	return sl, nil
}

// Dialer returns a dial function that makes the job's private link to a
// peer that must prove secret in role peer, proving it in role. One
// Dialer keeps its TLS sessions: a link made again resumes one.
func Dialer(secret, role, peer string) func(ctx context.Context, addr string) (net.Conn, error) {
	d, err := seclink.NewDialer(seclink.Config{Key: []byte(secret), Role: role, PeerRole: peer}, nil)
	if err != nil {
		return func(context.Context, string) (net.Conn, error) {
			return nil, plugin.Wrapf(err, plugin.ErrInvalidArgument, "%s: the job's secret", role)
		}
	}
	return d.Dial
}

// DialNode links to node index i of job, trying its ports until one
// proves to be that node, for at most wait.
func DialNode(ctx context.Context, job plugin.Job, secret string, ports PortRange, i int, wait time.Duration, orGone bool) (*direct.Conn, error) {
	name := job.Nodes[i].Name
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	find := findNode
	if orGone {
		find = findNodeOrGone
	}
	conn, err := find(fctx, job, secret, ports, i)
	if errors.Is(err, ErrNoneListens) {
		return nil, fmt.Errorf("fence tree: node %s: %w", name, err) // the reader asks elsewhere
	}
	if err != nil {
		return nil, plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: node %s", name)
	}
	// The link made is the first; gRPC's later ones (after a break)
	// look again.
	var once sync.Once
	c, err := direct.Dial(ctx, name, direct.WithDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		var first net.Conn
		once.Do(func() { first, conn = conn, nil })
		if first != nil {
			return first, nil
		}
		return findNode(ctx, job, secret, ports, i)
	}))
	if err != nil {
		once.Do(func() { _ = conn.Close() }) // never handed to gRPC
		return nil, plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: node %s", name)
	}
	return c, nil
}

// ErrNoneListens: no port of a node's range has a listener, the node's
// server is not up, or no more (findNodeOrGone).
var ErrNoneListens = errors.New("no port of the node's range listens")

// findNode tries node index i's ports, again and again, until one
// proves to be that node or ctx ends.
func findNode(ctx context.Context, job plugin.Job, secret string, r PortRange, i int) (net.Conn, error) {
	return findNodeOr(ctx, job, secret, r, i, false)
}

// findNodeOrGone is findNode that gives up with ErrNoneListens after a
// pass over the ports where none has a listener but other nodes' (or
// jobs'): a reader
// whose peer's server was up (every node's listens from the job's first
// fence) learns at once that it has ended, and reads elsewhere.
func findNodeOrGone(ctx context.Context, job plugin.Job, secret string, r PortRange, i int) (net.Conn, error) {
	return findNodeOr(ctx, job, secret, r, i, true)
}

func findNodeOr(ctx context.Context, job plugin.Job, secret string, r PortRange, i int, orGone bool) (net.Conn, error) {
	host := NodeHost(job, i)
	ports := r.Ports(secret, job.Nspace, i)
	dial := Dialer(secret, RoleTreeChild, ParentRole(job.Nspace, i))
	pause := retryFirst
	// A listener that answered (another job's, another node's) says
	// more than a refused connection. It holds its port, so it is asked
	// again only now and then: each ask is a TLS handshake on both sides,
	// which a child waiting for its parent would otherwise repeat every
	// few milliseconds (the lab's nodes share one address and one set of
	// ports, and so do a shared node's jobs).
	var last, answered error
	other := map[int]time.Time{}
	for {
		notThere := 0 // ports with no listener, or another's
		for _, p := range ports {
			if t, ok := other[p]; ok && time.Since(t) < otherRecheck {
				notThere++
				continue
			}
			conn, err := dial(ctx, net.JoinHostPort(host, strconv.Itoa(p)))
			if err == nil {
				return conn, nil
			}
			last = err
			if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, seclink.ErrRefused) {
				notThere++
			}
			if errors.Is(err, seclink.ErrRefused) {
				other[p] = time.Now()
				if answered == nil {
					answered = err
				}
			}
			if ctx.Err() != nil {
				break
			}
		}
		if answered != nil {
			last = answered
		}
		if orGone && notThere == len(ports) {
			return nil, fmt.Errorf("at %s, %d ports from %d: %w", host, len(ports), ports[0], ErrNoneListens)
		}
		select {
		case <-ctx.Done():
			// The text, not the kind: a node not reached is unavailable.
			return nil, fmt.Errorf("at %s, %d ports from %d: %v", host, len(ports), ports[0], last)
		case <-time.After(pause):
		}
		pause = min(2*pause, retryMax)
	}
}
