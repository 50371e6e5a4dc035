package local

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// Beyond is what the universe asks beyond its run (the node daemon's
// client): see UniverseOptions.Beyond.
type Beyond interface {
	Publish(ctx context.Context, req *plugin.PublishRequest) error
	Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error)
	Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error
	Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error)
	DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error)
}

// name is one published name. The universe has a single name space for the
// whole run (every job of `gopmi run` and every job they spawned); Range
// narrows who sees a name.
type name struct {
	key       string
	value     string
	publisher plugin.Proc
	rng       plugin.Range // RangeDefault is stored as RangeSession
	persist   plugin.Persistence
	node      string // the publisher's node, for RangeLocal
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

// visible reports whether p (on node) may see n.
func (n *name) visible(p plugin.Proc, node string) bool {
	switch n.rng {
	case plugin.RangeNamespace:
		return p.Nspace == n.publisher.Nspace
	case plugin.RangeLocal:
		return node != "" && node == n.node
	default:
		return true
	}
}

// find returns the first name called key that p may see. Called with mu
// held.
func (u *Universe) find(key string, p plugin.Proc, node string) (int, *name) {
	for i, n := range u.names {
		if n.key == key && n.visible(p, node) {
			return i, n
		}
	}
	return -1, nil
}

// dropNames removes the names pred selects. Called with mu held.
func (u *Universe) dropNames(pred func(*name) bool) {
	u.names = slices.DeleteFunc(u.names, pred)
}

// refuseInfo refuses the first directive: the name service takes none.
func refuseInfo(step string, info []plugin.Info) error {
	if len(info) == 0 {
		return nil
	}
	return plugin.Errorf(plugin.ErrNotSupported, "%s: info key %q is not supported by gopmi-rm-local", step, info[0].Key)
}

// Publish publishes names. RangeNamespace names are seen by the
// publisher's job only, RangeLocal names by processes on the publisher's
// node, the other ranges by the whole run. A key already visible to the
// publisher (or whose new entry would be visible to an existing
// publisher) is ErrAlreadyExists. Persistence: PersistProc names go when
// the publisher's process ends, PersistApp names when its job ends,
// PersistFirstRead names on their first lookup; the others live until
// unpublished or the run ends.
func (u *Universe) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	step := "publish"
	if len(req.Data) == 0 {
		return plugin.Errorf(plugin.ErrInvalidArgument, "%s: no names", step)
	}
	if req.Range < plugin.RangeDefault || req.Range > plugin.RangeGlobal {
		return plugin.Errorf(plugin.ErrNotSupported, "%s: range %d is not supported by gopmi-rm-local", step, req.Range)
	}
	if req.Persistence < plugin.PersistDefault || req.Persistence > plugin.PersistSession {
		return plugin.Errorf(plugin.ErrNotSupported, "%s: persistence %d is not supported by gopmi-rm-local", step, req.Persistence)
	}
	if err := refuseInfo(step, req.Info); err != nil {
		return err
	}
	rng := req.Range
	if rng == plugin.RangeDefault {
		rng = plugin.RangeSession
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, err := u.lookupProc(step, req.Proc); err != nil {
		return err
	}
	if err := u.jobGone(step, req.Proc.Nspace); err != nil {
		return err
	}
	if u.opts.Beyond != nil && beyondRun(req.Range) {
		u.mu.Unlock()
		defer u.mu.Lock()
		return u.opts.Beyond.Publish(ctx, req)
	}
	node := u.procNode(req.Proc)
	var add []*name
	for _, d := range req.Data {
		if d.Key == "" {
			return plugin.Errorf(plugin.ErrInvalidArgument, "%s: empty name", step)
		}
		n := &name{key: d.Key, value: d.Value, publisher: req.Proc, rng: rng, persist: req.Persistence, node: node}
		for _, o := range append(slices.Clone(u.names), add...) {
			if o.key == d.Key && (o.visible(req.Proc, node) || n.visible(o.publisher, o.node)) {
				return plugin.Errorf(plugin.ErrAlreadyExists, "%s: %q is already published by %s", step, d.Key, o.publisher)
			}
		}
		add = append(add, n)
	}
	u.names = append(u.names, add...)
	u.broadcast()
	return nil
}

// Lookup finds names visible to req.Proc. Without Wait it returns what is
// published now (ErrNotFound when none of the keys is); with Wait it
// waits until every key is published, bounded by req.Timeout (default
// 60s) and ctx, and fails with ErrTimeout naming the keys still missing.
// A PersistFirstRead name is removed by the lookup that returns it.
func (u *Universe) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	step := "lookup of " + strings.Join(req.Keys, ",")
	if len(req.Keys) == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "lookup: no keys")
	}
	if err := refuseInfo(step, req.Info); err != nil {
		return nil, err
	}
	if u.opts.Beyond != nil {
		return u.lookupBeyond(ctx, step, req)
	}
	timeout := req.TimeoutOrDefault()
	var timerC <-chan time.Time
	if req.Wait {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		timerC = timer.C
	}
	for {
		u.mu.Lock()
		if err := u.jobGone(step, req.Proc.Nspace); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		found, missing := u.findKeys(req.Keys, req.Proc)
		if len(missing) == 0 || (!req.Wait && len(found) > 0) {
			u.readFirst(req.Keys, req.Proc)
			u.mu.Unlock()
			return &plugin.LookupResponse{Data: found}, nil
		}
		if !req.Wait {
			u.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrNotFound, "%s: not published", step)
		}
		ch := u.changed
		u.mu.Unlock()
		changed, err := waitChange(ctx, ch, timerC)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, err)
		}
		if !changed {
			return nil, plugin.Errorf(plugin.ErrTimeout, "lookup of %s: not published within %s", strings.Join(missing, ","), roundDuration(timeout))
		}
	}
}

