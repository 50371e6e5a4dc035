package local

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/names"
	"github.com/gopmi/gopmi/plugin/wake"
)

// name is what the universe's refusals call it.
func (u *Universe) name() string { return cmp.Or(u.opts.Name, "gopmi run") }

// UniverseOptions configure a Universe. The zero value works for tests:
// jobs are named "gopmi.<pid>.<seq>", spawn is not supported.
type UniverseOptions struct {
	// Name is what the universe's refusals call it: "gopmi run" (the
	// default), "the step's coordinator".
	Name string
	// Prefix starts every job id: jobs are <Prefix>.<seq>, seq 0 first.
	// Default "gopmi.<pid>".
	Prefix string
	// Hostname names this machine; a job's nodes are <Hostname> (one node)
	// or <Hostname>-<i>. Default os.Hostname().
	Hostname string
	// PPN is the number of ranks per simulated node; 0 puts a job on one
	// node.
	PPN int
	// UniverseSize is served as universeSize; a job's size when larger.
	UniverseSize int32
	// Wdir is the directory relative commands and wdir info keys of a
	// spawn are resolved against. Default: the current directory.
	Wdir string
	// Env is the environment spawned commands are looked up in (PATH).
	// Default os.Environ().
	Env []string
	// FenceTimeout bounds fences and direct modex requests that carry no
	// time-out of their own. Default plugin.DefaultFenceTimeout.
	FenceTimeout time.Duration

	// Launch starts a spawned job and returns once its tasks started. Nil
	// means spawn is not supported.
	Launch func(ctx context.Context, spec *JobSpec) error
	// LayoutByRM says that the resource manager behind Launch places a
	// spawned job's ranks itself (Slurm's srun): the layout NewJob made is
	// provisional, and the job's first Configure gives the real one (same
	// namespace and size; later Configures must agree with it).
	LayoutByRM bool
	// OnAbort is called, without locks held, after a process asked to
	// abort; the launcher kills the targets and ends the run.
	OnAbort func(ev AbortEvent)
	// OnProcFailed is called, without locks held, when a shim reports a
	// process that ended before finalize.
	OnProcFailed func(proc plugin.Proc, reason string)

	// Beyond, when set, is the node daemon every run on the node shares:
	// it holds the names of the default, node and global ranges, and it
	// connects jobs of this run to jobs of other runs and reads their keys.
	// Nil keeps all of that within this run.
	Beyond Beyond

	// Stderr receives Log output. Default os.Stderr.
	Stderr io.Writer
	// Logger is for the universe's own debug logs.
	Logger zerolog.Logger
	// Version is reported by GetInfo.
	Version string
}

// AbortEvent is a recorded abort request.
type AbortEvent struct {
	Proc    plugin.Proc
	Status  int32
	Message string
	// Targets are the processes to end; empty means Proc's job.
	Targets []plugin.Proc
}

// Universe is the in-process RM of `gopmi run`: a multi-job, multi-node
// plugin backend. Every shim of every job of the run reaches the same
// Universe through its gopmi-rm-local forwarder, so fences, the name
// service, spawn, queries and aborts see the whole run.
//
// Every method is safe for concurrent use, and every wait is bounded by
// the request's time-out and its context.
type Universe struct {
	plugin.Unimplemented

	opts    UniverseOptions
	log     zerolog.Logger
	stderr  io.Writer
	outMu   sync.Mutex // serializes Log lines on stderr
	started time.Time

	mu     sync.Mutex
	closed bool              // guarded by mu
	seq    int               // next job sequence number; guarded by mu
	jobs   map[string]*job   // by namespace; guarded by mu
	order  []string          // namespaces in creation order; guarded by mu
	fences map[string]*fence // pending and failed collectives; guarded by mu
	conns  map[jobPair]int   // Connects not yet undone, per pair of jobs; guarded by mu

	events  events         // clients' events for AwaitEvents; guarded by mu
	names   *names.Service // the run's published names (its own lock)
	changed wake.Cond      // woken on every change waiters watch
	crew    *crew.Crew     // the fences' calls beyond the run (joinBeyond)
}

// job is the universe's record of one job.
type job struct {
	layout     plugin.Job
	nodeIndex  map[int32]int           // node ID -> index in layout.Nodes
	rankNode   []int32                 // rank -> node ID
	configured map[int32]bool          // node IDs whose shim called Configure
	procs      []procInfo              // by rank
	modex      map[int32]*contribution // node ID -> its fence data so far
	state      string                  // running, finished, aborted, failed
	eventsFrom uint64                  // the clients' events kept before the job was made: not its to hear
	detail     string                  // why it is not running
	abort      *AbortEvent
}

