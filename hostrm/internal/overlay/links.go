package overlay

import (
	"context"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// Links are the links to the nodes of one job that a node (or the root,
// for readers outside the job) makes to read their data, or to give them
// its part of a fence: made on first use and kept until Close.
type Links struct {
	job    plugin.Job
	secret string
	ports  PortRange

	mu     sync.Mutex
	links  map[int]*peerLink
	closed bool
	// unreached is when a read last failed to link to a node (by
	// index): for ProbeAgain after it, reads of that node go elsewhere.
	unreached map[int]time.Time
}

// NewLinks returns the links to job's nodes, which prove secret and
// listen in ports.
func NewLinks(job plugin.Job, secret string, ports PortRange) *Links {
	return &Links{job: job, secret: secret, ports: ports}
}

// Job is the job whose nodes the links reach.
func (p *Links) Job() plugin.Job { return p.job }

// ProbeAgain is how long a node's reads of a node they could not link to
// go elsewhere before they try that node again: a departed node is not
// probed per read.
const ProbeAgain = time.Second

// UnreachedLately reports whether a read failed to link to node index i
// less than ProbeAgain ago; with mark, it records such a failure now.
func (p *Links) UnreachedLately(i int, mark bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mark {
		if p.unreached == nil {
			p.unreached = map[int]time.Time{}
		}
		p.unreached[i] = time.Now()
		return true
	}
	t, ok := p.unreached[i]
	return ok && time.Since(t) < ProbeAgain
}

// DropLost forgets node index i's link when it broke (its node ended),
// so that a read does not wait on it for a node that is gone.
func (p *Links) DropLost(i int) {
	p.mu.Lock()
	l := p.links[i]
	if l == nil || !isClosed(l.ready) || l.c == nil || !l.c.Lost() {
		p.mu.Unlock()
		return
	}
	delete(p.links, i)
	p.mu.Unlock()
	_ = l.c.Close()
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type peerLink struct {
	ready chan struct{} // closed once c or err is set
	c     *direct.Conn
	err   error
}

// Link returns the backend at node index i, dialling it (for at most
// wait) on first use. A failed dial is not kept: the next read tries
// again.
func (p *Links) Link(ctx context.Context, i int, wait time.Duration) (plugin.Full, error) {
	c, err := p.linkTo(ctx, i, wait, false)
	if err != nil {
		return nil, err
	}
	return c.Backend(), nil
}

// Conn is Link's connection, for the services the nodes serve each other
// besides the backend.
func (p *Links) Conn(ctx context.Context, i int, wait time.Duration) (*direct.Conn, error) {
	return p.linkTo(ctx, i, wait, false)
}

// LinkOrGone is Link that fails at once, with ErrNoneListens, when
// nothing listens at the node's ports: its server has ended.
func (p *Links) LinkOrGone(ctx context.Context, i int, wait time.Duration) (plugin.Full, error) {
	c, err := p.linkTo(ctx, i, wait, true)
	if err != nil {
		return nil, err
	}
	return c.Backend(), nil
}

func (p *Links) linkTo(ctx context.Context, i int, wait time.Duration, orGone bool) (*direct.Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, plugin.Errorf(plugin.ErrAborted, "node %s: the node's links have closed", p.job.Nodes[i].Name)
	}
	if p.links == nil {
		p.links = map[int]*peerLink{}
	}
	l := p.links[i]
	if l == nil {
		l = &peerLink{ready: make(chan struct{})}
		p.links[i] = l
		p.mu.Unlock()
		l.c, l.err = DialNode(ctx, p.job, p.secret, p.ports, i, wait, orGone)
		p.mu.Lock()
		if (l.err != nil || p.closed) && p.links[i] == l {
			delete(p.links, i)
		}
		// Ready under the lock: close, which takes the map under it
		// too, either sees this link ready and closes it, or came
		// first and this dialler sees closed.
		closed := p.closed
		close(l.ready)
		p.mu.Unlock()
		if l.err == nil && closed {
			_ = l.c.Close()
			return nil, plugin.Errorf(plugin.ErrAborted, "node %s: the node's links have closed", p.job.Nodes[i].Name)
		}
	} else {
		p.mu.Unlock()
		select {
		case <-l.ready:
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrAborted, "node %s: caller went away: %v", p.job.Nodes[i].Name, ctx.Err())
		}
	}
	if l.err != nil {
		return nil, l.err
	}
	return l.c, nil
}

// Close closes every link made; one still being dialled is closed by
// its dialler, which sees closed.
func (p *Links) Close() { p.closeLinks(true) }

// Drop closes every link made, waiting for those being dialled (their
// dialler, not closed, would keep them); later reads make new ones.
func (p *Links) Drop() { p.closeLinks(false) }

func (p *Links) closeLinks(final bool) {
	p.mu.Lock()
	p.closed = p.closed || final
	links := p.links
	p.links = nil
	p.mu.Unlock()
	for _, l := range links {
		if final {
			select {
			case <-l.ready:
			default:
				continue
			}
		} else {
			<-l.ready
		}
		if l.c != nil {
			_ = l.c.Close()
		}
	}
}
