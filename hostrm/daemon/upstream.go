package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
	"github.com/gopmi/gopmi/plugin/seclink"
)

// Upstream is a node's daemon that serves no state of its own: it relays
// every local connection to the hub (see ServeHub), and answers the hub's
// questions about this node on a link of its own.
type Upstream struct {
	hub     string // host:port
	node    string
	dialer  *seclink.Dialer // nil when the key cannot make a link: dialErrr says why
	dialErr error
	log     zerolog.Logger

	linked   atomic.Bool // the node's own link is up
	relaying atomic.Int64
	warned   quietly // which failures are logged; see warnOnce
	byUID    counts  // connections relayed, by user
}

// Bounds of a relay.
const (
	// maxRelayedPerUser is how many connections one user may have
	// relayed at once: a run holds one, a tool one while it runs.
	maxRelayedPerUser = 128
	// hubWait is how long a caller's connection waits for a hub that
	// does not answer (it restarts) before the caller is told.
	hubWait = 5 * time.Second
)

// NewUpstream relays to the hub at addr (host:port) as node, with key.
func NewUpstream(addr, node string, key []byte, log zerolog.Logger) *Upstream {
	// From a privileged port: the hub keeps places for the handshakes of
	// root's relays that no other user's connections take.
	d, err := seclink.NewDialer(seclink.Config{Key: key, Role: linkNode, PeerRole: linkHub, Privileged: true}, nil)
	return &Upstream{hub: addr, node: node, dialer: d, dialErr: err, log: log}
}

// Status says in a few words what the relay does, for sd_notify.
func (r *Upstream) Status() string {
	state := "up"
	if !r.linked.Load() {
		state = "down"
	}
	return fmt.Sprintf("relaying to hub %s (link %s), %d connections", r.hub, state, r.relaying.Load())
}

// dial connects to the hub and passes the handshake with h.
func (r *Upstream) dial(ctx context.Context, h hello) (net.Conn, error) {
	if r.dialErr != nil {
		return nil, r.dialErr
	}
	body, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	c, err := r.dialer.DialHello(ctx, r.hub, body)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Serve relays the connections accepted on l, and keeps the node's own
// link up, until ctx ends.
func (r *Upstream) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	linked := make(chan struct{})
	go func() {
		defer close(linked)
		r.keepLinked(ctx)
	}()
	err := link.Accept(ctx, l, r.relay)
	cancel()
	<-linked
	return err
}

