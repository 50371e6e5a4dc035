package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// BootstrapVersion is the only gopmi.shim.v1.Bootstrap version this shim
// accepts.
const BootstrapVersion = 1

// DefaultShutdownTimeout is how long a server takes to shut down when the
// bootstrap does not say; the other time-outs' defaults are the
// contract's (plugin.Default*).
const DefaultShutdownTimeout = 5 * time.Second

// Bounds on what the bootstrap may ask for: below the minimums real
// clients break (MPICH's own buffers assume at least these), above the
// maximums one line could take the node's memory.
const (
	minKvsnameMax = 16
	minKeyMax     = 16
	minValMax     = 64
	// minKVSMax holds MPICH's start-up at a few ranks.
	minKVSMax  = 64 << 10
	maxLineMax = 64 << 20
	// lineOverhead is room for the rest of a put request around its
	// kvsname, key and value (the bridge keeps the same margin).
	lineOverhead = 1024
	// maxValMax: a PMI-2 reply carries the value in a body whose length
	// has six digits, and needs room for its other fields.
	maxValMax = pmi2.MaxBody - 4096
	// maxTimeout catches a duration given in the wrong unit.
	maxTimeout = 7 * 24 * time.Hour
)

// PMIxVar is the variable a PMIx face's READY carries (sd_notify) once
// per variable of the environment its node's tasks need:
// "GOPMI_PMIX_VAR=KEY=VALUE", the same for every rank but PMIX_RANK, which
// the step daemon adds. No value holds a newline, so a step daemon splits
// the message into lines and parses nothing else.
const PMIxVar = "GOPMI_PMIX_VAR"

// PMIxEnv is the same environment as one JSON array, which READY still
// carries for step daemons older than PMIxVar (an mpi/gopmi that slurmd
// loaded before an upgrade of gopmi's binaries). Deprecated: read
// PMIxVar.
const PMIxEnv = "GOPMI_PMIX_ENV"

// maxReady bounds a READY message: a step daemon reads it into a buffer
// of 64 KiB.
const maxReady = 60 << 10

// PMIxReady is the READY message of a PMIx face serving tasks, whose
// environment is env (PMIxVar, and PMIxEnv); a variable that holds a
// newline or a NUL, or an environment READY cannot carry, is an error.
func PMIxReady(tasks int, env []string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "READY=1\nSTATUS=serving %d PMIx tasks", tasks)
	for _, e := range env {
		if strings.ContainsAny(e, "\n\x00") || !strings.Contains(e, "=") {
			return "", fmt.Errorf("the tasks' PMIx environment has %q, which READY cannot carry", e)
		}
		b.WriteString("\n" + PMIxVar + "=" + e)
	}
	old, _ := json.Marshal(env)
	b.WriteString("\n" + PMIxEnv + "=" + string(old))
	if b.Len() > maxReady {
		return "", fmt.Errorf("the tasks' PMIx environment (%d bytes with its READY) is more than a step daemon reads (%d)", b.Len(), maxReady)
	}
	return b.String(), nil
}

// ParsePMIxEnv is the tasks' environment in a PMIx face's READY message.
func ParsePMIxEnv(msg string) []string {
	var env []string
	for line := range strings.SplitSeq(msg, "\n") {
		if e, ok := strings.CutPrefix(line, PMIxVar+"="); ok {
			env = append(env, e)
		}
	}
	return env
}