// procInfo is one row of the proc table.
type procInfo struct {
	pid   int
	state string // pending, started, connected, finalized, terminated, exited(...), failed
}

// contribution is everything a node gave to the job's fences, in order.
// A host sends each fence the puts made since the previous one, so a
// direct modex must see them all; later records override earlier ones
// when the host parses the concatenation. The chunks are never modified.
type contribution struct {
	chunks [][]byte
	size   int
}

// Job states reported by the job-status query.
const (
	jobRunning  = "running"
	jobFinished = "finished"
	jobAborted  = "aborted"
	jobFailed   = "failed"
)

// NewUniverse returns an empty universe.
func NewUniverse(opts UniverseOptions) *Universe {
	if opts.Prefix == "" {
		opts.Prefix = "gopmi." + strconv.Itoa(os.Getpid())
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
		if opts.Hostname == "" {
			opts.Hostname = "localhost"
		}
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.FenceTimeout <= 0 {
		opts.FenceTimeout = plugin.DefaultFenceTimeout
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	u := &Universe{
		opts:    opts,
		log:     opts.Logger,
		stderr:  opts.Stderr,
		started: time.Now(),
		jobs:    make(map[string]*job),
		fences:  make(map[string]*fence),
		conns:   make(map[jobPair]int),
		crew:    crew.New(nil),
	}
	u.names = names.New(names.Options{Host: u.name(), Changes: &u.changed})
	if u.stderr == nil {
		u.stderr = os.Stderr
	}
	return u
}

var _ plugin.Full = (*Universe)(nil)

// broadcast wakes every waiter of the universe (fences, lookups, direct
// modex). Called with mu held.
func (u *Universe) broadcast() {
	u.changed.Broadcast()
}

// GetInfo names the backend "local" and lists what it implements.
func (u *Universe) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	caps := []string{plugin.CapPublish, plugin.CapConnect, plugin.CapQuery, plugin.CapLog, plugin.CapNotify, plugin.CapEvents, plugin.CapDepart}
	if u.opts.Launch != nil {
		caps = append(caps, plugin.CapSpawn)
	}
	return &plugin.BackendInfo{
		Name:         "local",
		Version:      u.opts.Version,
		APIVersions:  []string{plugin.APIVersion1, plugin.APIVersion11, plugin.APIVersion12, plugin.APIVersion13},
		Capabilities: caps,
	}, nil
}

// Depart answers at once: every node's fence parts are the universe's
// from the call that gave them (Fence keeps each node's Data for
// DirectModex), and the universe lives until its run ends. A job it does
// not know is ErrNotFound.
func (u *Universe) Depart(_ context.Context, req *plugin.DepartRequest) error {
	if len(req.Procs) == 0 {
		return plugin.Errorf(plugin.ErrInvalidArgument, "depart of node %s: no processes", req.Node)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.jobs[req.Procs[0].Nspace] == nil {
		return plugin.Errorf(plugin.ErrNotFound, "depart of node %s: job %q is unknown", req.Node, req.Procs[0].Nspace)
	}
	return nil
}

// NewJob allocates the next job id, lays the apps out on simulated nodes
// and registers the job, so that its shims' Configure calls find it and a
// fence time-out can name nodes whose shim never came up.
func (u *Universe) NewJob(apps []AppSpec, parent string, spawned bool, preput []plugin.Info) (*JobSpec, error) {
	var size int32
	for i, a := range apps {
		if a.Procs < 1 {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "new job: app %d has %d processes", i, a.Procs)
		}
		size += a.Procs
	}
	if size == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "new job: no apps")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, plugin.Errorf(plugin.ErrAborted, "new job: the run is ending")
	}
	ns := u.opts.Prefix + "." + strconv.Itoa(u.seq)
	u.seq++
	spec := &JobSpec{
		Job:     Layout(ns, apps, u.opts.PPN, u.opts.Hostname, u.opts.UniverseSize),
		Apps:    apps,
		Preput:  preput,
		Spawned: spawned,
	}
	spec.Job.Parent = parent
	u.addJob(spec.Job)
	return spec, nil
}

