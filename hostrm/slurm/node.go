package slurm

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/internal/overlay"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// The environment a node's gopmi-rm-slurm reads. srun's mpi/gopmi plugin
// puts them in the step's environment; each stepd's plugin passes them to
// its gopmi-shim, whose backend inherits them.
const (
	// EnvCoordinator is the coordinator's "host:port".
	EnvCoordinator = "GOPMI_SLURM_COORD"
	// EnvSecret is the step secret.
	EnvSecret = "GOPMI_SLURM_SECRET"
)

// Node is the backend of a node of a step: in gopmi-slurm shim's own
// process under srun (NodeFromArgs), or gopmi-rm-slurm as a go-plugin
// process. It is a plugin.Relay that links to the node's parent in the
// fence tree (the nodes at its top to the step's coordinator), proves the
// step secret and forwards every call there; in a job on several nodes it
// keeps its own fence data and serves it to the nodes that read it, and
// exchanges a small job's collecting fences with the other nodes
// (exchange.go). Fence maps each fence onto one of those ways.
type Node struct {
	*plugin.Relay
	cfg nodeConfig
	// ov is the node's links: up the tree (its parent, past it an
	// ancestor or the coordinator) and its listener.
	ov *overlay.Overlay

	cfgMu sync.Mutex // one Configure at a time: one tree
	mu    sync.Mutex
	tree  *tree // set by Configure for a job on several nodes
}

// nodeConfig is what a Node is made with: its arguments, environment and
// options.
type nodeConfig struct {
	width  int
	secret string
	log    *zerolog.Logger // nil: the logger of Configure's context
	clock  crew.Clock      // the fence tree's; nil: the wall clock
	// drainAtFinalize: this node's ranks get a fence's answer at once,
	// and their finalize waits for the children's answers to leave
	// (DrainBeforeFinalize) instead of every fence's answer.
	drainAtFinalize bool
	noExchange      bool              // WithoutExchange
	ports           overlay.PortRange // where the nodes of a step listen for their children
	// ancestorWait is how long the node tries an ancestor before the
	// next one up (0: the overlay's default).
	ancestorWait time.Duration
}

// NodeOption configures a Node.
type NodeOption func(*Node)

// WithLogger sets the node's logger: the fence tree writes to it what no
// caller hears of (a child that sent nothing by half a fence's time-out,
// a child lost in the middle of one, a failed subtree server, a
// connection that did not prove the step secret). Without it the node
// logs through the logger of Configure's context, which go-plugin's
// Serve (grpcplugin) sets to the plugin's stderr, relayed by the shim;
// a node served inside its shim (gopmi-slurm shim) passes the shim's.
func WithLogger(l zerolog.Logger) NodeOption {
	return func(n *Node) { n.cfg.log = &l }
}

// WithFinalizeDrain moves the wait that keeps a node with children alive
// until its children's answers left it from every fence to the finalize
// of its ranks (DrainBeforeFinalize, which a host in the node's process
// calls before it answers a finalize: the bridge and the PMIx face do).
// A fence then costs no wait: a rank that finalizes, waits for the
// answer and then exits (MPICH, Open MPI, libpmi2 all do) cannot end the
// node's process (its stepd kills it once the ranks exited) under a
// child's answer; one that exits after its last fence without finalize
// can. Without it (a backend in its own process, whose host cannot call
// DrainBeforeFinalize) every fence's answer to the node's own ranks
// waits.
func WithFinalizeDrain() NodeOption {
	return func(n *Node) { n.cfg.drainAtFinalize = true }
}

// WithoutExchange makes every collecting fence go up the fence tree with
// its data, also on at most width nodes, where the nodes would exchange
// their parts (exchange.go), and makes no link to another node before a
// read: package slurmtest, which runs and models the tree, runs its nodes so.
func WithoutExchange() NodeOption {
	return func(n *Node) { n.cfg.noExchange = true }
}

// WithSecret sets the step secret instead of GOPMI_SLURM_SECRET's
// (package slurmtest runs many steps in one process).
func WithSecret(secret string) NodeOption {
	return func(n *Node) { n.cfg.secret = secret }
}

// withAncestorWait sets how long the node tries an ancestor before the
// next one up (tests).
func withAncestorWait(d time.Duration) NodeOption {
	return func(n *Node) { n.cfg.ancestorWait = d }
}

// NewNode returns the backend of a node process, which reads the
// coordinator's address from its -coordinator argument or
// GOPMI_SLURM_COORD, and the secret from GOPMI_SLURM_SECRET.
func NewNode(opts ...NodeOption) *Node {
	return newNode(os.Args[1:], os.Getenv, opts...)
}

// NodeFromArgs is NewNode with the arguments given, as the bootstrap's
// backend spec has them: the node's backend served inside the shim's own
// process (gopmi-slurm shim).
func NodeFromArgs(args []string, opts ...NodeOption) *Node {
	return newNode(args, os.Getenv, opts...)
}

