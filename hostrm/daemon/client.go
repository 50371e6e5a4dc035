package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// Client is a run's link to its node's daemon. It connects in the
// background, so a run pays no start-up time for it; it registers the
// run's jobs, and connects and registers them again when the daemon
// restarts. Its name-service calls wait for a connection within their own
// deadline: a daemon that restarts while a run looks a name up delays the
// lookup, it does not fail it.
type Client struct {
	path string
	run  string
	log  zerolog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	conn       *link.Conn // nil while not connected
	jobs       []*plugin.ConfigureRequest
	registered int           // jobs sent on conn
	changed    wake.Cond     // woken when conn is set or lost, and when registered grows
	downSince  time.Time     // when the client last lost (or began without) a connection
	warned     bool          // said the daemon is gone, this outage
	foreign    error         // why the socket was not used (another user serves it), this outage
	regErr     error         // why the last registration failed on a daemon that answered; nil once one passed
	regSince   time.Time     // when registrations began to fail
	dirty      chan struct{} // capacity 1: a job to register
}

// transient reports whether a failed registration may pass on another
// try: the daemon was unreachable or slow, not refusing.
func transient(err error) bool {
	return errors.Is(err, plugin.ErrUnavailable) || errors.Is(err, plugin.ErrTimeout) || errors.Is(err, plugin.ErrAborted)
}

// retryEvery is how often a client tries a daemon that is not there.
const retryEvery = 250 * time.Millisecond

// reconnectWait is how long name calls wait for a daemon that went away.
const reconnectWait = 10 * time.Second

// Dial starts a client of the daemon at path for the run named run. It
// never fails: the client keeps trying until Close.
func Dial(path, run string, log zerolog.Logger) *Client {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{path: path, run: run, log: log, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		dirty: make(chan struct{}, 1), downSince: time.Now()}
	go c.loop()
	return c
}

// SocketPath is where a run and the tools look for the node daemon: named
// (a -daemon flag), else $GOPMI_DAEMON, else DefaultSocket.
func SocketPath(named string) string {
	switch {
	case named != "":
		return named
	case os.Getenv(EnvSocket) != "":
		return os.Getenv(EnvSocket)
	}
	return DefaultSocket
}

// IsSocket reports whether path is a unix socket.
func IsSocket(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().Type() == fs.ModeSocket
}

// DialNode is a run's client of its node's daemon, at SocketPath(named)
// (a gopmi run, a Slurm step's coordinator), or nil to run alone: with
// "none" (named, or in $GOPMI_DAEMON), without a socket there, or when
// nobody serves it (a daemon that died without systemd to restart it
// would make every name call wait for it). why says what the user should
// hear when it is nil although a daemon was asked for: named, or a socket
// that does not answer.
func DialNode(named string, log zerolog.Logger) (c *Client, why string) {
	if named == "none" || named == "" && os.Getenv(EnvSocket) == "none" {
		return nil, ""
	}
	path := SocketPath(named)
	if !IsSocket(path) {
		if named != "" || os.Getenv(EnvSocket) != "" {
			return nil, "no node daemon at " + path
		}
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	conn, err := link.Dial(ctx, path)
	cancel()
	switch {
	case errors.Is(err, plugin.ErrPermission):
		// Not a daemon of root's or the user's: another user's socket.
		return nil, err.Error()
	case err != nil:
		return nil, fmt.Sprintf("the node daemon at %s does not answer (%v)", path, errors.Unwrap(err))
	}
	conn.Close()
	return Dial(path, RunName(), log), ""
}

// RunName is a name for this process's run that no other run on the node
// shares, and that the daemon checks against the caller: the host, the
// pid and the process's start time.
func RunName() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + procStart(os.Getpid())
}