// findKeys splits keys into the names p may see and the keys it may not.
// Called with mu held.
func (u *Universe) findKeys(keys []string, p plugin.Proc) (found []plugin.Published, missing []string) {
	node := u.procNode(p)
	for _, k := range keys {
		if _, n := u.find(k, p, node); n != nil {
			found = append(found, plugin.Published{Key: k, Value: n.value, Publisher: n.publisher})
		} else {
			missing = append(missing, k)
		}
	}
	return found, missing
}

// readFirst removes the PersistFirstRead names among keys that p found.
// Called with mu held.
func (u *Universe) readFirst(keys []string, p plugin.Proc) {
	node := u.procNode(p)
	for _, k := range keys {
		if i, n := u.find(k, p, node); n != nil && n.persist == plugin.PersistFirstRead {
			u.names = slices.Delete(u.names, i, i+1)
		}
	}
}

// beyondRun reports whether names of range r live in the name service
// beyond the run: the default range (what MPICH and libpmi2 publish with),
// the node and everything; a job's and a session's (the run's) stay here.
func beyondRun(r plugin.Range) bool {
	return r == plugin.RangeDefault || r == plugin.RangeLocal || r == plugin.RangeGlobal
}

// lookupBeyond is Lookup with a name service beyond the run: the job's own
// names (RangeNamespace) are here, every other name there, where a lookup
// with Wait waits.
func (u *Universe) lookupBeyond(ctx context.Context, step string, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	u.mu.Lock()
	if err := u.jobGone(step, req.Proc.Nspace); err != nil {
		u.mu.Unlock()
		return nil, err
	}
	found, missing := u.findKeys(req.Keys, req.Proc)
	u.readFirst(req.Keys, req.Proc)
	u.mu.Unlock()
	if len(missing) == 0 {
		return &plugin.LookupResponse{Data: found}, nil
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

// Unpublish removes names. With Keys it removes each key visible to
// req.Proc and published by a process of its job (ErrNotFound when a key
// is not published, ErrPermission when another job published it); without
// Keys it removes every name req.Proc published in req.Range (any range
// for RangeDefault).
func (u *Universe) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	step := "unpublish"
	if err := refuseInfo(step, req.Info); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	beyond := u.opts.Beyond != nil
	if len(req.Keys) == 0 {
		u.dropNames(func(n *name) bool {
			return n.publisher == req.Proc && (req.Range == plugin.RangeDefault || n.rng == req.Range)
		})
		u.broadcast()
		if beyond && beyondRun(req.Range) {
			u.mu.Unlock()
			defer u.mu.Lock()
			return u.opts.Beyond.Unpublish(ctx, req)
		}
		return nil
	}
	node := u.procNode(req.Proc)
	var drop []*name
	var elsewhere []string
	for _, k := range req.Keys {
		_, n := u.find(k, req.Proc, node)
		if n == nil && beyond {
			elsewhere = append(elsewhere, k)
			continue
		}
		if n == nil {
			return plugin.Errorf(plugin.ErrNotFound, "%s %q: not published", step, k)
		}
		if n.publisher.Nspace != req.Proc.Nspace {
			return plugin.Errorf(plugin.ErrPermission, "%s %q: published by %s, another job", step, k, n.publisher)
		}
		drop = append(drop, n)
	}
	u.dropNames(func(n *name) bool { return slices.Contains(drop, n) })
	u.broadcast()
	if len(elsewhere) > 0 {
		rest := *req
		rest.Keys = elsewhere
		u.mu.Unlock()
		defer u.mu.Lock()
		return u.opts.Beyond.Unpublish(ctx, &rest)
	}
	return nil
}