// relay carries one local connection to the hub, with the identity the
// kernel gave for its peer, until either end closes it.
func (r *Upstream) relay(ctx context.Context, c net.Conn) {
	defer c.Close()
	cred, err := peercred.Of(c)
	if err != nil {
		r.log.Warn().Err(err).Msg("relay: a caller without credentials; closing")
		return
	}
	uid := strconv.FormatUint(uint64(cred.Uid), 10)
	if !r.byUID.hold(uid, maxRelayedPerUser, 0) {
		r.warnOnce("many "+uid, func(ev *zerolog.Event) {
			ev.Uint32("uid", cred.Uid).Int("open", maxRelayedPerUser).Msg("relay: too many connections of one user; refusing one")
		})
		link.FailCalls(ctx, c, plugin.Errorf(plugin.ErrUnavailable, "this node's daemon relays %d connections of uid %d already", maxRelayedPerUser, cred.Uid), time.Second)
		return
	}
	defer r.byUID.release(uid)
	h := hello{Role: roleCall, Node: r.node, UID: cred.Uid, PID: cred.Pid, Start: procStart(int(cred.Pid))}
	// A hub that restarts is waited for, as a run waits for its own
	// node's daemon; a hub that refuses is not.
	var up net.Conn
	for wait := time.Now().Add(hubWait); ; {
		if up, err = r.dial(ctx, h); err == nil || errors.Is(err, seclink.ErrRefused) || time.Now().After(wait) || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if err != nil {
		r.warnOnce(err.Error(), func(ev *zerolog.Event) {
			ev.Err(err).Str("hub", r.hub).Uint32("uid", cred.Uid).Int32("pid", cred.Pid).Msg("relay: no hub; failing the caller's calls")
		})
		why := "which it cannot reach"
		if errors.Is(err, seclink.ErrRefused) {
			why = "which refuses it"
		}
		// The caller hears why, then the connection closes: a run
		// connects again, as after a restart of its daemon.
		link.FailCalls(ctx, c, plugin.Errorf(plugin.ErrUnavailable, "this node's daemon relays to the hub at %s, %s: %v", r.hub, why, err), time.Second)
		return
	}
	defer up.Close()
	r.relaying.Add(1)
	defer r.relaying.Add(-1)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	ended := 0
	select {
	case <-done:
		ended++
	case <-ctx.Done():
	}
	// Either end closing ends both: the other copy returns.
	_ = c.Close()
	_ = up.Close()
	for ; ended < 2; ended++ {
		<-done
	}
}

// warnOnce logs a failure at most once a minute per key.
func (r *Upstream) warnOnce(key string, log func(*zerolog.Event)) {
	if ok, _ := r.warned.news(key); ok {
		log(r.log.Warn())
	}
}

// linkRetry is how long the node waits before it links to its hub again.
const linkRetry = time.Second

// keepLinked keeps the node's own link to the hub, on which the hub asks
// what only this node can answer, until ctx ends.
func (r *Upstream) keepLinked(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := r.dial(ctx, hello{Role: roleNode, Node: r.node})
		if err != nil {
			if ctx.Err() == nil {
				r.warnOnce("link: "+err.Error(), func(ev *zerolog.Event) {
					ev.Err(err).Str("hub", r.hub).Msg("relay: cannot link to the hub; trying again every second")
				})
			}
		} else {
			r.linked.Store(true)
			r.log.Info().Str("hub", r.hub).Str("node", r.node).Msg("relay: linked to the hub")
			link.ServeConn(ctx, c, nodeService{}, nil)
			r.linked.Store(false)
			if ctx.Err() == nil {
				r.warnOnce("link closed", func(ev *zerolog.Event) {
					ev.Str("hub", r.hub).Msg("relay: the link to the hub closed; linking again")
				})
			}
		}
		select {
		case <-time.After(linkRetry):
		case <-ctx.Done():
		}
	}
}

// nodeService answers the hub's questions about this node (queryAlive,
// queryModex).
type nodeService struct{ plugin.Unimplemented }

func (nodeService) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "gopmi-node", APIVersions: []string{plugin.APIVersion1}, Capabilities: []string{plugin.CapQuery}}, nil
}

func (nodeService) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	if len(req.Queries) != 1 || len(req.Queries[0].Keys) != 1 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "node: one query at a time")
	}
	q := req.Queries[0]
	switch q.Keys[0] {
	case queryAlive:
		pid, err := strconv.Atoi(qualifier(q.Qualifiers, "pid", ""))
		if err != nil || pid <= 0 {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "node: alive: pid %q", qualifier(q.Qualifiers, "pid", ""))
		}
		v := "no"
		if pidAlive(pid, qualifier(q.Qualifiers, "start", "")) {
			v = "yes"
		}
		return &plugin.QueryResponse{Results: []plugin.Info{{Key: queryAlive, Value: v}}}, nil
	case queryModex:
		addr := qualifier(q.Qualifiers, "universe", "")
		uid, uerr := strconv.ParseUint(qualifier(q.Qualifiers, "uid", ""), 10, 32)
		pid, perr := strconv.Atoi(qualifier(q.Qualifiers, "pid", ""))
		if uerr != nil || perr != nil {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "node: modex: the run's uid and pid are needed")
		}
		var mreq plugin.ModexRequest
		if err := json.Unmarshal([]byte(qualifier(q.Qualifiers, "request", "")), &mreq); err != nil {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "node: modex: request: %v", err)
		}
		ctx, cancel := context.WithTimeout(ctx, mreq.TimeoutOrDefault())
		defer cancel()
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := dialUniverse(dctx, addr, uint32(uid), pid)
		dcancel()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		resp, err := c.Backend().DirectModex(ctx, &mreq)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(resp)
		return &plugin.QueryResponse{Results: []plugin.Info{{Key: queryModex, Value: string(b)}}}, nil
	}
	return nil, plugin.Errorf(plugin.ErrNotSupported, "node: query %q", q.Keys[0])
}