// addJob registers a layout. Called with mu held; the layout is valid.
func (u *Universe) addJob(layout plugin.Job) *job {
	j := &job{
		layout:     layout,
		nodeIndex:  make(map[int32]int, len(layout.Nodes)),
		rankNode:   make([]int32, layout.Size),
		configured: make(map[int32]bool),
		procs:      make([]procInfo, layout.Size),
		modex:      make(map[int32]*contribution),
		state:      jobRunning,
		eventsFrom: u.events.next,
	}
	for i, n := range layout.Nodes {
		j.nodeIndex[n.ID] = i
		for _, r := range n.Ranks {
			j.rankNode[r] = n.ID
		}
	}
	for i := range j.procs {
		j.procs[i].state = "pending"
	}
	u.jobs[layout.Nspace] = j
	u.order = append(u.order, layout.Nspace)
	return j
}

// relayout gives a registered job the layout its resource manager chose,
// keeping its parent and apps when the new layout does not say.
func (j *job) relayout(layout plugin.Job) {
	if layout.Parent == "" {
		layout.Parent = j.layout.Parent
	}
	if len(layout.Apps) == 0 {
		layout.Apps = j.layout.Apps
	}
	j.layout = layout
	j.nodeIndex = make(map[int32]int, len(layout.Nodes))
	for i, n := range layout.Nodes {
		j.nodeIndex[n.ID] = i
		for _, r := range n.Ranks {
			j.rankNode[r] = n.ID
		}
	}
}

// Configured reports whether every node of the job called Configure, and
// how many nodes it has; a launcher whose resource manager places the
// ranks (LayoutByRM) waits for it to know that the job started.
func (u *Universe) Configured(nspace string) (all bool, nodes int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	j := u.jobs[nspace]
	if j == nil {
		return false, 0
	}
	return len(j.configured) == len(j.layout.Nodes), len(j.layout.Nodes)
}

// sameLayout reports how two layouts of one job differ, or "".
func sameLayout(a, b plugin.Job) string {
	if a.Size != b.Size {
		return fmt.Sprintf("size %d, registered %d", b.Size, a.Size)
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("%d nodes, registered %d", len(b.Nodes), len(a.Nodes))
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.ID != y.ID || x.Name != y.Name || !slices.Equal(x.Ranks, y.Ranks) {
			return fmt.Sprintf("node %d is %s %v, registered %s %v", i, y.Name, y.Ranks, x.Name, x.Ranks)
		}
	}
	return ""
}

// Configure registers the calling shim's job and node. Several nodes of
// one job configure the same layout; a layout that differs from the one
// registered (by NewJob or an earlier Configure) is refused.
func (u *Universe) Configure(_ context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	if req.APIVersion != "" && req.APIVersion != plugin.APIVersion1 {
		return nil, plugin.Errorf(plugin.ErrNotSupported, "configure: api version %q (gopmi-rm-local speaks %s)", req.APIVersion, plugin.APIVersion1)
	}
	if err := req.Job.Validate(); err != nil {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "configure: job %s: %v", req.Job.Nspace, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, plugin.Errorf(plugin.ErrAborted, "configure: job %s: the run is ending", req.Job.Nspace)
	}
	j := u.jobs[req.Job.Nspace]
	switch {
	case j == nil:
		j = u.addJob(req.Job)
	case u.opts.LayoutByRM && len(j.configured) == 0 && j.layout.Size == req.Job.Size && req.Job.NodeIndex(req.NodeID) >= 0:
		// The resource manager placed the ranks: its layout replaces the
		// provisional one.
		j.relayout(req.Job)
	default:
		if d := sameLayout(j.layout, req.Job); d != "" {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "configure: job %s: layout differs: %s", req.Job.Nspace, d)
		}
	}
	if _, ok := j.nodeIndex[req.NodeID]; !ok {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "configure: job %s has no node id %d", req.Job.Nspace, req.NodeID)
	}
	if j.state == jobAborted || j.state == jobFailed {
		return nil, plugin.Errorf(plugin.ErrAborted, "configure: job %s %s: %s", req.Job.Nspace, j.state, j.detail)
	}
	j.configured[req.NodeID] = true
	u.log.Debug().Str("job", req.Job.Nspace).Int32("node", req.NodeID).Msg("configured")
	return &plugin.ConfigureResponse{}, nil
}

