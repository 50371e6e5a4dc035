package slurm

// The tree's links: each node's to its parent (the overlay finds it), and
// the listener a node with children serves them on; both are the step's
// private link (auth.go, plugin/seclink), in the roles tree-parent and
// tree-child.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
	treev1 "github.com/gopmi/gopmi/proto/gopmi/tree/v1"
)

// send passes a call up the node's link: to its parent node (or, when
// that never answered, an ancestor or the coordinator). A parent that
// cannot be reached cuts off every rank the call carries: the error names
// them and the parent.
func (t *tree) send(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	resp, err := t.toRoot.Fence(ctx, req)
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil || !lostLink(err) {
		return nil, err
	}
	err = plugin.Wrapf(err, plugin.ErrUnavailable, "fence %s: %s cannot reach %s%s", req.ID, t.ProcGroups(req.LocalProcs), t.ParentName(), t.CutSubtree())
	t.log.Warn().Str("fence", req.ID).Err(err).Msg("fence tree: a part could not go up")
	return nil, err
}

// lostLink reports whether err says the node's own link up is gone (a
// parent that cannot be reached, a connection that broke), not an answer
// from up the tree (the coordinator's time-out naming ranks, an abort, or
// a node further up that could not reach its own parent, which said so).
func lostLink(err error) bool {
	return (errors.Is(err, plugin.ErrUnavailable) || errors.Is(err, plugin.ErrBackendGone)) && !direct.Answered(err)
}

// aborted fails every gathered fence and every later one with err, and
// every read of this node's data, and tells the children watching.
func (t *tree) aborted(err error) {
	t.mu.Lock()
	t.end.err = err
	t.applyLocked(t.fences.Stop(func(string) error { return err }))
	t.mu.Unlock()
	t.data.mine.fail(err)
	t.end.seen.Close()
}

// serve listens, at the address and port the other nodes compute
// (package overlay), for this node's children and for the nodes that read its
// data (modex.go).
func (t *tree) serve(context.Context) error {
	sl, err := t.ov.Listen(t.Place, t.log)
	if err != nil {
		return fmt.Errorf("fence tree: %w", err)
	}
	served := t.crew.Spawn(func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { t.watchNews(ctx) })
		defer wg.Wait()
		err := direct.Serve(ctx, sl, subtreeServer{Full: t.toRoot, t: t}, direct.WithLogger(t.log), direct.WithGracePeriod(time.Second),
			direct.WithService(&treev1.Tree_ServiceDesc, treeService{x: t.ex}))
		if err != nil && ctx.Err() == nil {
			// The children's fences fail, naming this node; the
			// operator reads here which ranks they cut off.
			t.log.Error().Err(err).Msgf("fence tree: serving node %s's subtree failed: the fences of %s cannot reach it",
				t.Job.Nodes[t.Self].Name, t.BelowGroups())
		}
	})
	if !served {
		_ = sl.Close()
		return plugin.Errorf(plugin.ErrAborted, "fence tree: the node's fence tree has closed")
	}
	return nil
}

// subtreeServer is what a node serves the other nodes of its job: its
// children's fences, which it gathers, reads of its own data, and every
// other call of its children, which it passes on up its own link.
type subtreeServer struct {
	plugin.Full // the node's link up
	t           *tree
}

func (subtreeServer) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return Info(), nil
}

// AwaitEvents answers a child's wait for its job's news (news.go) here;
// another job's goes up.
func (s subtreeServer) AwaitEvents(ctx context.Context, req *plugin.AwaitEventsRequest) (*plugin.AwaitEventsResponse, error) {
	if req.Nspace == s.t.Job.Nspace {
		return s.t.awaitNews(ctx, req)
	}
	return s.Full.AwaitEvents(ctx, req)
}

// DirectModex answers a read of this node's data; any other goes up.
func (s subtreeServer) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	return s.t.nodeRead(ctx, req)
}

// Fence serves a child's part. A child whose call ends before the
// answer (its process died, its link broke) is a subtree lost in the
// middle of a fence: the log names it and the ranks it carried.
func (s subtreeServer) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	if id, ok := strings.CutPrefix(req.ID, legacyPartPrefix); ok {
		// An older node's part of a fence the nodes exchange (treeService's
		// Give, as it gave it).
		s.t.drain.call(id, 1)
		defer s.t.drain.call(id, -1)
		return &plugin.FenceResponse{}, s.t.ex.takeLegacy(req)
	}
	s.t.drain.call(req.ID, 1)
	defer s.t.drain.call(req.ID, -1)
	resp, err := s.t.fence(ctx, req)
	s.t.mu.Lock()
	closed := s.t.end.closed
	s.t.mu.Unlock()
	if err != nil && !closed && errors.Is(ctx.Err(), context.Canceled) {
		s.t.log.Warn().Str("fence", req.ID).Str("child", req.Node).Err(err).
			Msgf("fence tree: node %s's subtree went away in fence %s (it carried %s)", req.Node, req.ID, s.t.ProcGroups(req.LocalProcs))
	}
	return resp, err
}