// Config is a validated bootstrap with the defaults applied: one job on
// one node, as the serving loop and its host need it.
type Config struct {
	Job    plugin.Job
	NodeID int32
	Tasks  []Task
	// PortFD names the PMI_PORT listener among the host's fds; "" when
	// every task has its own connection.
	PortFD string
	// PortSecret is the job's PMI_PORT secret (PMI_AUTH_SECRET): a
	// PMI-2 client proves it knows it with fullinit
	// authtype=challenge-sha256.
	PortSecret string
	Backend    BackendSpec
	Preput     []plugin.Info
	Attrs      []plugin.Info
	Limits     bridge.Limits
	Timeouts   bridge.Timeouts
	// BackendStart bounds launching the backend plus Configure.
	BackendStart time.Duration
	// Connect bounds how long a task takes to send its first byte, and
	// the PMI_PORT tasks to connect; 0: no check.
	Connect   time.Duration
	Shutdown  time.Duration
	FenceMode bridge.FenceMode
	LogLevel  zerolog.Level
	PMIDebug  bool
	// PMIx: the tasks are PMIx clients, served by the PMIx face (they
	// have no fds; see the bootstrap's pmix).
	PMIx bool
	// PMIxRendezvous names the inherited listener the tasks were told to
	// reach their PMIx server at (the bootstrap's pmix_rendezvous_fd);
	// "" when libpmix makes its own.
	PMIxRendezvous string
}

// Task is one local task and the fd it reaches the server on ("" for
// PMI_PORT).
type Task struct {
	Rank   int32
	FDName string
}

// BackendSpec says which backend serves the job and how to start it.
type BackendSpec struct {
	Name   string
	Path   string
	Args   []string
	Config []byte
	// StartAtOnce starts the backend as soon as the tasks are served,
	// even for a job on one node.
	StartAtOnce bool
}

// BinaryName is the backend's name as logs and errors show it.
func (b BackendSpec) BinaryName() string {
	if b.Name != "" {
		return "gopmi-rm-" + b.Name
	}
	return b.Path
}

// PortTasks is the number of tasks that connect through PMI_PORT.
func (c *Config) PortTasks() int {
	n := 0
	for _, t := range c.Tasks {
		if t.FDName == "" {
			n++
		}
	}
	return n
}

// NewConfig validates b and applies the defaults. Every error is a
// *FieldError naming the offending field.
func NewConfig(b *shimv1.Bootstrap) (*Config, error) {
	c := &Config{}
	if b.GetVersion() != BootstrapVersion {
		return nil, fieldErr("version", "got %d, this shim speaks %d", b.GetVersion(), BootstrapVersion)
	}
	if err := c.setLimits(b.GetLimits()); err != nil {
		return nil, err
	}
	if err := c.setJob(b.GetJob()); err != nil {
		return nil, err
	}
	if err := c.setNodeAndTasks(b); err != nil {
		return nil, err
	}
	if err := c.setBackend(b.GetBackend()); err != nil {
		return nil, err
	}
	if err := c.setTimeouts(b.GetTimeouts()); err != nil {
		return nil, err
	}
	mode, err := bridgeFenceMode(b.GetFenceMode())
	if err != nil {
		return nil, err
	}
	c.FenceMode = mode
	switch lv := b.GetLogLevel(); lv {
	case "":
		c.LogLevel = zerolog.InfoLevel
	case "trace", "debug", "info", "warn", "error":
		c.LogLevel, _ = zerolog.ParseLevel(lv)
	default:
		return nil, fieldErr("log_level", "%q is not one of trace, debug, info, warn, error", lv)
	}
	c.PMIDebug = b.GetPmiDebug()
	return c, nil
}

