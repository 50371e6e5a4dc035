package slurm

import (
	"context"
	"strconv"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// The fence tree's control protocol. A job's fence tree needs two facts
// that no node knows alone; both travel through the coordinator's name
// service, in the job's namespace range, under names that begin with a
// NUL. PMI clients cannot send a NUL, so no task can publish, look up or
// unpublish them, and the coordinator needs no call of its own for them.
//
//	"\x00gopmi-slurm-tree/<nspace>/<i>"  node index i's address ("host:port")
//	                                     for its children: published by node i
//	                                     once it listens, looked up (waiting)
//	                                     by each child before its first fence
//	"\x00gopmi-slurm-watch/<nspace>"     never published: a node with children
//	                                     looks it up, waiting, and the job's
//	                                     abort fails that lookup at once
//
// A node with children holds its subtree's fence calls, which the
// coordinator does not see; the watch is how it learns of an abort the
// coordinator decided. treeControl is the protocol's only speaker.

// controlPrefix begins every control name.
const controlPrefix = "\x00gopmi-slurm-"

// treeControl speaks the control protocol for one node of one job.
type treeControl struct {
	root plugin.Full // the coordinator
	job  plugin.Job
	self int // the node's index in job.Nodes
}

func addrName(nspace string, node int) string {
	return controlPrefix + "tree/" + nspace + "/" + strconv.Itoa(node)
}

func watchName(nspace string) string {
	return controlPrefix + "watch/" + nspace
}

// caller is the process the name service sees calling: the node's first
// rank, a process of the job, so that the job's range applies.
func (c treeControl) caller() plugin.Proc {
	return plugin.Proc{Nspace: c.job.Nspace, Rank: c.job.Nodes[c.self].Ranks[0]}
}

// publishAddr tells this node's children where it listens.
func (c treeControl) publishAddr(ctx context.Context, addr string) error {
	return c.root.Publish(ctx, &plugin.PublishRequest{
		Proc:  c.caller(),
		Data:  []plugin.Info{{Key: addrName(c.job.Nspace, c.self), Value: addr}},
		Range: plugin.RangeNamespace,
	})
}

// lookupAddr waits up to wait for node index i's address.
func (c treeControl) lookupAddr(ctx context.Context, node int, wait time.Duration) (string, error) {
	resp, err := c.root.Lookup(ctx, &plugin.LookupRequest{
		Proc: c.caller(), Keys: []string{addrName(c.job.Nspace, node)},
		Range: plugin.RangeNamespace, Wait: true, Timeout: wait,
	})
	if err != nil {
		return "", err
	}
	if len(resp.Data) == 0 {
		return "", plugin.Errorf(plugin.ErrNotFound, "no address for node %s", c.job.Nodes[node].Name)
	}
	return resp.Data[0].Value, nil
}

// watchAbort waits up to wait for the job's abort: it returns an error
// of kind ErrAborted once the job was aborted, ErrTimeout (or nil) when
// wait passed without one, and any other error when the coordinator
// cannot be asked.
func (c treeControl) watchAbort(ctx context.Context, wait time.Duration) error {
	_, err := c.root.Lookup(ctx, &plugin.LookupRequest{
		Proc: c.caller(), Keys: []string{watchName(c.job.Nspace)},
		Range: plugin.RangeNamespace, Wait: true, Timeout: wait,
	})
	return err
}
