package pmiclient

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/wire"
)

// Client is a PMI-1 client on one connection, for integration tests and
// benchmarks. Every call takes a context whose deadline (or, without one,
// DefaultTimeout) bounds the exchange; cancelling it interrupts blocked
// I/O. A call that fails part way leaves the Client unusable (ErrBroken);
// a reply with rc != 0 is an *Error and the Client stays usable. Calls are
// serialised.
type Client struct {
	session
}

// New returns a PMI-1 client on conn.
func New(conn net.Conn) *Client { return &Client{session{newTransport(conn)}} }

// Dial connects as env says: PMI_FD, else PMI_PORT. In PMI_PORT mode
// call Initack with env.ID before Init, as MPICH does.
func Dial(ctx context.Context, env Env) (*Client, error) {
	c, err := dial(ctx, env)
	if err != nil {
		return nil, err
	}
	return New(c), nil
}

// Do sends m and reads its reply, which must be cmd=pmi1.ReplyName(m.Cmd).
// It does not look at rc; see the typed methods for that.
func (c *Client) Do(ctx context.Context, m *wire.Message) (*wire.Message, error) {
	return c.t.exchange(ctx, m.Cmd, pmi1.Encode(m), pmi1.ReplyName(m.Cmd))
}

// Send writes m without reading a reply.
func (c *Client) Send(ctx context.Context, m *wire.Message) error {
	return c.t.send(ctx, m.Cmd, pmi1.Encode(m))
}

func (c *Client) call(ctx context.Context, m *wire.Message) (*wire.Message, error) {
	r, err := c.Do(ctx, m)
	if err != nil {
		return nil, err
	}
	return r, checkRc(m.Cmd, r, "msg")
}

// Version is a protocol version as init answers it.
type Version struct{ Version, Subversion int }

// Initack performs the PMI_PORT handshake for PMI_ID id and returns the
// rank, size and debug level the three set lines carry.
func (c *Client) Initack(ctx context.Context, id int) (rank, size, debug int, err error) {
	if _, err := c.call(ctx, wire.New("initack").AddInt("pmiid", id)); err != nil {
		return 0, 0, 0, err
	}
	for _, key := range []string{"size", "rank", "debug"} {
		m, err := c.Recv(ctx)
		if err != nil {
			return 0, 0, 0, err
		}
		if m.Cmd != "set" {
			return 0, 0, 0, c.t.fail(ctx, "initack", fmt.Errorf("%w: cmd=%s, want set %s=", ErrProtocol, m.Cmd, key))
		}
		n, err := needInt("initack", m, key)
		if err != nil {
			return 0, 0, 0, err
		}
		switch key {
		case "size":
			size = n
		case "rank":
			rank = n
		default:
			debug = n
		}
	}
	return rank, size, debug, nil
}

// Init sends cmd=init pmi_version=1 pmi_subversion=1, as MPICH does, and
// returns the version the server answered.
func (c *Client) Init(ctx context.Context) (Version, error) { return c.InitVersion(ctx, 1, 1) }

// InitVersion sends init with the given version.
func (c *Client) InitVersion(ctx context.Context, version, subversion int) (Version, error) {
	r, err := c.call(ctx, wire.New("init").AddInt("pmi_version", version).AddInt("pmi_subversion", subversion))
	if err != nil {
		return Version{}, err
	}
	v, err := needInt("init", r, "pmi_version")
	if err != nil {
		return Version{}, err
	}
	s, err := needInt("init", r, "pmi_subversion")
	if err != nil {
		return Version{}, err
	}
	return Version{v, s}, nil
}

// Maxes are the limits get_maxes reports.
type Maxes struct{ KVSName, Key, Val int }

// GetMaxes asks for the KVS limits.
func (c *Client) GetMaxes(ctx context.Context) (Maxes, error) {
	r, err := c.call(ctx, wire.New("get_maxes"))
	if err != nil {
		return Maxes{}, err
	}
	var m Maxes
	for _, f := range []struct {
		key string
		dst *int
	}{{"kvsname_max", &m.KVSName}, {"keylen_max", &m.Key}, {"vallen_max", &m.Val}} {
		if *f.dst, err = needInt("get_maxes", r, f.key); err != nil {
			return Maxes{}, err
		}
	}
	return m, nil
}

// GetAppnum asks for the task's application number.
func (c *Client) GetAppnum(ctx context.Context) (int, error) {
	r, err := c.call(ctx, wire.New("get_appnum"))
	if err != nil {
		return 0, err
	}
	return needInt("get_appnum", r, "appnum")
}