// Register registers a job with the daemon, now if connected, else when
// the client connects; it does not wait.
func (c *Client) Register(job plugin.Job, rc RunConfig) {
	rc.Run = c.run
	if rc.Started.IsZero() {
		rc.Started = time.Now()
	}
	b, _ := json.Marshal(rc)
	req := &plugin.ConfigureRequest{APIVersion: plugin.APIVersion1, Job: job, Config: b}
	c.mu.Lock()
	c.jobs = append(c.jobs, req)
	c.mu.Unlock()
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// loop connects, registers, and waits for the connection's end, until
// Close.
func (c *Client) loop() {
	defer close(c.done)
	for {
		conn, err := link.Dial(c.ctx, c.path)
		if err != nil {
			if errors.Is(err, plugin.ErrPermission) {
				c.mu.Lock()
				if c.foreign == nil {
					c.log.Warn().Err(err).Msg("the node daemon's socket is not the daemon's: name-service calls wait for it")
				}
				c.foreign = err
				c.mu.Unlock()
			}
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(retryEvery):
				continue
			}
		}
		c.log.Debug().Str("daemon", c.path).Msg("connected to the node daemon")
		c.mu.Lock()
		c.conn = conn
		c.foreign = nil
		c.registered = 0
		c.changed.Broadcast()
		if c.warned {
			c.log.Warn().Str("daemon", c.path).Msg("the node daemon is back; name-service calls go on")
		}
		c.warned = false
		c.mu.Unlock()
	serve:
		for {
			c.mu.Lock()
			todo := c.jobs[c.registered:]
			c.mu.Unlock()
			for _, req := range todo {
				ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
				_, err := conn.Backend().Configure(ctx, req)
				cancel()
				if err != nil && transient(err) && c.ctx.Err() == nil {
					// The daemon (or the hub it relays to) is not there
					// yet: connect again and register everything anew.
					c.mu.Lock()
					if c.regErr == nil {
						c.regSince = time.Now()
						c.log.Warn().Err(err).Str("job", req.Job.Nspace).Msg("register with the node daemon; trying again")
					}
					c.regErr = err
					c.mu.Unlock()
					conn.Close()
					break
				}
				c.mu.Lock()
				switch {
				case err != nil:
					c.log.Warn().Err(err).Str("job", req.Job.Nspace).Msg("register with the node daemon")
				case c.regErr != nil:
					c.log.Info().Str("job", req.Job.Nspace).Msg("registered with the node daemon")
					c.regErr = nil
				}
				c.registered++
				c.changed.Broadcast()
				c.mu.Unlock()
			}
			select {
			case <-c.dirty:
			case <-conn.Done():
				break serve
			case <-c.ctx.Done():
				break serve
			}
		}
		c.mu.Lock()
		c.conn = nil
		c.downSince = time.Now()
		c.changed.Broadcast() // wakes callers waiting on this connection
		c.mu.Unlock()
		if c.ctx.Err() != nil {
			_ = conn.Close()
			return
		}
		_ = conn.Close()
		c.mu.Lock()
		failing := c.regErr != nil
		c.mu.Unlock()
		if !failing {
			c.log.Warn().Str("daemon", c.path).Msg("the node daemon went away; reconnecting")
			continue
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

// backend waits for a connection on which every job registered before
// the call is registered (a name-service call names one of them), until
// ctx ends.
func (c *Client) backend(ctx context.Context) (plugin.Full, error) {
	c.mu.Lock()
	want := len(c.jobs)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		changed := c.changed.C()
		conn, reg := c.conn, c.registered
		regErr, regLeft := c.regErr, reconnectWait-time.Since(c.regSince)
		c.mu.Unlock()
		if conn != nil && reg >= want {
			return conn.Backend(), nil
		}
		// A daemon that answers but cannot register the run (it relays to
		// a hub that is gone or refuses it) is waited for as one that is
		// gone, and then the call fails saying why.
		if regErr != nil && regLeft <= 0 {
			return nil, plugin.Errorf(plugin.ErrUnavailable, "the node daemon at %s has not registered this run for %s: %v", c.path, reconnectWait, regErr)
		}
		var failing <-chan time.Time
		if regErr != nil {
			t := time.NewTimer(regLeft)
			defer t.Stop()
			failing = t.C
		}
		// Not connected: wait for a connection, for reconnectWait after
		// the daemon went at most (a restart takes a second; a daemon
		// that stays down must not hold every name call for its whole
		// time-out); connected: for the registrations to go out.
		var gone <-chan time.Time
		if conn == nil {
			c.mu.Lock()
			left := reconnectWait - time.Since(c.downSince)
			if left <= 0 {
				warn := !c.warned
				c.warned = true
				foreign := c.foreign
				c.mu.Unlock()
				err := plugin.Errorf(plugin.ErrUnavailable,
					"the node daemon at %s has been gone for %s: start it (systemctl start gopmi.socket), or run alone with gopmi run -daemon none", c.path, reconnectWait)
				if foreign != nil {
					err = foreign
				}
				if warn {
					c.log.Warn().Err(err).Msg("name-service calls fail until the node daemon is back")
				}
				return nil, err
			}
			c.mu.Unlock()
			t := time.NewTimer(left)
			defer t.Stop()
			gone = t.C
		}
		select {
		case <-gone:
		case <-failing:
		case <-changed:
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrUnavailable,
				"the node daemon at %s is not reachable (%v): start it (systemctl start gopmi.socket), or run alone with gopmi run -daemon none", c.path, ctx.Err())
		case <-c.ctx.Done():
			return nil, plugin.Errorf(plugin.ErrUnavailable, "the node daemon client is closed")
		}
	}
}

// retry runs f on a connection, again on the next connection when the
// daemon went away during it, until ctx ends.
func retry[T any](ctx context.Context, c *Client, f func(plugin.Full) (T, error)) (T, error) {
	for {
		be, err := c.backend(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := f(be)
		if err == nil || !errors.Is(err, plugin.ErrUnavailable) || ctx.Err() != nil {
			return v, err
		}
		c.log.Debug().Err(err).Msg("node daemon call cut short; retrying on the next connection")
		select {
		case <-time.After(retryEvery):
		case <-ctx.Done():
			return v, err
		}
	}
}

// Publish publishes through the daemon.
func (c *Client) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	ctx, cancel := context.WithTimeout(ctx, plugin.DefaultLookupTimeout)
	defer cancel()
	_, err := retry(ctx, c, func(be plugin.Full) (struct{}, error) { return struct{}{}, be.Publish(ctx, req) })
	return err
}

// Lookup looks up through the daemon; a lookup with Wait waits there.
func (c *Client) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, req.TimeoutOrDefault()+time.Second)
	defer cancel()
	return retry(ctx, c, func(be plugin.Full) (*plugin.LookupResponse, error) { return be.Lookup(ctx, req) })
}