func (c *Config) setLimits(l *shimv1.Limits) error {
	get := func(field string, v int32, def, lo, hi int) (int, error) {
		switch {
		case v == 0:
			return def, nil
		case v < 0:
			return 0, fieldErr("limits."+field, "%d is negative", v)
		case int(v) < lo:
			return 0, fieldErr("limits."+field, "%d is below the minimum %d", v, lo)
		case int(v) > hi:
			return 0, fieldErr("limits."+field, "%d is above the maximum %d", v, hi)
		}
		return int(v), nil
	}
	var err error
	if c.Limits.LineMax, err = get("line_max", l.GetLineMax(), bridge.DefaultLineMax, 1024, maxLineMax); err != nil {
		return err
	}
	ceiling := c.Limits.LineMax - lineOverhead
	if c.Limits.KvsnameMax, err = get("kvsname_max", l.GetKvsnameMax(), bridge.DefaultKvsnameMax, minKvsnameMax, ceiling); err != nil {
		return err
	}
	if c.Limits.KeyMax, err = get("key_max", l.GetKeyMax(), bridge.DefaultKeyMax, minKeyMax, ceiling); err != nil {
		return err
	}
	if c.Limits.ValMax, err = get("val_max", l.GetValMax(), bridge.DefaultValMax, minValMax, min(ceiling, maxValMax)); err != nil {
		return err
	}
	switch v := l.GetKvsMax(); {
	case v == 0:
		c.Limits.KVSMax = bridge.DefaultKVSMax
	case v < minKVSMax:
		return fieldErr("limits.kvs_max", "%d is below the minimum %d", v, minKVSMax)
	default:
		c.Limits.KVSMax = v
	}
	if need := c.Limits.KvsnameMax + c.Limits.KeyMax + c.Limits.ValMax + lineOverhead; need > c.Limits.LineMax {
		return fieldErr("limits.line_max", "%d cannot hold a put of the longest kvsname, key and value (%d bytes)", c.Limits.LineMax, need)
	}
	return nil
}

func (c *Config) setJob(j *shimv1.Job) error {
	if j == nil {
		return fieldErr("job", "missing")
	}
	switch {
	case j.GetNspace() == "":
		return fieldErr("job.nspace", "empty")
	case len(j.GetNspace()) >= c.Limits.KvsnameMax:
		// PMI clients copy the kvsname into a buffer of kvsname_max bytes,
		// NUL included.
		return fieldErr("job.nspace", "%d bytes does not fit limits.kvsname_max %d", len(j.GetNspace()), c.Limits.KvsnameMax)
	case strings.ContainsAny(j.GetNspace(), " \t\r\n=;"):
		return fieldErr("job.nspace", "%q contains a character PMI cannot carry (space, '=' or ';')", j.GetNspace())
	}
	c.Job = plugin.Job{
		Nspace:       j.GetNspace(),
		Size:         j.GetSize(),
		UniverseSize: j.GetUniverseSize(),
		Parent:       j.GetParent(),
	}
	for _, n := range j.GetNodes() {
		node := plugin.Node{ID: n.GetId(), Name: n.GetName(), Ranks: append([]int32(nil), n.GetRanks()...), Addr: n.GetAddr()}
		if node.Name == "" {
			node.Name = fmt.Sprintf("node%d", n.GetId())
		}
		c.Job.Nodes = append(c.Job.Nodes, node)
	}
	for _, a := range j.GetApps() {
		c.Job.Apps = append(c.Job.Apps, plugin.App{FirstRank: a.GetFirstRank(), Size: a.GetSize(), Cmd: a.GetCmd(),
			Ranks: append([]int32(nil), a.GetRanks()...)})
	}
	// Every rank lives on exactly one node: PMI_process_mapping and the
	// fence's participant lists are computed from this layout. The rule
	// is plugin.Job.Validate's; the shim adds the field path.
	if err := c.Job.Validate(); err != nil {
		var le *plugin.LayoutError
		if errors.As(err, &le) {
			return fieldErr("job."+le.Field, "%s", le.Msg)
		}
		return fieldErr("job", "%v", err)
	}
	if c.Job.UniverseSize == 0 {
		c.Job.UniverseSize = c.Job.Size
	}
	// No apps means one app holding the whole job.
	if len(c.Job.Apps) == 0 {
		c.Job.Apps = []plugin.App{{FirstRank: 0, Size: c.Job.Size}}
	}

	var err error
	if c.Preput, err = c.infos("job.preput", j.GetPreput(), true); err != nil {
		return err
	}
	if c.Attrs, err = c.infos("job.attrs", j.GetAttrs(), false); err != nil {
		return err
	}
	return nil
}