// GetUniverseSize asks for MPI_UNIVERSE_SIZE (-1: unknown).
func (c *Client) GetUniverseSize(ctx context.Context) (int, error) {
	r, err := c.call(ctx, wire.New("get_universe_size"))
	if err != nil {
		return 0, err
	}
	return needInt("get_universe_size", r, "size")
}

// KVSName asks for the job's KVS name.
func (c *Client) KVSName(ctx context.Context) (string, error) {
	r, err := c.call(ctx, wire.New("get_my_kvsname"))
	if err != nil {
		return "", err
	}
	return needStr("get_my_kvsname", r, "kvsname")
}

// Put stores key=value in kvsname (omitted when empty).
func (c *Client) Put(ctx context.Context, kvsname, key, value string) error {
	m := wire.New("put")
	if kvsname != "" {
		m.Add("kvsname", kvsname)
	}
	_, err := c.call(ctx, m.Add("key", key).Add("value", value))
	return err
}

// Get reads key from kvsname (omitted when empty). A miss is an *Error
// (rc != 0), or ErrNotFound if the server says found=FALSE with rc=0.
func (c *Client) Get(ctx context.Context, kvsname, key string) (string, error) {
	m := wire.New("get")
	if kvsname != "" {
		m.Add("kvsname", kvsname)
	}
	r, err := c.call(ctx, m.Add("key", key))
	if err != nil {
		return "", err
	}
	if found, err := r.Bool("found", true); err != nil {
		return "", fmt.Errorf("pmi get: %w: %w", ErrProtocol, err)
	} else if !found {
		return "", fmt.Errorf("pmi get %s: %w", key, ErrNotFound)
	}
	return needStr("get", r, "value")
}

// Barrier enters a world barrier (plain barrier_in, no group=).
func (c *Client) Barrier(ctx context.Context) error {
	_, err := c.call(ctx, wire.New("barrier_in"))
	return err
}

// BarrierGroup enters a PMI 1.2 group barrier and returns the reply (whose
// tag= the server should echo).
func (c *Client) BarrierGroup(ctx context.Context, g pmi1.Group) (*wire.Message, error) {
	return c.call(ctx, wire.New("barrier_in").Add("group", g.String()))
}

// Publish publishes service at port.
func (c *Client) Publish(ctx context.Context, service, port string) error {
	_, err := c.call(ctx, wire.New("publish_name").Add("service", service).Add("port", port))
	return err
}

// Lookup returns the port published for service.
func (c *Client) Lookup(ctx context.Context, service string) (string, error) {
	r, err := c.call(ctx, wire.New("lookup_name").Add("service", service))
	if err != nil {
		return "", err
	}
	p, ok := r.Get("port")
	if !ok {
		return "", fmt.Errorf("pmi lookup_name %s: %w", service, ErrNotFound)
	}
	return p, nil
}

// Unpublish removes service.
func (c *Client) Unpublish(ctx context.Context, service string) error {
	_, err := c.call(ctx, wire.New("unpublish_name").Add("service", service))
	return err
}

// SpawnResult is a spawn reply.
type SpawnResult struct {
	// JobID is the reply's jobid=, when the server sends one.
	JobID string
	// Errcodes are the per-process codes of errcodes=; nil when absent.
	Errcodes []int
	Reply    *wire.Message
}

func spawnResult(cmd string, r *wire.Message) (*SpawnResult, error) {
	res := &SpawnResult{JobID: r.Value("jobid"), Reply: r}
	if s, ok := r.Get("errcodes"); ok && s != "" {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return nil, fmt.Errorf("pmi %s: %w: errcodes=%q", cmd, ErrProtocol, s)
			}
			res.Errcodes = append(res.Errcodes, n)
		}
	}
	return res, nil
}

// Spawn sends s as mcmd=spawn blocks (one write) and reads the single
// spawn_result.
func (c *Client) Spawn(ctx context.Context, s *wire.Spawn) (*SpawnResult, error) {
	var b []byte
	for _, m := range pmi1.SpawnBlocks(s) {
		b = pmi1.Append(b, m)
	}
	r, err := c.t.exchange(ctx, "spawn", b, "spawn_result")
	if err != nil {
		return nil, err
	}
	if err := checkRc("spawn", r, "msg"); err != nil {
		return nil, err
	}
	return spawnResult("spawn", r)
}

// Abort sends abort exitcode=code and, when msg is not empty, message=msg
// (MPICH >= 4.1's form). No reply is read.
func (c *Client) Abort(ctx context.Context, code int, msg string) error {
	return c.Send(ctx, abortMessage(code, msg))
}

// Finalize sends finalize and waits for finalize_ack.
func (c *Client) Finalize(ctx context.Context) error {
	_, err := c.call(ctx, wire.New("finalize"))
	return err
}
