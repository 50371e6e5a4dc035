package plugintest_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// universe is a small reference backend: the state every node shares,
// as a daemon-style backend would keep it. It exists to test the
// conformance suite; faults switch on deliberate bugs the suite must catch.
type universe struct {
	faults faults

	mu      sync.Mutex
	changed chan struct{}          // closed and replaced on every change; guarded by mu
	fences  map[string]*fence      // by nspace + "/" + id; guarded by mu
	modex   map[plugin.Proc][]byte // latest fence data by rank; guarded by mu
	names   []*pubName             // guarded by mu
	jobs    map[string]plugin.Job  // configured jobs by namespace; guarded by mu
	conns   map[string]int         // Connects not undone, by sorted namespaces; guarded by mu
	aborted map[string]error       // why each aborted job ended; guarded by mu
}

type faults struct {
	fenceOwnDataOnly     bool // a collecting fence returns only the caller's data
	fenceTimeoutUntyped  bool // a fence time-out is not plugin.ErrTimeout
	advertiseUnsupported bool // advertises "spawn" but does not implement it
	ignoreCancel         bool // a fence waits out its Timeout even if ctx ends
	connectAnyJob        bool // Connect accepts jobs it never heard of
	barrierAtOnce        bool // a fence without Collect returns at once
	vagueTimeout         bool // a fence time-out names nobody
	ignoreTimeout        bool // a fence waits until its context ends
	lateArrivalWaits     bool // a node arriving after the time-out waits anew
	fenceByIDOnly        bool // fences of two jobs with one ID are one fence
	abortKeepsWaits      bool // Abort leaves the job's fences waiting
	lookupNotFoundOnWait bool // a waiting lookup that times out says not found
	modexIgnoresTimeout  bool // a direct modex waits until its context ends
	modexWildcardNothing bool // a direct modex of a whole job returns no data
	modexUnknownWaits    bool // a direct modex of an unknown job waits
	ignoresInfo          bool // unknown info directives are ignored
	firstReadKept        bool // a PersistFirstRead name outlives its first read
	rangeIgnored         bool // a RangeNamespace name is seen by every job
	unpublishAllNoop     bool // an Unpublish without keys removes nothing
	zeroTimeoutExpires   bool // a zero Timeout expires at once
	abortForgotten       bool // calls after an Abort wait as if it never happened
}

// timeoutOf is a request's time-out: zero is the contract's default.
func (u *universe) timeoutOf(t, def time.Duration) time.Duration {
	if t == 0 && !u.faults.zeroTimeoutExpires {
		return def
	}
	return t
}

// pubName is one published name.
type pubName struct {
	plugin.Published
	rng     plugin.Range
	persist plugin.Persistence
}

// visible says whether p may see n.
func (u *universe) visible(n *pubName, p plugin.Proc) bool {
	return n.rng != plugin.RangeNamespace || u.faults.rangeIgnored || n.Publisher.Nspace == p.Nspace
}

// findLocked returns the name key that p may see, or -1. Called with mu
// held.
func (u *universe) findLocked(key string, p plugin.Proc) int {
	return slices.IndexFunc(u.names, func(n *pubName) bool { return n.Key == key && u.visible(n, p) })
}

// refuseInfo refuses the first directive: this backend knows none.
func (u *universe) refuseInfo(step string, info []plugin.Info) error {
	if len(info) == 0 || u.faults.ignoresInfo {
		return nil
	}
	return fmt.Errorf("%s: info key %q: %w", step, info[0].Key, plugin.ErrNotSupported)
}

type fence struct {
	nspace   string
	data     map[int32][]byte // by node id
	done     chan struct{}    // closed when the fence completed or failed
	err      error            // why it failed; set before done closes
	nodes    []plugin.Node    // nodes expected
	deadline time.Time        // the first arrival plus its Timeout
	collect  bool
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// failLocked ends f with err. Called with mu held.
func (u *universe) failLocked(f *fence, err error) {
	select {
	case <-f.done:
		return
	default:
	}
	f.err = err
	close(f.done)
	u.notifyLocked()
}

func newUniverse(f faults) *universe {
	return &universe{
		aborted: map[string]error{},
		faults:  f,
		changed: make(chan struct{}),
		fences:  map[string]*fence{},
		modex:   map[plugin.Proc][]byte{},
		jobs:    map[string]plugin.Job{},
		conns:   map[string]int{},
	}
}

// node is one shim's view of the universe. It keeps no state of its own:
// every call names its job and node, so one node can serve every node of
// every job, as a daemon does.
type node struct {
	plugin.Unimplemented
	u *universe
}

func (u *universe) node() *node { return &node{u: u} }

func (u *universe) notifyLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

func (n *node) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	info := &plugin.BackendInfo{
		Name: "mem", Version: "test", APIVersions: []string{plugin.APIVersion1},
		Capabilities: []string{plugin.CapPublish, plugin.CapConnect},
	}
	if n.u.faults.advertiseUnsupported {
		info.Capabilities = append(info.Capabilities, plugin.CapSpawn)
	}
	return info, nil
}

