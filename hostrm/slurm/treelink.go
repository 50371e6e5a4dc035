package slurm

// The tree's links: each node's to its parent (found through the
// coordinator, control.go), and the listener a node with children serves
// them on; both are the step's private link (auth.go, plugin/seclink), in
// the roles tree-parent and tree-child.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin/direct"
)

// parentName names where this node's fences go.
func (t *tree) parentName() string {
	if p := treeParent(t.self, t.width); p >= 0 {
		return "the parent node " + t.job.Nodes[p].Name
	}
	return "the coordinator"
}

// cutSubtree names the ranks a lost parent node cuts off from the
// coordinator: its whole subtree, the parent's own included ("" under
// the coordinator).
func (t *tree) cutSubtree() string {
	p := treeParent(t.self, t.width)
	if p < 0 {
		return ""
	}
	var ranks []int32
	for _, i := range subtree(p, t.width, len(t.job.Nodes)) {
		ranks = append(ranks, t.job.Nodes[i].Ranks...)
	}
	return ", so its subtree is lost: " + rankGroups(t.job, ranks, maxGroups)
}

// send passes a call to the parent, finding it first. A parent that
// cannot be reached cuts off every rank the call carries: the error names
// them and the parent.
func (t *tree) send(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	up, err := t.parent(ctx, req.TimeoutOrDefault())
	if err == nil {
		var resp *plugin.FenceResponse
		if resp, err = up.Fence(ctx, req); err == nil {
			return resp, nil
		}
	}
	if ctx.Err() != nil || !lostLink(err) {
		return nil, err
	}
	err = plugin.Wrapf(err, plugin.ErrUnavailable, "fence %s: %s %s %s%s", req.ID, t.procGroups(req.LocalProcs), cutOff, t.parentName(), t.cutSubtree())
	t.log.Warn().Str("fence", req.ID).Err(err).Msg("fence tree: a part could not go up")
	return nil, err
}

// cutOff is the words of a part that could not go up: a node whose
// parent's error says them already does not say them again.
const cutOff = "cannot reach"

// lostLink reports whether err says a link on the way up is gone, not
// an answer of the coordinator's (a time-out naming ranks, an abort),
// and not one said further up already.
func lostLink(err error) bool {
	return (errors.Is(err, plugin.ErrUnavailable) || errors.Is(err, plugin.ErrBackendGone)) &&
		!strings.Contains(err.Error(), cutOff)
}

// procGroups names procs of the job by node.
func (t *tree) procGroups(procs []plugin.Proc) string {
	var ranks []int32
	for _, p := range procs {
		if p.Nspace == t.job.Nspace && p.Rank >= 0 {
			ranks = append(ranks, p.Rank)
		}
	}
	return rankGroups(t.job, ranks, maxGroups)
}

// parent is the backend fences go up to: the coordinator for the nodes
// under it, else the parent node's subtree server, whose address the
// coordinator's name service holds. One lookup runs at a time, without
// the tree's lock; callers waiting for it leave when their ctx ends.
func (t *tree) parent(ctx context.Context, wait time.Duration) (plugin.Full, error) {
	p := treeParent(t.self, t.width)
	if p < 0 {
		return t.toRoot, nil
	}
	for {
		changed := t.resolved.C()
		t.mu.Lock()
		switch {
		case t.up != nil:
			up := t.up
			t.mu.Unlock()
			return up, nil
		case t.closed:
			t.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrAborted, "fence tree: the node's fence tree has closed")
		case !t.resolving:
			t.resolving = true
			t.mu.Unlock()
			up, closer, err := t.resolve(ctx, p, wait)
			t.mu.Lock()
			t.resolving = false
			if err == nil && t.closed {
				_ = closer()
				up, err = nil, plugin.Errorf(plugin.ErrAborted, "fence tree: the node's fence tree has closed")
			} else if err == nil {
				t.up, t.upClose = up, closer
			}
			t.mu.Unlock()
			t.resolved.Broadcast()
			return up, err
		}
		t.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrTimeout, "fence tree: the parent node %s: %v", t.job.Nodes[p].Name, ctx.Err())
		}
	}
}

