package local

import (
	"context"
	"errors"
	"strings"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
)

// Beyond is what the universe asks beyond its run (the node daemon's
// client): see UniverseOptions.Beyond.
type Beyond interface {
	Publish(ctx context.Context, req *plugin.PublishRequest) error
	Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error)
	Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error
	Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error)
	DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error)
	// Query answers what the universe is asked of jobs of other runs
	// (a PMIx server registers a job it connects to from its proc table).
	Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error)
	// Fence joins a fence whose participants include jobs of other runs
	// (Open MPI's disconnect after a connect across runs): each run
	// calls it once, with its own participants as LocalProcs.
	Fence(ctx context.Context, req *plugin.FenceRequest) (*plugin.FenceResponse, error)
}

// The universe's name service is package names' (the rules every gopmi
// host shares) with one realm, the run: every job of `gopmi run` and
// every job they spawned, or a Slurm step. Around it, the universe adds
// what only it knows: which node a process is on (for RangeLocal), that
// a job ended (its PersistProc and PersistApp names go, its waiting
// lookups fail), and, with a node daemon (Beyond), which names live
// beyond the run.

// asker is p as the name service sees it. Called with mu held.
func (u *Universe) asker(p plugin.Proc) names.Asker {
	return names.Asker{Proc: p, Node: u.procNode(p)}
}

// procNode names the node hosting p, or "" when unknown. Called with mu
// held.
func (u *Universe) procNode(p plugin.Proc) string {
	j := u.jobs[p.Nspace]
	if j == nil || p.Rank < 0 || p.Rank >= j.layout.Size {
		return ""
	}
	return j.nodeName(p.Rank)
}

// beyondRun reports whether names of range r live in the name service
// beyond the run: the default range (what MPICH and libpmi2 publish with),
// the node and everything; a job's and a session's (the run's) stay here.
func beyondRun(r plugin.Range) bool {
	return r == plugin.RangeDefault || r == plugin.RangeLocal || r == plugin.RangeGlobal
}

// Publish publishes names (package names has the rules). PersistProc
// names go when the publisher's task ends, PersistApp names when its job
// ends; the others live until unpublished or the run ends. With a node
// daemon, names of the default, node and global ranges are its.
func (u *Universe) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	if err := u.names.Check(req); err != nil {
		return err
	}
	u.mu.Lock()
	if _, err := u.lookupProc("publish", req.Proc); err != nil {
		u.mu.Unlock()
		return err
	}
	if err := u.jobGone("publish", req.Proc.Nspace); err != nil {
		u.mu.Unlock()
		return err
	}
	a := u.asker(req.Proc)
	if u.opts.Beyond != nil && beyondRun(req.Range) {
		u.mu.Unlock()
		return u.opts.Beyond.Publish(ctx, req)
	}
	// Under the universe's lock (then the name service's): a job that
	// ends meanwhile drops its names after this one is in.
	defer u.mu.Unlock()
	return u.names.Publish(a, req)
}

// Lookup finds names visible to req.Proc, waiting with Wait (package
// names has the rules); a waiting lookup fails at once when the asker's
// job aborts or fails, or the run ends. With a node daemon, the names
// not found here are asked there, where a lookup with Wait waits.
func (u *Universe) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	if len(req.Keys) == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "lookup: no keys")
	}
	step := "lookup of " + strings.Join(req.Keys, ",")
	if err := u.names.RefuseInfo(step, req.Info); err != nil {
		return nil, err
	}
	u.mu.Lock()
	a := u.asker(req.Proc)
	u.mu.Unlock()
	gone := func() error {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.jobGone(step, req.Proc.Nspace)
	}
	if u.opts.Beyond == nil {
		return u.names.Lookup(ctx, a, req, gone)
	}
	if err := gone(); err != nil {
		return nil, err
	}
	found, missing, err := u.names.Take(a, req.Keys, false)
	if err != nil || len(missing) == 0 {
		return &plugin.LookupResponse{Data: found}, err
	}
	rest := *req
	rest.Keys = missing
	resp, err := u.opts.Beyond.Lookup(ctx, &rest)
	switch {
	case err == nil:
		return &plugin.LookupResponse{Data: append(found, resp.Data...)}, nil
	case len(found) > 0 && !req.Wait && errors.Is(err, plugin.ErrNotFound):
		return &plugin.LookupResponse{Data: found}, nil
	}
	return nil, err
}

// Unpublish removes names (package names has the rules); with a node
// daemon, keys not published here, and every name of a publisher in the
// ranges that live there, are unpublished there too.
func (u *Universe) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	u.mu.Lock()
	a := u.asker(req.Proc)
	u.mu.Unlock()
	notFound, err := u.names.Unpublish(a, req)
	switch {
	case err != nil:
		return err
	case u.opts.Beyond == nil && len(notFound) > 0:
		return names.NotFound(notFound)
	case u.opts.Beyond == nil:
		return nil
	case len(req.Keys) == 0 && beyondRun(req.Range):
		return u.opts.Beyond.Unpublish(ctx, req)
	case len(notFound) > 0:
		rest := *req
		rest.Keys = notFound
		return u.opts.Beyond.Unpublish(ctx, &rest)
	}
	return nil
}
