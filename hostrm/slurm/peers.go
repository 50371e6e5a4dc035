package slurm

// How a step's nodes find each other without the coordinator. A node
// with children listens at its own address (the layout's Addr, Slurm's
// NodeAddr, else its name) on a port every node of the step can compute:
// the first free one of a short list drawn from the step secret and the
// job's namespace. A child tries its parent's list in order; the
// step's private link proves, in the listener's role, which job and node
// it is, so another step's listener, or another node of the step on the
// same host, is refused at once and the next port tried. Nothing is
// published anywhere: at a thousand nodes the coordinator sees only the
// nodes at the top of the tree.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	"github.com/gopmi/gopmi/plugin/seclink"
)

const (
	// portTries is how many ports of the range a node tries to listen
	// on, and a child tries to reach its parent at.
	portTries = 16
	// ancestorWait is how long a node tries its parent before it goes
	// to the parent's parent, and so on up to the coordinator: a node
	// whose tasks never speak PMI (an MPMD step's other program) starts
	// no gopmi, and its subtree must still reach the coordinator.
	ancestorWait = 2 * time.Second
	// retryFirst and retryMax pace the tries of a parent that does not
	// listen yet (its gopmi starts with its tasks' first PMI call).
	retryFirst = time.Millisecond
	retryMax   = 10 * time.Millisecond
	// rejoinFirst and rejoinMax pace a node's tries of the ancestors its
	// link up went past (Node.rejoin), each try at most rejoinTry: a
	// parent that never comes (an MPMD step's program that speaks no
	// PMI) costs a few refused connections every rejoinMax.
	rejoinFirst = 100 * time.Millisecond
	rejoinMax   = 10 * time.Second
	rejoinTry   = 500 * time.Millisecond
	// otherRecheck is how long a child looking for its parent leaves
	// alone a port where another listener answered.
	otherRecheck = time.Second
)

// portRange is the ports the step's nodes draw their listening ports
// from, inclusive (-tree-ports LOW-HIGH, mpi.conf's GopmiTreePorts).
type portRange struct{ low, high int }

// defaultPorts lies below Linux's ephemeral range (32768-60999), where
// outgoing connections take their ports.
var defaultPorts = portRange{20000, 32767}

func (r portRange) String() string {
	if r.high == 0 {
		r = defaultPorts
	}
	return strconv.Itoa(r.low) + "-" + strconv.Itoa(r.high)
}

// configTreePorts begins the Configure config a node sends up: its port
// range (ConfigTreePorts reads it at the coordinator).
const configTreePorts = "tree-ports="

// ConfigTreePorts is the port range a node's Configure config names, for
// NewJobReader ("" when it names none).
func ConfigTreePorts(config []byte) string {
	s, ok := strings.CutPrefix(string(config), configTreePorts)
	if !ok {
		return ""
	}
	return s
}

// parsePorts reads "LOW-HIGH"; anything else is the default range.
func parsePorts(s string) portRange {
	lo, hi, ok := strings.Cut(s, "-")
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil || l < 1 || h > 65535 || h-l+1 < portTries {
		return defaultPorts
	}
	return portRange{l, h}
}

// ports are the ports node index i's listener may be at, in the order
// it tries them and its children do: portTries consecutive ones
// (wrapping in the range) from a start drawn from the secret and the
// namespace, so that a step and the steps it spawned, which share the
// secret, start apart, and turned by the node's index, so that nodes
// sharing a host (several slurmd on one machine) each find theirs first.
func (r portRange) ports(secret, nspace string, i int) []int {
	if r.high == 0 {
		r = defaultPorts
	}
	h := sha256.Sum256([]byte(secret + "\x00" + nspace))
	n := r.high - r.low + 1
	start := int(binary.BigEndian.Uint32(h[:4]) % uint32(n))
	out := make([]int, portTries)
	for k := range out {
		out[k] = r.low + (start+(i+k)%portTries)%n
	}
	return out
}

// parentRole is the role node index i of job nspace proves at its
// listener: a child reaching another job's or another node's listener
// (same host, same secret) is refused in the handshake.
func parentRole(nspace string, i int) string {
	h := sha256.Sum256([]byte(nspace))
	return roleTreeParent + "/" + hex.EncodeToString(h[:6]) + "/" + strconv.Itoa(i)
}

// nodeHost is where node index i is reached: its Addr, else its name.
func nodeHost(job plugin.Job, i int) string {
	if a := job.Nodes[i].Addr; a != "" {
		return a
	}
	return job.Nodes[i].Name
}

// listenTree listens at this node's host on the first of its ports that
// is free, or, when the host is not one of this machine's addresses, on
// every address with that port.
func (t *tree) listenTree() (net.Listener, error) {
	host := nodeHost(t.Job, t.Self)
	var last error
	for _, p := range t.ports.ports(t.secret, t.Job.Nspace, t.Self) {
		l, err := t.listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			l, err = t.listen("tcp", net.JoinHostPort("", strconv.Itoa(p)))
		}
		if err == nil {
			t.addr = l.Addr().String()
			return l, nil
		}
		last = err
	}
	ps := t.ports.ports(t.secret, t.Job.Nspace, t.Self)
	return nil, fmt.Errorf("at %s, none of %d ports from %d (in %d-%d) is free: %w", host, len(ps), ps[0], t.ports.low, t.ports.high, last)
}