// infos converts key/values; kvs entries must fit the advertised limits
// because clients read them with get.
func (c *Config) infos(field string, kvs []*shimv1.KeyValue, kvs2 bool) ([]plugin.Info, error) {
	seen := map[string]int{}
	var out []plugin.Info
	for i, kv := range kvs {
		f := fmt.Sprintf("%s[%d]", field, i)
		k := kv.GetKey()
		switch {
		case k == "":
			return nil, fieldErr(f+".key", "empty")
		case strings.ContainsAny(k, " \t\r\n=;"):
			return nil, fieldErr(f+".key", "%q contains a character PMI cannot carry (space, '=' or ';')", k)
		case kvs2 && len(k) > c.Limits.KeyMax:
			return nil, fieldErr(f+".key", "%d bytes, over limits.key_max %d", len(k), c.Limits.KeyMax)
		case kvs2 && len(kv.GetValue()) > c.Limits.ValMax:
			return nil, fieldErr(f+".value", "%d bytes, over limits.val_max %d", len(kv.GetValue()), c.Limits.ValMax)
		case strings.ContainsAny(kv.GetValue(), "\n"):
			return nil, fieldErr(f+".value", "contains a newline")
		}
		if prev, dup := seen[k]; dup {
			return nil, fieldErr(f+".key", "%q already set by %s[%d]", k, field, prev)
		}
		seen[k] = i
		out = append(out, plugin.Info{Key: k, Value: kv.GetValue()})
	}
	return out, nil
}

func (c *Config) setNodeAndTasks(b *shimv1.Bootstrap) error {
	var local []int32
	found := false
	var ids []string
	for _, n := range c.Job.Nodes {
		ids = append(ids, fmt.Sprint(n.ID))
		if n.ID == b.GetNodeId() {
			found, local = true, n.Ranks
		}
	}
	if !found {
		return fieldErr("node_id", "%d is not in job.nodes (ids %s)", b.GetNodeId(), strings.Join(ids, ", "))
	}
	c.NodeID = b.GetNodeId()
	c.PortFD = b.GetPmiPortFd()
	c.PMIx = b.GetPmix()
	c.PMIxRendezvous = b.GetPmixRendezvousFd()
	c.PortSecret = b.GetPmiPortSecret()
	switch {
	case c.PMIxRendezvous != "" && !c.PMIx:
		return fieldErr("pmix_rendezvous_fd", "%q without pmix: only a PMIx server takes a rendezvous", c.PMIxRendezvous)
	case strings.Contains(c.PMIxRendezvous, ":"):
		return fieldErr("pmix_rendezvous_fd", "%q contains ':', the LISTEN_FDNAMES separator", c.PMIxRendezvous)
	}

	mine := map[int32]bool{}
	for _, r := range local {
		mine[r] = true
	}
	if len(b.GetTasks()) == 0 {
		return fieldErr("tasks", "empty; node %d hosts %s", c.NodeID, plugin.RankList(local))
	}
	byRank := map[int32]int{}
	byFD := map[string]int{}
	for i, t := range b.GetTasks() {
		f := fmt.Sprintf("tasks[%d]", i)
		r := t.GetRank()
		if !mine[r] {
			return fieldErr(f+".rank", "rank %d is not on node %d (which hosts %s)", r, c.NodeID, plugin.RankList(local))
		}
		if prev, dup := byRank[r]; dup {
			return fieldErr(f+".rank", "rank %d already used by tasks[%d]", r, prev)
		}
		byRank[r] = i
		name := t.GetFdName()
		switch {
		case name != "" && c.PMIx:
			return fieldErr(f+".fd_name", "%q for a PMIx task: PMIx clients connect to the PMIx server, not on an fd", name)
		case name == "" && c.PortFD == "" && !c.PMIx:
			return fieldErr(f+".fd_name", "empty and pmi_port_fd is not set: rank %d has no way to connect", r)
		case name != "" && name == c.PortFD:
			return fieldErr(f+".fd_name", "%q is the pmi_port_fd listener", name)
		case strings.Contains(name, ":"):
			return fieldErr(f+".fd_name", "%q contains ':', the LISTEN_FDNAMES separator", name)
		}
		if name != "" {
			if prev, dup := byFD[name]; dup {
				return fieldErr(f+".fd_name", "%q already used by tasks[%d]", name, prev)
			}
			byFD[name] = i
		}
		c.Tasks = append(c.Tasks, Task{Rank: r, FDName: name})
	}
	if strings.Contains(c.PortFD, ":") {
		return fieldErr("pmi_port_fd", "%q contains ':', the LISTEN_FDNAMES separator", c.PortFD)
	}
	for _, r := range local {
		if _, ok := byRank[r]; !ok {
			return fieldErr("tasks", "rank %d of node %d has no task", r, c.NodeID)
		}
	}
	return nil
}

