package slurm

import (
	"context"
	"flag"
	"io"
	"os"

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
}

// NewNode returns the backend of a node process, which reads the
// coordinator's address from its -coordinator argument or
// GOPMI_SLURM_COORD, and the secret from GOPMI_SLURM_SECRET.
func NewNode() *Node {
	return newNode(os.Args[1:], os.Getenv)
}

func newNode(args []string, getenv func(string) string) *Node {
	fs := flag.NewFlagSet("gopmi-rm-slurm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("coordinator", "", "")
	if fs.Parse(args) != nil || *addr == "" {
		*addr = getenv(EnvCoordinator)
	}
	secret := getenv(EnvSecret)
	n := &Node{}
	n.Relay = plugin.NewRelay(func(ctx context.Context) (plugin.Full, io.Closer, error) {
		switch {
		case *addr == "":
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-slurm: no coordinator address (-coordinator or %s): it runs under srun --mpi=gopmi", EnvCoordinator)
		case secret == "":
			return nil, nil, plugin.Errorf(plugin.ErrUnavailable, "gopmi-rm-slurm: no step secret in %s", EnvSecret)
		}
		c, err := direct.Dial(ctx, *addr, direct.WithDialer(AuthDialer(secret)))
		if err != nil {
			return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "gopmi-rm-slurm: coordinator %s", *addr)
		}
		return c.Backend(), c, nil
	})
	return n
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