func newNode(args []string, getenv func(string) string, opts ...NodeOption) *Node {
	fs := flag.NewFlagSet("gopmi-rm-slurm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("coordinator", "", "")
	width := fs.Int("tree-width", DefaultTreeWidth, "")
	ports := fs.String("tree-ports", "", "")
	if fs.Parse(args) != nil || *addr == "" {
		*addr = getenv(EnvCoordinator)
	}
	if *width < 1 {
		*width = DefaultTreeWidth
	}
	secret := getenv(EnvSecret)
	n := &Node{cfg: nodeConfig{width: *width, secret: secret, ports: overlay.ParsePorts(*ports)}}
	for _, o := range opts {
		o(n)
	}
	n.ov = overlay.New(overlay.Config{Secret: n.cfg.secret, Ports: n.cfg.ports, AncestorWait: n.cfg.ancestorWait,
		Root: func(ctx context.Context) (*direct.Conn, error) {
			c, err := direct.Dial(ctx, *addr, direct.WithDialer(AuthDialer(n.cfg.secret)))
			if err != nil {
				return nil, plugin.Wrapf(err, plugin.ErrUnavailable, "gopmi-rm-slurm: coordinator %s", *addr)
			}
			return c, nil
		}})
	n.Relay = plugin.NewRelay(func(ctx context.Context) (plugin.Full, io.Closer, error) {
		switch {
		case *addr == "":
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-slurm: no coordinator address (-coordinator or %s): it runs under srun --mpi=gopmi", EnvCoordinator)
		case n.cfg.secret == "":
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-slurm: no step secret in %s", EnvSecret)
		}
		c, err := n.ov.Dial(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c.Backend(), c, nil
	})
	n.ov.SetRelay(n.Relay)
	resolve := n.Relay.Resolve
	n.Relay.Resolve = func(ctx context.Context, call string) (plugin.Full, error) {
		n.ov.Relink()
		return resolve(ctx, call)
	}
	return n
}

// Configure forwards the job's layout to the coordinator. For a job on
// several nodes the node first takes its place in the fence tree: a node
// with children listens for them, and every call of a node goes up
// through its parent (tree.go), so that the coordinator hears only the
// nodes at the top of the tree.
func (n *Node) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	n.cfgMu.Lock()
	defer n.cfgMu.Unlock()
	if len(req.Job.Nodes) < 2 {
		return n.Relay.Configure(ctx, req)
	}
	t := n.placed()
	if t == nil {
		log := zerolog.Ctx(ctx)
		if n.cfg.log != nil {
			log = n.cfg.log
		}
		self := req.Job.NodeIndex(req.NodeID)
		if self < 0 {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "configure: node %d is not in job %s's layout", req.NodeID, req.Job.Nspace)
		}
		t = newTree(treeConfig{width: n.cfg.width, job: req.Job, self: self, toRoot: n.Relay, ov: n.ov,
			secret: n.cfg.secret, log: *log, clock: n.cfg.clock, exchange: !n.cfg.noExchange})
		// Placed before it serves: its wait for the job's news, or
		// a child's call, may dial up at once, and must go to the
		// parent.
		n.ov.Place(t.Place, t.crew, t.log)
		n.mu.Lock()
		n.tree = t
		n.mu.Unlock()
		if err := t.serve(ctx); err != nil {
			n.ov.Leave()
			n.mu.Lock()
			n.tree = nil
			n.mu.Unlock()
			t.close()
			return nil, err
		}
	}
	// The coordinator reads the job's data from its nodes for readers
	// outside the job: it learns their port range here.
	fwd := *req
	fwd.Config, _ = json.Marshal(NodeConfig{TreePorts: n.cfg.ports.String()})
	return n.Relay.Configure(ctx, &fwd)
}

// placed is the node's place in its job's fence tree, nil before
// Configure (or for a job on one node).
func (n *Node) placed() *tree {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tree
}

// Fence goes up the fence tree once Configure placed this node in it.
func (n *Node) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	t := n.placed()
	if t == nil {
		return n.Relay.Fence(ctx, req)
	}
	// This node's data stays here for the nodes that read it
	// (modex.go); only a collecting fence's goes up, or to the other
	// nodes (exchange.go).
	if req.HandOver && (req.Collect || !allHere(req)) {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "fence %s: a hand-over of processes that are not all node %s's, or that collects", req.ID, t.Name())
	}
	t.data.mine.add(req.Data)
	if !req.Collect && allHere(req) {
		// The node's hand-over of its own processes' data (a PMIx
		// server's, of its clients' commits), or a fence of this node's
		// processes alone that collects nothing (a host before contract
		// 1.3 hands over so): complete once it is here, with nothing the
		// coordinator needs: a reader asks this node.
		if err := t.refusal(req.ID); err != nil {
			return nil, err
		}
		return &plugin.FenceResponse{}, nil
	}
	var resp *plugin.FenceResponse
	var err error
	if t.ex.applies(req) {
		resp, err = t.ex.run(ctx, req)
	} else {
		if !req.Collect && len(req.Data) > 0 {
			bare := *req
			bare.Data = nil
			req = &bare
		}
		resp, err = t.fence(ctx, req)
	}
	if err == nil {
		// Every node of a whole-job fence is up now: the links to
		// them can be made at once, for the job's exchanges.
		t.ex.warm(req)
		if !n.cfg.drainAtFinalize {
			t.drain.await(ctx, req.ID)
		}
	}
	return resp, err
}

