// Package overlay is how the nodes of a job on several nodes link to
// each other and to the root of their tree (the coordinator under
// Slurm), without a central process knowing them all: where a node
// listens (ports.go), how a node finds and proves another (find.go), the
// links a node keeps to the nodes it reads (links.go), and a node's link
// up (Overlay): to its parent, past a parent that does not answer to an
// ancestor or the root, and back to the parent once it answers. It knows
// no resource manager: the Slurm backend uses it, and a Flux host can
// use it unchanged.
package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/fencetree"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

const (
	// DefaultAncestorWait is how long a node tries its parent before it
	// goes to the parent's parent, and so on up to the root: a node whose
	// tasks never speak PMI (an MPMD job's other program) starts no
	// gopmi, and its subtree must still reach the root.
	DefaultAncestorWait = 2 * time.Second
	// rejoinFirst and rejoinMax pace a node's tries of the ancestors its
	// link up went past (rejoin), each try at most rejoinTry: a parent
	// that never comes (an MPMD job's program that speaks no PMI) costs
	// a few refused connections every rejoinMax.
	rejoinFirst = 100 * time.Millisecond
	rejoinMax   = 10 * time.Second
	rejoinTry   = 500 * time.Millisecond
)

// Config is what a node's overlay is made from.
type Config struct {
	Secret string
	Ports  PortRange
	// Root links the node to its tree's root: the link up of a node at
	// the top, and of any node none of whose ancestors answers.
	Root func(ctx context.Context) (*direct.Conn, error)
	// Listen makes the node's listener; nil: net.Listen (tests pass a
	// failing one).
	Listen func(network, addr string) (net.Listener, error)
	// AncestorWait is how long the node tries an ancestor before the
	// next one up; 0: DefaultAncestorWait.
	AncestorWait time.Duration
}

// Relay is what carries a node's calls up its link (plugin.Relay):
// Replace moves its later calls from the link old to another.
type Relay interface {
	Replace(old io.Closer, full plugin.Full, closer io.Closer) bool
}

// Overlay is one node's link up its job's tree and its listener, under
// one lock. Before Place (a node of a job on one node, or not configured
// yet) its link up goes to the root.
type Overlay struct {
	cfg   Config
	relay Relay

	mu     sync.Mutex
	placed *placement // set by Place
	// above are the nodes this node's calls go up through, nearest
	// first; the root when none answers.
	above []int
	// up is the link up while it lasts; lost are the ancestors whose
	// link broke, passed over from then on.
	up     *direct.Conn
	upNode int // the node index up links to; -1: the root
	lost   map[int]bool
	// rejoining: a goroutine tries the ancestors the link up went past
	// (rejoin); retired are the links up it replaced, closed with the
	// overlay (calls may still be in flight on them).
	rejoining bool
	retired   []io.Closer
	addr      string // where the node listens, once it does
}

// placement is the node's place in its tree, with the crew that runs
// its rejoin and the log it writes to.
type placement struct {
	fencetree.Place
	crew *crew.Crew
	log  zerolog.Logger
}

// New returns a node's overlay; SetRelay gives it the relay its link up
// carries calls on.
func New(cfg Config) *Overlay {
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	if cfg.AncestorWait <= 0 {
		cfg.AncestorWait = DefaultAncestorWait
	}
	return &Overlay{cfg: cfg, upNode: -1}
}

// SetRelay sets the relay whose link up the overlay moves.
func (o *Overlay) SetRelay(r Relay) { o.relay = r }

// Ports is the range the job's nodes listen in.
func (o *Overlay) Ports() PortRange { return o.cfg.Ports }

// Place takes the node's place in its job's tree: its later links up go
// through its ancestors, and the crew runs its rejoin.
func (o *Overlay) Place(p fencetree.Place, c *crew.Crew, log zerolog.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.placed = &placement{Place: p, crew: c, log: log}
	o.above = fencetree.Ancestors(p.Self, p.Width)
}

// Leave undoes Place: later links up go to the root.
func (o *Overlay) Leave() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.placed, o.above = nil, nil
}

// Dial links the node up, for its relay: to the nearest of its ancestors
// that answers in time (and whose link never broke), else to the root.
func (o *Overlay) Dial(ctx context.Context) (*direct.Conn, error) {
	c, to := o.dialAbove(ctx)
	if c == nil {
		var err error
		if c, err = o.cfg.Root(ctx); err != nil {
			return nil, err
		}
	}
	o.mu.Lock()
	o.up, o.upNode = c, to
	o.rejoinLocked()
	o.mu.Unlock()
	return c, nil
}