func (n *node) Configure(_ context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	if req.APIVersion != plugin.APIVersion1 {
		return nil, fmt.Errorf("configure: api version %q: %w", req.APIVersion, plugin.ErrNotSupported)
	}
	n.u.mu.Lock()
	n.u.jobs[req.Job.Nspace] = req.Job
	n.u.mu.Unlock()
	return &plugin.ConfigureResponse{}, nil
}

// Abort fails the waits of the caller's job, as the contract asks.
func (n *node) Abort(_ context.Context, req *plugin.AbortRequest) error {
	u := n.u
	if u.faults.abortKeepsWaits {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	why := fmt.Errorf("job %s aborted by rank %d: %w", req.Proc.Nspace, req.Proc.Rank, plugin.ErrAborted)
	if !u.faults.abortForgotten {
		u.aborted[req.Proc.Nspace] = why
	}
	for key, f := range u.fences {
		if f.nspace == req.Proc.Nspace {
			u.failLocked(f, fmt.Errorf("fence %s: %w", key, why))
		}
	}
	u.notifyLocked()
	return nil
}

// layout finds a fence's job and the caller's node from the request
// alone, so that one instance can serve every node, as a daemon does.
func (u *universe) layout(req *plugin.FenceRequest) (plugin.Job, int32, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(req.Procs) == 0 {
		return plugin.Job{}, 0, fmt.Errorf("fence %s: no procs: %w", req.ID, plugin.ErrInvalidArgument)
	}
	job, ok := u.jobs[req.Procs[0].Nspace]
	if !ok {
		return plugin.Job{}, 0, fmt.Errorf("fence %s: job %s not configured: %w", req.ID, req.Procs[0].Nspace, plugin.ErrNotFound)
	}
	for _, nd := range job.Nodes {
		if nd.Name == req.Node {
			return job, nd.ID, nil
		}
	}
	return plugin.Job{}, 0, fmt.Errorf("fence %s: job %s has no node %q: %w", req.ID, job.Nspace, req.Node, plugin.ErrInvalidArgument)
}

func (n *node) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	u := n.u
	job, id, err := u.layout(req)
	if err != nil {
		return nil, err
	}
	key := job.Nspace + "/" + req.ID
	if u.faults.fenceByIDOnly {
		key = req.ID
	}
	timeout := u.timeoutOf(req.Timeout, plugin.DefaultFenceTimeout)
	u.mu.Lock()
	if why := u.aborted[job.Nspace]; why != nil {
		u.mu.Unlock()
		return nil, fmt.Errorf("fence %s: %w", req.ID, why)
	}
	f := u.fences[key]
	if f != nil && f.err != nil && u.faults.lateArrivalWaits {
		f = nil // start over
	}
	if f != nil && u.faults.fenceByIDOnly && closed(f.done) && f.err == nil {
		f = nil // the fence of the same ID before, maybe of another job
	}
	if f == nil {
		f = &fence{nspace: job.Nspace, data: map[int32][]byte{}, done: make(chan struct{}), nodes: job.Nodes, collect: req.Collect,
			deadline: time.Now().Add(timeout)}
		u.fences[key] = f
	}
	f.data[id] = bytes.Clone(req.Data)
	if len(f.data) == len(f.nodes) && !closed(f.done) {
		for _, nd := range f.nodes {
			for _, r := range nd.Ranks {
				u.modex[plugin.Proc{Nspace: job.Nspace, Rank: r}] = f.data[nd.ID]
			}
		}
		close(f.done)
		u.notifyLocked()
	}
	u.mu.Unlock()
	if !req.Collect && u.faults.barrierAtOnce {
		return &plugin.FenceResponse{}, nil
	}

	var expired <-chan time.Time
	if !u.faults.ignoreTimeout {
		t := time.NewTimer(time.Until(f.deadline))
		defer t.Stop()
		expired = t.C
	}
	cancelled := ctx.Done()
	if u.faults.ignoreCancel {
		cancelled = nil
	}
	select {
	case <-f.done:
	case <-cancelled:
		return nil, fmt.Errorf("fence %s: %w", req.ID, ctx.Err())
	case <-expired:
		u.mu.Lock()
		var missing []string
		for _, nd := range f.nodes {
			if _, ok := f.data[nd.ID]; !ok {
				missing = append(missing, plugin.RankList(nd.Ranks)+" (node "+nd.Name+")")
			}
		}
		var err error
		switch {
		case u.faults.fenceTimeoutUntyped:
			err = fmt.Errorf("fence %s: gave up", req.ID)
		case u.faults.vagueTimeout:
			err = fmt.Errorf("fence %s of job %s: %w", req.ID, job.Nspace, plugin.ErrTimeout)
		default:
			err = fmt.Errorf("fence %s of job %s: %s did not arrive in %s: %w", req.ID, job.Nspace, strings.Join(missing, ", "), timeout, plugin.ErrTimeout)
		}
		u.failLocked(f, err)
		u.mu.Unlock()
	}
	if f.err != nil {
		return nil, f.err
	}
	if !req.Collect {
		return &plugin.FenceResponse{}, nil
	}
	if u.faults.fenceOwnDataOnly {
		return &plugin.FenceResponse{Data: bytes.Clone(req.Data)}, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []byte
	for _, nd := range f.nodes {
		out = append(out, f.data[nd.ID]...)
	}
	return &plugin.FenceResponse{Data: out}, nil
}

// wait blocks until cond holds (checked under mu) or the time-out passes
// or ctx ends; it returns whether cond held. A time-out of zero or less
// has passed already: cond is checked once.
func (u *universe) wait(ctx context.Context, timeout time.Duration, cond func() bool) (bool, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	deadline := t.C
	for {
		u.mu.Lock()
		ok := cond()
		ch := u.changed
		u.mu.Unlock()
		if ok {
			return true, nil
		}
		select {
		case <-ch:
		case <-deadline:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

func (n *node) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	u := n.u
	u.mu.Lock()
	job, known := u.jobs[req.Proc.Nspace]
	u.mu.Unlock()
	if !known && !u.faults.modexUnknownWaits {
		return nil, fmt.Errorf("direct modex of %s: no job %q: %w", req.Proc, req.Proc.Nspace, plugin.ErrNotFound)
	}
	// The ranks whose node's data is asked for: one rank's node, or for
	// the whole job every node but the requestor's own.
	var want []plugin.Node
	for _, nd := range job.Nodes {
		mine := req.Requestor.Nspace == req.Proc.Nspace && slices.Contains(nd.Ranks, req.Requestor.Rank)
		if (req.Proc.Rank == plugin.RankWildcard && !mine) || slices.Contains(nd.Ranks, req.Proc.Rank) {
			want = append(want, nd)
		}
	}
	var data []byte
	timeout := u.timeoutOf(req.Timeout, plugin.DefaultFenceTimeout)
	if u.faults.modexIgnoresTimeout {
		timeout = time.Hour
	}
	var why error
	ok, err := u.wait(ctx, timeout, func() bool {
		if why = u.aborted[req.Proc.Nspace]; why != nil {
			return true
		}
		data = data[:0]
		for _, nd := range want {
			d, ok := u.modex[plugin.Proc{Nspace: req.Proc.Nspace, Rank: nd.Ranks[0]}]
			if !ok {
				return false
			}
			data = append(data, d...)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("direct modex of %s: %w", req.Proc, err)
	}
	if why != nil {
		return nil, fmt.Errorf("direct modex of %s: %w", req.Proc, why)
	}
	if !ok {
		var names []string
		for _, nd := range want {
			names = append(names, "node "+nd.Name)
		}
		return nil, fmt.Errorf("direct modex of %s: %s contributed no data in %s: %w", req.Proc, strings.Join(names, ", "), timeout, plugin.ErrTimeout)
	}
	if req.Proc.Rank == plugin.RankWildcard && u.faults.modexWildcardNothing {
		data = nil
	}
	return &plugin.ModexResponse{Data: slices.Clone(data)}, nil
}

func (n *node) Publish(_ context.Context, req *plugin.PublishRequest) error {
	u := n.u
	if err := u.refuseInfo("publish", req.Info); err != nil {
		return err
	}
	switch req.Persistence {
	case plugin.PersistDefault, plugin.PersistIndefinite, plugin.PersistFirstRead, plugin.PersistSession:
	default:
		return fmt.Errorf("publish: persistence %d: %w", req.Persistence, plugin.ErrNotSupported)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, d := range req.Data {
		add := &pubName{Published: plugin.Published{Key: d.Key, Value: d.Value, Publisher: req.Proc}, rng: req.Range, persist: req.Persistence}
		for _, o := range u.names {
			if o.Key == d.Key && (u.visible(o, req.Proc) || u.visible(add, o.Publisher)) {
				return fmt.Errorf("publish %s: published by %s: %w", d.Key, o.Publisher, plugin.ErrAlreadyExists)
			}
		}
	}
	for _, d := range req.Data {
		u.names = append(u.names, &pubName{Published: plugin.Published{Key: d.Key, Value: d.Value, Publisher: req.Proc}, rng: req.Range, persist: req.Persistence})
	}
	u.notifyLocked()
	return nil
}

func (n *node) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	u := n.u
	if err := u.refuseInfo("lookup", req.Info); err != nil {
		return nil, err
	}
	var found []plugin.Published
	find := func() bool {
		found = found[:0]
		for _, k := range req.Keys {
			if i := u.findLocked(k, req.Proc); i >= 0 {
				found = append(found, u.names[i].Published)
			}
		}
		return len(found) == len(req.Keys)
	}
	if req.Wait {
		ok, err := u.wait(ctx, u.timeoutOf(req.Timeout, plugin.DefaultLookupTimeout), find)
		if err != nil {
			return nil, fmt.Errorf("lookup %s: %w", strings.Join(req.Keys, ","), err)
		}
		if !ok && !u.faults.lookupNotFoundOnWait {
			return nil, fmt.Errorf("lookup %s: not published within %s: %w", strings.Join(req.Keys, ","), req.Timeout, plugin.ErrTimeout)
		}
	} else {
		u.mu.Lock()
		find()
		u.mu.Unlock()
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("lookup %s: %w", strings.Join(req.Keys, ","), plugin.ErrNotFound)
	}
	if !u.faults.firstReadKept {
		u.mu.Lock()
		u.names = slices.DeleteFunc(u.names, func(n *pubName) bool {
			return n.persist == plugin.PersistFirstRead && slices.ContainsFunc(found, func(p plugin.Published) bool { return p == n.Published })
		})
		u.mu.Unlock()
	}
	return &plugin.LookupResponse{Data: slices.Clone(found)}, nil
}

func (n *node) Unpublish(_ context.Context, req *plugin.UnpublishRequest) error {
	u := n.u
	if err := u.refuseInfo("unpublish", req.Info); err != nil {
		return err
	}
	if len(req.Keys) == 0 && u.faults.unpublishAllNoop {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.names = slices.DeleteFunc(u.names, func(n *pubName) bool {
		return n.Publisher == req.Proc && (len(req.Keys) == 0 || slices.Contains(req.Keys, n.Key))
	})
	u.notifyLocked()
	return nil
}

// connection returns the sorted namespaces of procs as a key; two jobs at
// least.
func connection(procs []plugin.Proc) (string, error) {
	var nss []string
	for _, p := range procs {
		nss = append(nss, p.Nspace)
	}
	slices.Sort(nss)
	nss = slices.Compact(nss)
	if len(nss) < 2 {
		return "", fmt.Errorf("connect: %d jobs: %w", len(nss), plugin.ErrInvalidArgument)
	}
	return strings.Join(nss, ","), nil
}

func (n *node) Connect(_ context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	key, err := connection(req.Procs)
	if err != nil {
		return nil, err
	}
	u := n.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range req.Procs {
		if _, known := u.jobs[p.Nspace]; !known && !u.faults.connectAnyJob {
			return nil, fmt.Errorf("connect %s: no job %s: %w", key, p.Nspace, plugin.ErrNotFound)
		}
	}
	u.conns[key]++
	return &plugin.ConnectResponse{ID: key}, nil
}

func (n *node) Disconnect(_ context.Context, req *plugin.DisconnectRequest) error {
	key, err := connection(req.Procs)
	if err != nil {
		return err
	}
	u := n.u
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conns[key] == 0 {
		return fmt.Errorf("disconnect %s: not connected: %w", key, plugin.ErrNotFound)
	}
	u.conns[key]--
	return nil
}
