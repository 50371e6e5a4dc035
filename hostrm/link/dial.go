package link

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// Conn is a caller's connection to a served backend.
type Conn struct {
	c   net.Conn
	enc *json.Encoder

	writeMu sync.Mutex // orders whole frames

	mu      sync.Mutex
	next    uint64                   // guarded by mu
	waiting map[uint64]chan response // guarded by mu
	err     error                    // why the connection ended; guarded by mu
	read    chan struct{}            // closed when the reader returned
}

// Dial connects to a backend served on addr: "unix:///path" or a path.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	path := strings.TrimPrefix(addr, "unix://")
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, plugin.Errorf(plugin.ErrUnavailable, "link: dial %s: %v", addr, err)
	}
	if err := trusted(c, path); err != nil {
		c.Close()
		return nil, err
	}
	return NewConn(c), nil
}

// trusted checks who serves c, before a byte is sent: its listener's
// process must be the caller's user or root. A socket is found by its
// path only, and where its directory is writable by another user first
// (a daemon not started yet, a shared TMPDIR), hers would take the
// caller's jobs, names and lookups and answer them.
func trusted(c net.Conn, path string) error {
	cred, err := peercred.Of(c)
	if err != nil {
		return plugin.Errorf(plugin.ErrPermission, "link: %s: who serves it: %v", path, err)
	}
	if cred.Uid == 0 || int(cred.Uid) == os.Geteuid() {
		return nil
	}
	return plugin.Errorf(plugin.ErrPermission, "link: %s is served by uid %d (%s, pid %d), neither you nor root: not used",
		path, cred.Uid, peercred.UserName(cred.Uid), cred.Pid)
}

// NewConn makes a caller's connection of c, a stream already connected to
// a server (a link whose two ends agreed on more than Dial does: the node
// daemon's authenticated link to its hub). The Conn owns c.
func NewConn(c net.Conn) *Conn {
	conn := &Conn{c: c, enc: json.NewEncoder(c), waiting: map[uint64]chan response{}, read: make(chan struct{})}
	go conn.readLoop()
	return conn
}

// Done is closed when the connection has ended, from either side.
func (c *Conn) Done() <-chan struct{} { return c.read }

// Backend is the served backend, called over the connection.
func (c *Conn) Backend() plugin.Full { return remote{c} }

// Close closes the connection; calls in flight fail with
// plugin.ErrUnavailable.
func (c *Conn) Close() error {
	err := c.c.Close()
	<-c.read
	return err
}

// readLoop hands each answer to its caller until the connection ends, then
// fails every call still waiting.
func (c *Conn) readLoop() {
	defer close(c.read)
	dec := json.NewDecoder(c.c)
	for {
		var r response
		if err := dec.Decode(&r); err != nil {
			c.mu.Lock()
			c.err = err
			for id, ch := range c.waiting {
				delete(c.waiting, id)
				close(ch)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		ch := c.waiting[r.ID]
		delete(c.waiting, r.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// brokenErr is the error of a call the connection's end cut short.
func (c *Conn) brokenErr(op string) error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		err = errClosed
	}
	return plugin.Errorf(plugin.ErrUnavailable, "%s: the link to the server broke: %v", op, err)
}

// call sends one call and waits for its answer or ctx. A caller that gives
// up tells the server, which cancels the call's context there.
func call[Resp any](ctx context.Context, c *Conn, op, name string, req any) (*Resp, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: encode request: %v", op, err)
	}
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.brokenErr(op)
	}
	c.next++
	id := c.next
	c.waiting[id] = ch
	c.mu.Unlock()
	if err := c.write(request{ID: id, Call: name, Req: raw}); err != nil {
		c.forget(id)
		return nil, plugin.Errorf(plugin.ErrUnavailable, "%s: the link to the server broke: %v", op, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, c.brokenErr(op)
		}
		if r.Err != nil {
			return nil, r.Err.fromWire()
		}
		resp := new(Resp)
		if err := json.Unmarshal(r.Resp, resp); err != nil {
			return nil, plugin.Errorf(plugin.ErrUnavailable, "%s: decode answer: %v", op, err)
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(id)
		_ = c.write(request{ID: id, Cancel: true})
		kind := plugin.ErrAborted
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			kind = plugin.ErrTimeout
		}
		return nil, fmt.Errorf("%s: %w: %w", op, ctx.Err(), kind)
	}
}

func (c *Conn) write(r request) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.enc.Encode(r)
}

func (c *Conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// remote is the served backend as a plugin.Full.
type remote struct{ c *Conn }
