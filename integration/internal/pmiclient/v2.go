package pmiclient

import (
	"context"
	"fmt"
	"net"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// Client2 is a PMI-2 client on one connection, with the same context,
// error and serialisation rules as Client. It writes left-aligned length
// prefixes and no junk, like Slurm's libpmi2, and like both real client
// libraries it reads booleans (found, kvscopy, debugged, pmiverbose) only
// as exactly TRUE or FALSE, so a server that writes anything else fails
// here as it would under a real client.
type Client2 struct {
	session
}

// New2 returns a PMI-2 client on conn. Call Init first.
func New2(conn net.Conn) *Client2 { return &Client2{session{newTransport(conn)}} }

// Dial2 connects as env says: PMI_FD, else PMI_PORT (PMI-2 clients send
// no initack).
func Dial2(ctx context.Context, env Env) (*Client2, error) {
	c, err := dial(ctx, env)
	if err != nil {
		return nil, err
	}
	return New2(c), nil
}

// Do sends m and reads its reply, which must be cmd=m.Cmd+"-response". It
// does not look at rc.
func (c *Client2) Do(ctx context.Context, m *wire.Message) (*wire.Message, error) {
	b, err := encode2(m)
	if err != nil {
		return nil, err
	}
	return c.t.exchange(ctx, m.Cmd, b, pmi2.ReplyName(m.Cmd))
}

// Send writes m without reading a reply.
func (c *Client2) Send(ctx context.Context, m *wire.Message) error {
	b, err := encode2(m)
	if err != nil {
		return err
	}
	return c.t.send(ctx, m.Cmd, b)
}

func encode2(m *wire.Message) ([]byte, error) {
	if n := pmi2.BodyLen(m); n > pmi2.MaxBody {
		return nil, fmt.Errorf("pmi %s: %w: body of %d bytes exceeds %d", m.Cmd, wire.ErrTooLong, n, pmi2.MaxBody)
	}
	return pmi2.Encode(m), nil
}

func (c *Client2) call(ctx context.Context, m *wire.Message) (*wire.Message, error) {
	r, err := c.Do(ctx, m)
	if err != nil {
		return nil, err
	}
	return r, checkRc(m.Cmd, r, "errmsg")
}

// InitLine sends the PMI-1 line cmd=init pmi_version=2 pmi_subversion=0,
// checks the answer and switches the connection to PMI-2 framing.
func (c *Client2) InitLine(ctx context.Context) error {
	m := wire.New("init").AddInt("pmi_version", 2).AddInt("pmi_subversion", 0)
	r, err := c.t.exchange(ctx, "init", pmi1.Encode(m), "response_to_init")
	if err != nil {
		return err
	}
	if err := checkRc("init", r, "msg"); err != nil {
		return err
	}
	if v := r.Value("pmi_version"); v != "2" {
		return fmt.Errorf("pmi init: %w: server answered pmi_version=%q, want 2", ErrProtocol, v)
	}
	c.t.mu.Lock()
	c.t.setV2()
	c.t.mu.Unlock()
	return nil
}

// FullInit chooses the attributes fullinit sends; nil and empty fields are
// left out. MPICH >= 4.1 sends only pmirank; Slurm's libpmi2 sends
// pmijobid, pmirank (or srcid for PMI_ID) and threaded=FALSE.
type FullInit struct {
	JobID    string
	Rank     *int
	SrcID    *int
	Threaded *bool
}

// Int returns &v, for FullInit.
func Int(v int) *int { return &v }

// Bool returns &v, for FullInit.
func Bool(v bool) *bool { return &v }

// InitInfo is what fullinit-response reports.
type InitInfo struct {
	Version, Subversion int
	Rank, Size, Appnum  int
	// SpawnerJobID is set in spawned jobs; Spawned says whether the reply
	// carried it.
	SpawnerJobID string
	Spawned      bool
	Debugged     bool
	Verbose      bool
	Reply        *wire.Message
}

// Init runs InitLine then fullinit.
func (c *Client2) Init(ctx context.Context, fi FullInit) (*InitInfo, error) {
	if err := c.InitLine(ctx); err != nil {
		return nil, err
	}
	return c.FullInit(ctx, fi)
}

// FullInit sends fullinit and decodes the reply. Like Slurm's libpmi2 it
// requires pmi-version, pmi-subversion, rank, size and appnum.
func (c *Client2) FullInit(ctx context.Context, fi FullInit) (*InitInfo, error) {
	m := wire.New("fullinit")
	if fi.JobID != "" {
		m.Add("pmijobid", fi.JobID)
	}
	if fi.Rank != nil {
		m.AddInt("pmirank", *fi.Rank)
	}
	if fi.SrcID != nil {
		m.AddInt("srcid", *fi.SrcID)
	}
	if fi.Threaded != nil {
		m.AddBool("threaded", *fi.Threaded)
	}
	r, err := c.call(ctx, m)
	if err != nil {
		return nil, err
	}
	info := &InitInfo{Reply: r}
	for _, f := range []struct {
		key string
		dst *int
	}{{"pmi-version", &info.Version}, {"pmi-subversion", &info.Subversion}, {"rank", &info.Rank}, {"size", &info.Size}, {"appnum", &info.Appnum}} {
		if *f.dst, err = needInt("fullinit", r, f.key); err != nil {
			return nil, err
		}
	}
	info.SpawnerJobID, info.Spawned = r.Get("spawner-jobid")
	if info.Debugged, err = strictBool("fullinit", r, "debugged", false); err != nil {
		return nil, err
	}
	if info.Verbose, err = strictBool("fullinit", r, "pmiverbose", false); err != nil {
		return nil, err
	}
	return info, nil
}

// JobGetID asks for the job id.
func (c *Client2) JobGetID(ctx context.Context) (string, error) {
	r, err := c.call(ctx, wire.New("job-getid"))
	if err != nil {
		return "", err
	}
	return needStr("job-getid", r, "jobid")
}

// JobConnect connects to another job; it returns the reply's kvscopy.
func (c *Client2) JobConnect(ctx context.Context, jobid string) (bool, error) {
	r, err := c.call(ctx, wire.New("job-connect").Add("jobid", jobid))
	if err != nil {
		return false, err
	}
	return strictBool("job-connect", r, "kvscopy", false)
}

// JobDisconnect undoes JobConnect.
func (c *Client2) JobDisconnect(ctx context.Context, jobid string) error {
	_, err := c.call(ctx, wire.New("job-disconnect").Add("jobid", jobid))
	return err
}

// KVSPut stores key=value.
func (c *Client2) KVSPut(ctx context.Context, key, value string) error {
	_, err := c.call(ctx, wire.New("kvs-put").Add("key", key).Add("value", value))
	return err
}

// KVSGet reads key; jobid is left out when empty and srcid when -1, as
// MPICH does. found=FALSE is ErrNotFound.
func (c *Client2) KVSGet(ctx context.Context, jobid string, srcid int, key string) (string, error) {
	m := wire.New("kvs-get")
	if jobid != "" {
		m.Add("jobid", jobid)
	}
	if srcid != -1 {
		m.AddInt("srcid", srcid)
	}
	return c.found(ctx, m.Add("key", key), key)
}

// found runs a request whose reply has found= and value=.
func (c *Client2) found(ctx context.Context, m *wire.Message, key string) (string, error) {
	r, err := c.call(ctx, m)
	if err != nil {
		return "", err
	}
	if _, ok := r.Get("found"); !ok {
		return "", fmt.Errorf("pmi %s: %w: no found=", m.Cmd, ErrProtocol)
	}
	b, err := strictBool(m.Cmd, r, "found", false)
	if err != nil {
		return "", err
	}
	if !b {
		return "", fmt.Errorf("pmi %s %s: %w", m.Cmd, key, ErrNotFound)
	}
	return needStr(m.Cmd, r, "value")
}

// KVSFence commits puts and waits for the fence reply.
func (c *Client2) KVSFence(ctx context.Context) error {
	_, err := c.call(ctx, wire.New("kvs-fence"))
	return err
}

// PutNodeAttr stores a node attribute.
func (c *Client2) PutNodeAttr(ctx context.Context, key, value string) error {
	_, err := c.call(ctx, wire.New("info-putnodeattr").Add("key", key).Add("value", value))
	return err
}

// GetNodeAttr reads a node attribute; with wait the server answers once
// some task of the node puts it (bound the wait with ctx). wait=FALSE is
// left out, as MPICH does. found=FALSE is ErrNotFound.
func (c *Client2) GetNodeAttr(ctx context.Context, key string, wait bool) (string, error) {
	m := wire.New("info-getnodeattr").Add("key", key)
	if wait {
		m.AddBool("wait", true)
	}
	return c.found(ctx, m, key)
}

// GetJobAttr reads a job attribute (PMI_process_mapping, universeSize,
// ...). found=FALSE is ErrNotFound.
func (c *Client2) GetJobAttr(ctx context.Context, key string) (string, error) {
	return c.found(ctx, wire.New("info-getjobattr").Add("key", key), key)
}

func withInfo(m *wire.Message, info []wire.Arg) *wire.Message {
	m.AddInt("infokeycount", len(info))
	for i, a := range info {
		m.Add(fmt.Sprintf("infokey%d", i), a.Key).Add(fmt.Sprintf("infoval%d", i), a.Value)
	}
	return m
}

// NamePublish publishes name at port with optional info pairs.
func (c *Client2) NamePublish(ctx context.Context, name, port string, info ...wire.Arg) error {
	_, err := c.call(ctx, withInfo(wire.New("name-publish").Add("name", name).Add("port", port), info))
	return err
}

// NameLookup returns the port published for name, read from port= (as
// MPICH does) or else value= (as Slurm's libpmi2 does). A reply without
// either is ErrNotFound.
func (c *Client2) NameLookup(ctx context.Context, name string, info ...wire.Arg) (string, error) {
	r, err := c.call(ctx, withInfo(wire.New("name-lookup").Add("name", name), info))
	if err != nil {
		return "", err
	}
	if p, ok := r.Get("port"); ok {
		return p, nil
	}
	if p, ok := r.Get("value"); ok {
		return p, nil
	}
	return "", fmt.Errorf("pmi name-lookup %s: %w", name, ErrNotFound)
}

// NameUnpublish removes name.
func (c *Client2) NameUnpublish(ctx context.Context, name string, info ...wire.Arg) error {
	_, err := c.call(ctx, withInfo(wire.New("name-unpublish").Add("name", name), info))
	return err
}

// Spawn sends s as one spawn command and decodes spawn-response.
func (c *Client2) Spawn(ctx context.Context, s *wire.Spawn) (*SpawnResult, error) {
	r, err := c.call(ctx, pmi2.SpawnMessage(s))
	if err != nil {
		return nil, err
	}
	return spawnResult("spawn", r)
}

// Abort sends abort in MPICH >= 4.1's form (exitcode=, message= when not
// empty, no isworld) and reads no reply. Use Send for Slurm's form
// (isworld=, msg=).
func (c *Client2) Abort(ctx context.Context, code int, msg string) error {
	return c.Send(ctx, abortMessage(code, msg))
}

// Ring is the result of the PMIX_Ring extension.
type Ring struct {
	// Count is the exclusive prefix sum of ring-count (the caller's ring
	// rank when every task contributes 1).
	Count       int
	Left, Right string
}

// Ring runs Slurm's ring command with the caller's count and the values
// for its left and right neighbours.
func (c *Client2) Ring(ctx context.Context, count int, left, right string) (Ring, error) {
	r, err := c.call(ctx, wire.New("ring").AddInt("ring-count", count).Add("ring-left", left).Add("ring-right", right))
	if err != nil {
		return Ring{}, err
	}
	var out Ring
	if out.Count, err = needInt("ring", r, "ring-count"); err != nil {
		return Ring{}, err
	}
	if out.Left, err = needStr("ring", r, "ring-left"); err != nil {
		return Ring{}, err
	}
	if out.Right, err = needStr("ring", r, "ring-right"); err != nil {
		return Ring{}, err
	}
	return out, nil
}

// Finalize sends finalize and waits for finalize-response.
func (c *Client2) Finalize(ctx context.Context) error {
	_, err := c.call(ctx, wire.New("finalize"))
	return err
}

// strictBool reads a boolean reply attribute as the client libraries do:
// exactly TRUE or FALSE; missing means def.
func strictBool(cmd string, m *wire.Message, key string, def bool) (bool, error) {
	v, ok := m.Get(key)
	switch {
	case !ok:
		return def, nil
	case v == "TRUE":
		return true, nil
	case v == "FALSE":
		return false, nil
	}
	return false, fmt.Errorf("pmi %s: %w: %s=%q is not TRUE or FALSE", cmd, ErrProtocol, key, v)
}