// dialAbove links to the nearest ancestor that answers in time, else
// after AncestorWait the next one up, and so on; it returns the link and
// the ancestor's index. Nil and -1: none did (or the node is at the top,
// or not placed).
func (o *Overlay) dialAbove(ctx context.Context) (*direct.Conn, int) {
	o.mu.Lock()
	p := o.placed
	var alive []int
	for _, a := range o.above {
		if !o.lost[a] {
			alive = append(alive, a)
		}
	}
	o.mu.Unlock()
	for _, a := range alive {
		c, err := DialNode(ctx, p.Job, o.cfg.Secret, o.cfg.Ports, a, o.cfg.AncestorWait, false)
		if err == nil {
			return c, a
		}
		if ctx.Err() != nil {
			return nil, -1
		}
		p.log.Warn().Err(err).Msgf("fence tree: node %s did not answer in %s; going up past it", p.Job.Nodes[a].Name, o.cfg.AncestorWait)
	}
	return nil, -1
}

// Relink drops the link up when it broke (its node went away: a parent
// node's gopmi ends with its own ranks, while its children may still
// call), so that the next call links past that node: to the next
// ancestor, or the root. The relay calls it before each call.
func (o *Overlay) Relink() {
	o.mu.Lock()
	c, to := o.up, o.upNode
	if c == nil || !c.Lost() {
		o.mu.Unlock()
		return
	}
	// Its node is passed over from now on, before any call can dial
	// again.
	if to >= 0 {
		if o.lost == nil {
			o.lost = map[int]bool{}
		}
		o.lost[to] = true
	}
	o.mu.Unlock()
	// Dropped only if it is still the relay's (rejoin may have moved
	// the calls on).
	if !o.relay.Replace(c, nil, nil) {
		return
	}
	o.mu.Lock()
	if o.up == c {
		o.up = nil
	}
	o.mu.Unlock()
	_ = c.Close()
}

// rejoinLocked starts rejoin when the link up went past ancestors that
// did not answer in time. Called with mu held.
func (o *Overlay) rejoinLocked() {
	if o.rejoining || o.placed == nil || len(o.passedLocked()) == 0 {
		return
	}
	p := o.placed
	o.rejoining = p.crew.Spawn(func(ctx context.Context) { o.rejoin(ctx, p) })
}

// passedLocked are the ancestors nearer than the one the link up goes
// to whose link never broke, nearest first; none while there is no link
// up. Called with mu held.
func (o *Overlay) passedLocked() []int {
	if o.up == nil {
		return nil
	}
	var out []int
	for _, a := range o.above {
		if a == o.upNode {
			break
		}
		if !o.lost[a] {
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
// dials from the parent up again), or when the crew closes.
func (o *Overlay) rejoin(ctx context.Context, p *placement) {
	for pause := rejoinFirst; ; pause = min(2*pause, rejoinMax) {
		p.crew.Sleep(ctx, pause)
		o.mu.Lock()
		c, passed := o.up, o.passedLocked()
		if ctx.Err() != nil || len(passed) == 0 {
			// Cleared under the lock that found nothing to try: a link
			// made past a parent from now on starts another.
			o.rejoining = false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		for _, a := range passed {
			nc, err := DialNode(ctx, p.Job, o.cfg.Secret, o.cfg.Ports, a, rejoinTry, false)
			if err != nil {
				continue
			}
			if !o.relay.Replace(c, nc.Backend(), nc) {
				_ = nc.Close() // the link up changed meanwhile: look again
				break
			}
			o.mu.Lock()
			o.up, o.upNode = nc, a
			o.retired = append(o.retired, c)
			o.mu.Unlock()
			p.log.Info().Msgf("fence tree: node %s answers now; this node's calls go through it again", p.Job.Nodes[a].Name)
			break
		}
	}
}

// Listen listens for the node's children and for the nodes that read its
// data, at its host on the first of its ports that is free (or, when the
// host is not one of this machine's addresses, on every address with
// that port), behind the job's private link in the node's role.
func (o *Overlay) Listen(p fencetree.Place, log zerolog.Logger) (net.Listener, error) {
	host := NodeHost(p.Job, p.Self)
	ports := o.cfg.Ports.Ports(o.cfg.Secret, p.Job.Nspace, p.Self)
	var last error
	for _, port := range ports {
		l, err := o.cfg.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			l, err = o.cfg.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		}
		if err == nil {
			o.mu.Lock()
			o.addr = l.Addr().String()
			o.mu.Unlock()
			return Listen(l, o.cfg.Secret, ParentRole(p.Job.Nspace, p.Self), RoleTreeChild, log)
		}
		last = err
	}
	r := o.cfg.Ports
	if r.High == 0 {
		r = DefaultPorts
	}
	return nil, fmt.Errorf("listen for the other nodes: at %s, none of %d ports from %d (in %d-%d) is free: %w", host, len(ports), ports[0], r.Low, r.High, last)
}

// Addr is where the node listens, "" before Listen.
func (o *Overlay) Addr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.addr
}

// Close closes the links up that rejoin retired. The link up itself is
// the relay's, which closes it.
func (o *Overlay) Close() {
	o.mu.Lock()
	retired := o.retired
	o.retired = nil
	o.placed, o.above = nil, nil
	o.mu.Unlock()
	for _, c := range retired {
		_ = c.Close()
	}
}