// Connect connects to jobs of other runs through the daemon.
func (c *Client) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, plugin.DefaultLookupTimeout)
	defer cancel()
	return retry(ctx, c, func(be plugin.Full) (*plugin.ConnectResponse, error) { return be.Connect(ctx, req) })
}

// Fence joins a fence across runs through the daemon (Server.Fence).
func (c *Client) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, req.TimeoutOrDefault()+fenceGrace)
	defer cancel()
	return retry(ctx, c, func(be plugin.Full) (*plugin.FenceResponse, error) { return be.Fence(ctx, req) })
}

// DirectModex reads a key of another run's job through the daemon.
func (c *Client) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, plugin.DefaultFenceTimeout)
	defer cancel()
	return retry(ctx, c, func(be plugin.Full) (*plugin.ModexResponse, error) { return be.DirectModex(ctx, req) })
}

// Unpublish unpublishes through the daemon.
func (c *Client) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	ctx, cancel := context.WithTimeout(ctx, plugin.DefaultLookupTimeout)
	defer cancel()
	_, err := retry(ctx, c, func(be plugin.Full) (struct{}, error) { return struct{}{}, be.Unpublish(ctx, req) })
	return err
}

// Query asks the daemon, in the contract's query vocabulary.
func (c *Client) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, plugin.DefaultLookupTimeout)
	defer cancel()
	return retry(ctx, c, func(be plugin.Full) (*plugin.QueryResponse, error) { return be.Query(ctx, req) })
}

// Log sends lines about a job of the run (how it ended) to the daemon's
// log of it, within a second: the run is ending.
func (c *Client) Log(job string, data []plugin.Info) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := retry(ctx, c, func(be plugin.Full) (struct{}, error) {
		return struct{}{}, be.Log(ctx, &plugin.LogRequest{Proc: plugin.Proc{Nspace: job, Rank: plugin.RankWildcard}, Data: data})
	})
	if err != nil {
		c.log.Debug().Err(err).Msg("send the run's end to the node daemon")
	}
}

// Close tells the daemon the run ended (when connected: a daemon that is
// down learns it from the grace), after the registrations still queued
// went out (within a second), and stops the client.
func (c *Client) Close() error {
	wait, cancel := context.WithTimeout(context.Background(), time.Second)
	_, _ = c.backend(wait)
	cancel()
	c.mu.Lock()
	conn := c.conn
	var first string
	if len(c.jobs) > 0 {
		first = c.jobs[0].Job.Nspace
	}
	c.mu.Unlock()
	if conn != nil && first != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := conn.Backend().NotifyEvent(ctx, &plugin.EventRequest{Code: EventRunEnded, Source: plugin.Proc{Nspace: first, Rank: plugin.RankWildcard}})
		cancel()
		if err != nil {
			c.log.Debug().Err(err).Msg("tell the node daemon the run ended")
		}
	}
	c.cancel()
	<-c.done
	return nil
}