// dialAbove links this node to the nearest of its ancestors that answers
// in time (and whose link never broke): its parent, else after
// ancestorWait the parent's parent, and so on; it returns the link and
// the ancestor's index. Nil and -1: none did (or this node is at the
// top, or not configured): the caller links to the coordinator.
func (n *Node) dialAbove(ctx context.Context) (*direct.Conn, int) {
	n.mu.Lock()
	above, t := n.above, n.tree
	var alive []int
	for _, a := range above {
		if !n.lost[a] {
			alive = append(alive, a)
		}
	}
	n.mu.Unlock()
	for _, a := range alive {
		c, err := dialNode(ctx, t.Job, t.secret, t.ports, a, n.ancestorWait, false)
		if err == nil {
			return c, a
		}
		if ctx.Err() != nil {
			return nil, -1
		}
		t.log.Warn().Err(err).Msgf("fence tree: node %s did not answer in %s; going up past it", t.Job.Nodes[a].Name, n.ancestorWait)
	}
	return nil, -1
}

// rejoinLocked starts rejoin when the link up went past ancestors that
// did not answer in time. Called with n.mu held.
func (n *Node) rejoinLocked() {
	if n.rejoining || n.tree == nil || len(n.passedLocked()) == 0 {
		return
	}
	t := n.tree
	n.rejoining = t.crew.spawn(func(ctx context.Context) { n.rejoin(ctx, t) })
}

// passedLocked are the ancestors nearer than the one the link up goes
// to whose link never broke, nearest first; none while there is no link
// up. Called with n.mu held.
func (n *Node) passedLocked() []int {
	if n.up == nil {
		return nil
	}
	var out []int
	for _, a := range n.above {
		if a == n.upNode {
			break
		}
		if !n.lost[a] {
			out = append(out, a)
		}
	}
	return out
}

// rejoin tries, now and then, the ancestors the link up went past,
// nearest first, and moves the node's later calls to the first that
// answers: a parent that came up late (a loaded node, its gopmi started
// on demand by its first task) would otherwise wait in every fence, until
// half its time-out, for this node's ranks, whose parts go around it.
// Calls in flight on the link it replaces finish there. It ends when none
// is left to try (the parent reached, or the link up broke: the next call
// dials from the parent up again), or when the tree closes.
func (n *Node) rejoin(ctx context.Context, t *tree) {
	for pause := rejoinFirst; ; pause = min(2*pause, rejoinMax) {
		due, stop := t.crew.alarm(pause)
		select {
		case <-ctx.Done():
		case <-due:
		}
		stop()
		if ctx.Err() != nil {
			n.mu.Lock()
			n.rejoining = false
			n.mu.Unlock()
			return
		}
		n.mu.Lock()
		c, passed := n.up, n.passedLocked()
		if len(passed) == 0 {
			// Cleared under the lock that found nothing to try: a link
			// made past a parent from now on starts another.
			n.rejoining = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		for _, a := range passed {
			nc, err := dialNode(ctx, t.Job, t.secret, t.ports, a, rejoinTry, false)
			if err != nil {
				continue
			}
			if !n.Relay.Replace(c, nc.Backend(), nc) {
				_ = nc.Close() // the link up changed meanwhile: look again
				break
			}
			n.mu.Lock()
			n.up, n.upNode = nc, a
			n.retired = append(n.retired, c)
			n.mu.Unlock()
			t.log.Info().Msgf("fence tree: node %s answers now; this node's calls go through it again", t.Job.Nodes[a].Name)
			break
		}
	}
}

// errNoneListens: no port of a node's range has a listener, the node's
// server is not up, or no more (findNodeOrGone).
var errNoneListens = errors.New("no port of the node's range listens")

// findNode tries node index i's ports, again and again, until one
// proves to be that node or ctx ends.
func findNode(ctx context.Context, job plugin.Job, secret string, r portRange, i int) (net.Conn, error) {
	return findNodeOr(ctx, job, secret, r, i, false)
}

// findNodeOrGone is findNode that gives up with errNoneListens after a
// pass over the ports where none has a listener but other nodes' (or
// steps'): a reader
// whose peer's server was up (every node's listens from the job's first
// fence) learns at once that it has ended, and reads elsewhere.
func findNodeOrGone(ctx context.Context, job plugin.Job, secret string, r portRange, i int) (net.Conn, error) {
	return findNodeOr(ctx, job, secret, r, i, true)
}

func findNodeOr(ctx context.Context, job plugin.Job, secret string, r portRange, i int, orGone bool) (net.Conn, error) {
	host := nodeHost(job, i)
	ports := r.ports(secret, job.Nspace, i)
	dial := dialer(secret, roleTreeChild, parentRole(job.Nspace, i))
	pause := retryFirst
	// A listener that answered (another step's, another node's) says
	// more than a refused connection. It holds its port, so it is asked
	// again only now and then: each ask is a TLS handshake on both sides,
	// which a child waiting for its parent would otherwise repeat every
	// few milliseconds (the lab's nodes share one address and one set of
	// ports, and so do a shared node's steps).
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
			return nil, fmt.Errorf("at %s, %d ports from %d: %w", host, len(ports), ports[0], errNoneListens)
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
