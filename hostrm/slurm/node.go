package slurm

import (
	"context"
	"flag"
	"io"
	"net"
	"os"
	"sync"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
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

// Node is the backend in a node's gopmi-rm-slurm: a plugin.Relay that
// dials the step's coordinator, proves the step secret and forwards every
// call. It is one process per job per node, as every gopmi backend (see
// package plugin, "Process model"); what spans nodes happens in the
// coordinator.
type Node struct {
	*plugin.Relay

	width  int
	secret string
	log    *zerolog.Logger // nil: the logger of Configure's context
	clock  clock           // the fence tree's; nil: the wall clock

	// drainAtFinalize: this node's ranks get a fence's answer at once,
	// and their finalize waits for the children's answers to leave
	// (DrainBeforeFinalize) instead of every fence's answer.
	drainAtFinalize bool

	cfgMu sync.Mutex // one Configure at a time: one tree
	mu    sync.Mutex
	host  string // this node's address towards the coordinator
	tree  *tree  // set by Configure for a job on several nodes
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
	return func(n *Node) { n.log = &l }
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
	return func(n *Node) { n.drainAtFinalize = true }
}

// WithSecret sets the step secret instead of GOPMI_SLURM_SECRET's
// (package scale runs many steps in one process).
func WithSecret(secret string) NodeOption {
	return func(n *Node) { n.secret = secret }
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
	if fs.Parse(args) != nil || *addr == "" {
		*addr = getenv(EnvCoordinator)
	}
	if *width < 1 {
		*width = DefaultTreeWidth
	}
	secret := getenv(EnvSecret)
	n := &Node{width: *width, secret: secret}
	for _, o := range opts {
		o(n)
	}
	n.Relay = plugin.NewRelay(func(ctx context.Context) (plugin.Full, io.Closer, error) {
		switch {
		case *addr == "":
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-slurm: no coordinator address (-coordinator or %s): it runs under srun --mpi=gopmi", EnvCoordinator)
		case n.secret == "":
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-slurm: no step secret in %s", EnvSecret)
		}
		dial := AuthDialer(n.secret)
		c, err := direct.Dial(ctx, *addr, direct.WithDialer(func(ctx context.Context, a string) (net.Conn, error) {
			conn, err := dial(ctx, a)
			if err == nil {
				if la, ok := conn.LocalAddr().(*net.TCPAddr); ok {
					n.mu.Lock()
					n.host = la.IP.String()
					n.mu.Unlock()
				}
			}
			return conn, err
		}))
		if err != nil {
			return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "gopmi-rm-slurm: coordinator %s", *addr)
		}
		return c.Backend(), c, nil
	})
	return n
}

// Configure forwards the job's layout to the coordinator, and for a job on
// several nodes takes this node's place in the fence tree: a node with
// children listens for them and publishes its address.
func (n *Node) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	n.cfgMu.Lock()
	defer n.cfgMu.Unlock()
	resp, err := n.Relay.Configure(ctx, req)
	if err != nil || len(req.Job.Nodes) < 2 {
		return resp, err
	}
	n.mu.Lock()
	if n.tree != nil {
		n.mu.Unlock()
		return resp, nil // Configure is idempotent
	}
	log := zerolog.Ctx(ctx)
	if n.log != nil {
		log = n.log
	}
	t := newTree(treeConfig{width: n.width, job: req.Job, self: req.Job.NodeIndex(req.NodeID), toRoot: n.Relay,
		secret: n.secret, log: *log, clock: n.clock})
	host := n.host
	n.mu.Unlock()
	if err := t.serveChildren(ctx, host); err != nil {
		t.close()
		return nil, err
	}
	n.mu.Lock()
	n.tree = t
	n.mu.Unlock()
	return resp, nil
}

// Fence goes up the fence tree once Configure placed this node in it.
func (n *Node) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	n.mu.Lock()
	t := n.tree
	n.mu.Unlock()
	if t == nil {
		return n.Relay.Fence(ctx, req)
	}
	resp, err := t.fence(ctx, req)
	if err == nil && !n.drainAtFinalize {
		t.awaitChildren(ctx, req.ID)
	}
	return resp, err
}

// DrainBeforeFinalize returns once no child's answer is on its way
// through this node (at most 2 s, or ctx), with WithFinalizeDrain: a
// host calls it before it answers a rank's finalize.
func (n *Node) DrainBeforeFinalize(ctx context.Context) {
	n.mu.Lock()
	t := n.tree
	n.mu.Unlock()
	if t != nil && n.drainAtFinalize {
		t.awaitChildren(ctx, "")
	}
}

// Close leaves the tree and the coordinator.
func (n *Node) Close() error {
	n.mu.Lock()
	t := n.tree
	n.tree = nil
	n.mu.Unlock()
	if t != nil {
		t.close()
	}
	return n.Relay.Close()
}

// GetInfo answers as the coordinator does, under the name "slurm".
func (n *Node) GetInfo(ctx context.Context) (*plugin.BackendInfo, error) {
	info, err := n.Relay.GetInfo(ctx)
	if err != nil {
		return nil, err
	}
	out := *info
	out.Name = "slurm"
	return &out, nil
}