func (c *Config) setBackend(b *shimv1.BackendConfig) error {
	if b == nil {
		return fieldErr("backend", "missing")
	}
	name := b.GetName()
	switch {
	case name == "" && b.GetPath() == "":
		return fieldErr("backend.name", "empty and backend.path is not set")
	case strings.ContainsAny(name, "/\x00"):
		return fieldErr("backend.name", "%q contains a '/'; use backend.path for a location", name)
	case strings.Contains(b.GetPath(), "\x00"):
		return fieldErr("backend.path", "contains a NUL byte")
	}
	c.Backend = BackendSpec{
		Name:   name,
		Path:   b.GetPath(),
		Args:   append([]string(nil), b.GetArgs()...),
		Config: []byte(b.GetConfig()),

		StartAtOnce: b.GetStartAtOnce(),
	}
	return nil
}

func (c *Config) setTimeouts(t *shimv1.Timeouts) error {
	get := func(field string, d *durationpb.Duration, def time.Duration) (time.Duration, error) {
		if d == nil {
			return def, nil
		}
		f := "timeouts." + field
		if err := d.CheckValid(); err != nil {
			return 0, fieldErr(f, "%v", err)
		}
		v := d.AsDuration()
		switch {
		case v < 0:
			return 0, fieldErr(f, "%v is negative", v)
		case v == 0:
			return def, nil
		case v > maxTimeout:
			return 0, fieldErr(f, "%v is over the maximum %v", v, maxTimeout)
		}
		return v, nil
	}
	var err error
	tt := &c.Timeouts
	if tt.Fence, err = get("fence", t.GetFence(), plugin.DefaultFenceTimeout); err != nil {
		return err
	}
	if tt.Get, err = get("get", t.GetGet(), tt.Fence); err != nil {
		return err
	}
	if tt.Lookup, err = get("lookup", t.GetLookup(), plugin.DefaultLookupTimeout); err != nil {
		return err
	}
	if tt.NodeAttr, err = get("nodeattr", t.GetNodeattr(), tt.Fence); err != nil {
		return err
	}
	if tt.Spawn, err = get("spawn", t.GetSpawn(), plugin.DefaultSpawnTimeout); err != nil {
		return err
	}
	if c.BackendStart, err = get("backend_start", t.GetBackendStart(), plugin.DefaultStartTimeout); err != nil {
		return err
	}
	if c.Connect, err = get("connect", t.GetConnect(), 0); err != nil {
		return err
	}
	if c.Shutdown, err = get("shutdown", t.GetShutdown(), DefaultShutdownTimeout); err != nil {
		return err
	}
	return nil
}

// bridgeTimeouts are the engine's time-outs. A call to the backend may wait
// for the backend to come up, which the bootstrap allows backend_start
// for: no backend call gives up sooner than that.
func (c *Config) bridgeTimeouts() bridge.Timeouts {
	t := c.Timeouts
	t.Backend = max(t.Backend, bridge.DefaultBackendTimeout, c.BackendStart)
	return t
}