// AwaitEvents answers a wait for the news of this node's job from what
// the node heard up its link (news.go), once Configure placed it in the
// fence tree; any other goes up.
func (n *Node) AwaitEvents(ctx context.Context, req *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
	t := n.placed()
	if t == nil || req.Nspace != t.Job.Nspace {
		return n.Relay.AwaitEvents(ctx, req)
	}
	return t.awaitNews(ctx, req)
}

// DirectModex reads a rank's data from the node that holds it: in a job
// on several nodes, this node's own store or a peer node's over a link
// kept for the step; else (another job's rank) through the coordinator.
func (n *Node) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	t := n.placed()
	if t == nil {
		return n.Relay.DirectModex(ctx, req)
	}
	return t.directModex(ctx, req)
}

// Depart hands the node's own data (its parts of the job's fences, which
// it serves to the nodes that read it) to the coordinator, which answers
// the reads of this node's ranks from then on: a node's gopmi-slurm ends
// with its ranks (its stepd kills it), and the job's other nodes may
// still read them. It goes up the node's link, as every call does, in
// DepartRequest.Data. A job on one node keeps nothing here: its fences'
// data is the coordinator's already.
func (n *Node) Depart(ctx context.Context, req *plugin.DepartRequest) error {
	t := n.placed()
	if t == nil {
		return n.Relay.Depart(ctx, req)
	}
	fwd := *req
	fwd.Data = t.data.mine.snapshot()
	return n.Relay.Depart(ctx, &fwd)
}

// DropReadLinks closes the links this node made to read other nodes'
// data; later reads make new ones. Package slurmtest, which runs thousands of
// nodes in one process, frees their files with it.
func (n *Node) DropReadLinks() {
	t := n.placed()
	if t != nil {
		t.data.peers.links.Drop()
	}
}

// DrainBeforeFinalize returns once no child's answer is on its way
// through this node (at most 2 s, or ctx), with WithFinalizeDrain: a
// host calls it before it answers a rank's finalize.
func (n *Node) DrainBeforeFinalize(ctx context.Context) {
	t := n.placed()
	if t != nil && n.cfg.drainAtFinalize {
		t.drain.await(ctx, "")
	}
}

// Close leaves the tree and the coordinator.
func (n *Node) Close() error {
	n.mu.Lock()
	t := n.tree
	n.tree = nil
	n.mu.Unlock()
	if t != nil {
		t.close() // ends rejoin, on the tree's crew
	}
	n.ov.Close()
	return n.Relay.Close()
}

// Info is what the Slurm backend answers GetInfo with: the coordinator's
// universe (package coord) with its spawn, under the name "slurm". A node
// answers it itself, so that a node below the tree's top asks nothing of
// the coordinator before its Configure places it in the tree.
func Info() *plugin.BackendInfo {
	return &plugin.BackendInfo{
		Name:         "slurm",
		APIVersions:  []string{plugin.APIVersion1, plugin.APIVersion11, plugin.APIVersion12, plugin.APIVersion13},
		Capabilities: []string{plugin.CapPublish, plugin.CapConnect, plugin.CapQuery, plugin.CapLog, plugin.CapNotify, plugin.CapEvents, plugin.CapSpawn, plugin.CapDepart},
	}
}

// GetInfo answers Info, without a call to the coordinator.
func (n *Node) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return Info(), nil
}

// NodeConfig is what a node tells the coordinator in its Configure's
// Config, the contract's field for a backend's own configuration, as
// JSON: keys it does not know are ignored, so either side may add one.
type NodeConfig struct {
	// TreePorts is the range the job's nodes listen in ("LOW-HIGH"):
	// the coordinator reads the nodes' data there for readers outside
	// the job.
	TreePorts string `json:"tree_ports,omitempty"`
}

// ParseNodeConfig reads a node's Configure Config; an empty one is the
// zero NodeConfig. A node older than NodeConfig (a step's nodes mid-way
// through an upgrade) sends "tree-ports=LOW-HIGH", which is read too.
func ParseNodeConfig(config []byte) (NodeConfig, error) {
	var c NodeConfig
	if len(config) == 0 {
		return c, nil
	}
	if ports, ok := strings.CutPrefix(string(config), "tree-ports="); ok {
		c.TreePorts = ports
		return c, nil
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return c, plugin.Errorf(plugin.ErrInvalidArgument, "configure: the node's config (%d bytes) is not JSON: %v", len(config), err)
	}
	return c, nil
}

// allHere reports whether every participant of req is named, not a
// whole job, and is among its LocalProcs: the part of this node only.
func allHere(req *plugin.FenceRequest) bool {
	if len(req.Procs) == 0 {
		return false
	}
	for _, p := range req.Procs {
		if p.Rank == plugin.RankWildcard || !slices.Contains(req.LocalProcs, p) {
			return false
		}
	}
	return true
}
