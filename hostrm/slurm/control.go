package slurm

import (
	"context"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// The fence tree's control protocol. A node must learn of its job's
// abort, which the coordinator decides: the fences it gathers and the
// reads of its data it answers must fail. It asks up its link, as a
// lookup in the job's namespace range of a name that begins with a NUL.
// PMI clients cannot send a NUL, so no task can publish, look up or
// unpublish it, and the coordinator needs no call of its own for it.
//
//	"\x00gopmi-slurm-watch/<nspace>"     never published: a node looks it up,
//	                                     waiting; the job's abort fails that
//	                                     lookup at once. A parent node answers
//	                                     its children's watches itself, from
//	                                     its own, so the coordinator holds
//	                                     only the top nodes'.
//
// treeControl is the protocol's only speaker; subtreeServer.Lookup its
// only answerer below the coordinator.

// controlPrefix begins every control name.
const controlPrefix = "\x00gopmi-slurm-"

// treeControl speaks the control protocol for one node of one job.
type treeControl struct {
	root plugin.Full // the coordinator
	job  plugin.Job
	self int // the node's index in job.Nodes
}

func watchName(nspace string) string {
	return controlPrefix + "watch/" + nspace
}

// caller is the process the name service sees calling: the node's first
// rank, a process of the job, so that the job's range applies.
func (c treeControl) caller() plugin.Proc {
	return plugin.Proc{Nspace: c.job.Nspace, Rank: c.job.Nodes[c.self].Ranks[0]}
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