// resolve looks the parent's address up and dials it.
func (t *tree) resolve(ctx context.Context, p int, wait time.Duration) (plugin.Full, func() error, error) {
	addr, err := t.ctl.lookupAddr(ctx, p, wait)
	if err != nil {
		return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: the parent node %s", t.job.Nodes[p].Name)
	}
	c, err := direct.Dial(ctx, addr, direct.WithDialer(treeDialer(t.secret)))
	if err != nil {
		return nil, nil, plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: the parent node %s at %s", t.job.Nodes[p].Name, addr)
	}
	return c.Backend(), c.Close, nil
}

// watchAbort waits, at the coordinator, for the job's abort, which fails
// a pending lookup of the job at once: then every fence gathered here
// fails, and every later one. A node with children holds the only calls
// of its subtree that the coordinator does not see.
func (t *tree) watchAbort(ctx context.Context) {
	for ctx.Err() == nil {
		err := t.ctl.watchAbort(ctx, time.Hour)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, plugin.ErrAborted):
			t.aborted(plugin.Wrapf(err, plugin.ErrAborted, "fence"))
			return
		case err == nil, errors.Is(err, plugin.ErrTimeout):
		default:
			// The coordinator is unreachable: the fences will say so.
			// A second between tries; close cuts it short.
			pause := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-pause.C:
			}
			pause.Stop()
		}
	}
}

// aborted fails every gathered fence and every later one with err.
func (t *tree) aborted(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abortErr = err
	for _, g := range t.open {
		t.answerAll(g, err)
	}
}

// serveChildren listens for this node's children, when it has any, and
// publishes where. host is this node's address as the coordinator sees
// it.
func (t *tree) serveChildren(ctx context.Context, host string) error {
	if len(treeChildren(t.self, t.width, len(t.job.Nodes))) == 0 {
		return nil
	}
	l, err := t.listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return fmt.Errorf("fence tree: listen for the children: %w", err)
	}
	sl, err := treeListener(l, t.secret, t.log)
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("fence tree: %w", err)
	}
	served := t.crew.spawn(func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { t.watchAbort(ctx) })
		defer wg.Wait()
		err := direct.Serve(ctx, sl, subtreeServer{t: t}, direct.WithLogger(t.log), direct.WithGracePeriod(time.Second))
		if err != nil && ctx.Err() == nil {
			// The children's fences fail, naming this node; the
			// operator reads here which ranks they cut off.
			t.log.Error().Err(err).Msgf("fence tree: serving node %s's subtree failed: the fences of %s cannot reach it",
				t.job.Nodes[t.self].Name, t.belowGroups())
		}
	})
	if !served {
		_ = sl.Close()
		return plugin.Errorf(plugin.ErrAborted, "fence tree: the node's fence tree has closed")
	}
	if err := t.ctl.publishAddr(ctx, l.Addr().String()); err != nil {
		return plugin.Wrapf(err, plugin.ErrUnavailable, "fence tree: publish this node's address")
	}
	return nil
}

// belowGroups names the ranks of every node below this one.
func (t *tree) belowGroups() string {
	rankNode := t.job.RankNodes()
	below := map[int32]bool{}
	for _, i := range subtree(t.self, t.width, len(t.job.Nodes))[1:] {
		below[int32(i)] = true
	}
	var ranks []int32
	for r, n := range rankNode {
		if below[n] {
			ranks = append(ranks, int32(r))
		}
	}
	return rankGroups(t.job, ranks, maxGroups)
}

// subtreeServer is what a node serves its children: their fences.
type subtreeServer struct {
	plugin.Unimplemented
	t *tree
}

func (subtreeServer) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "slurm-subtree", APIVersions: []string{plugin.APIVersion1}}, nil
}

// Fence serves a child's part. A child whose call ends before the
// answer (its process died, its link broke) is a subtree lost in the
// middle of a fence: the log names it and the ranks it carried.
func (s subtreeServer) Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error) {
	s.t.childCall(req.ID, 1)
	defer s.t.childCall(req.ID, -1)
	resp, err := s.t.fence(ctx, req)
	s.t.mu.Lock()
	closed := s.t.closed
	s.t.mu.Unlock()
	if err != nil && !closed && errors.Is(ctx.Err(), context.Canceled) {
		s.t.log.Warn().Str("fence", req.ID).Str("child", req.Node).Err(err).
			Msgf("fence tree: node %s's subtree went away in fence %s (it carried %s)", req.Node, req.ID, s.t.procGroups(req.LocalProcs))
	}
	return resp, err
}