// lookupProc finds p's job and checks its rank. Called with mu held.
func (u *Universe) lookupProc(step string, p plugin.Proc) (*job, error) {
	j := u.jobs[p.Nspace]
	if j == nil {
		return nil, plugin.Errorf(plugin.ErrNotFound, "%s: no job %q", step, p.Nspace)
	}
	if p.Rank < 0 || p.Rank >= j.layout.Size {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: job %s has no rank %d", step, p.Nspace, p.Rank)
	}
	return j, nil
}

// nodeName names the node hosting rank r of j.
func (j *job) nodeName(r int32) string {
	return j.layout.Nodes[j.nodeIndex[j.rankNode[r]]].Name
}

// EndJob records that every task of a job ended; failure, when not empty,
// says why the job failed. Pending fences of the job fail, names it
// published with PersistApp or PersistProc are dropped.
func (u *Universe) EndJob(nspace, failure string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	j := u.jobs[nspace]
	if j == nil {
		return
	}
	if j.state == jobRunning {
		j.state, j.detail = jobFinished, ""
		if failure != "" {
			j.state, j.detail = jobFailed, failure
		}
	}
	u.failFences(nspace, plugin.Errorf(plugin.ErrAborted, "job %s ended", nspace))
	u.names.Drop(func(n *names.Name) bool {
		return n.Publisher.Nspace == nspace && (n.Persist == plugin.PersistApp || n.Persist == plugin.PersistProc)
	})
	u.broadcast()
}

// Close fails every pending wait; later calls that would wait fail with
// ErrAborted. The launcher closes the universe when the run ends.
func (u *Universe) Close() {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return
	}
	u.closed = true
	for key, f := range u.fences {
		f.fail(plugin.Errorf(plugin.ErrAborted, "fence %s: the run is ending", f.id))
		delete(u.fences, key)
	}
	u.broadcast()
	u.events.changed.Broadcast()
	u.mu.Unlock()
	// The fences' calls beyond the run end with its context; they are
	// waited for.
	u.crew.Close()
}

// Abort records an abort request and fails the pending fences, lookups
// and direct modex requests of the jobs concerned with ErrAborted. The
// launcher (OnAbort) ends the processes; Abort itself returns at once.
func (u *Universe) Abort(_ context.Context, req *plugin.AbortRequest) error {
	u.mu.Lock()
	j, err := u.lookupProc("abort", req.Proc)
	if err != nil {
		u.mu.Unlock()
		return err
	}
	ev := AbortEvent{Proc: req.Proc, Status: req.Status, Message: req.Message, Targets: slices.Clone(req.Targets)}
	jobs := map[string]*job{req.Proc.Nspace: j}
	for _, t := range req.Targets {
		if tj := u.jobs[t.Nspace]; tj != nil {
			jobs[t.Nspace] = tj
		}
	}
	for ns, tj := range jobs {
		if tj.abort == nil {
			tj.abort = &ev
		}
		if tj.state == jobRunning {
			tj.state = jobAborted
			tj.detail = fmt.Sprintf("rank %d of job %s aborted with status %d: %s", req.Proc.Rank, req.Proc.Nspace, req.Status, req.Message)
		}
		u.failFences(ns, plugin.Errorf(plugin.ErrAborted, "job %s aborted by %s: %s", ns, req.Proc, req.Message))
	}
	j.procs[req.Proc.Rank].state = "aborted"
	u.broadcast()
	u.mu.Unlock()
	u.log.Debug().Str("proc", req.Proc.String()).Int32("status", req.Status).Str("msg", req.Message).Msg("abort")
	if u.opts.OnAbort != nil {
		u.opts.OnAbort(ev)
	}
	return nil
}

// jobGone returns why waits on behalf of ns must stop, or nil. Called with
// mu held.
func (u *Universe) jobGone(step, ns string) error {
	if u.closed {
		return plugin.Errorf(plugin.ErrAborted, "%s: the run is ending", step)
	}
	j := u.jobs[ns]
	if j == nil {
		return nil
	}
	switch j.state {
	case jobAborted, jobFailed:
		return plugin.Errorf(plugin.ErrAborted, "%s: job %s %s: %s", step, ns, j.state, j.detail)
	}
	return nil
}

// waitChange blocks until the universe changes, the timer fires or ctx
// ends. It returns false on the latter two.
func waitChange(ctx context.Context, ch <-chan struct{}, timer <-chan time.Time) (changed bool, err error) {
	select {
	case <-ch:
		return true, nil
	case <-timer:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
