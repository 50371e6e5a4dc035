// Package names is the PMIx name service's rules, written once: what a
// published name conflicts with, who sees it (its range), how long it
// lives (its persistence, the first read included), and the lookup that
// waits for a name with a time-out. Every gopmi host that keeps names
// embeds a Service: the local universe (one `gopmi run`, or a Slurm
// step's coordinator) and the node daemon (names across runs, per user).
// A vendor's backend may embed it too; it uses only package plugin.
//
// What differs between hosts is policy around the Service, not a copy of
// it: which persistences a host can honour (the daemon does not hear of
// a single process's end), how much one user may publish, which names go
// to a name service beyond the host. The daemon keeps one name space per
// user, a realm: names of different realms never see, block or stand in
// for each other, and a key held in another realm is refused with
// ErrPermission rather than shown.
//
// The Service has its own lock. A host may call it with its own lock
// held (host, then Service), except Lookup, which calls the host's check
// between waits and so must be called without it.
package names

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/wake"
)

// Name is one published name.
type Name struct {
	Key       string             `json:"key"`
	Value     string             `json:"value"`
	Publisher plugin.Proc        `json:"publisher"`
	Range     plugin.Range       `json:"range,omitempty"` // never RangeDefault: stored as RangeSession
	Persist   plugin.Persistence `json:"persist"`
	// Node is the publisher's node: a RangeLocal name is seen there only.
	Node string `json:"node,omitempty"`
	// Realm is whose name space holds it ("" when the host has one).
	Realm string `json:"realm,omitempty"`
	// Tag is the host's own: the daemon keeps the publishing run, whose
	// end ends the name.
	Tag string `json:"tag,omitempty"`
}

// Asker is who publishes, looks up or unpublishes: a process, on a node,
// in a realm.
type Asker struct {
	Proc  plugin.Proc
	Node  string // "" when the host does not know it: RangeLocal names are then not seen
	Realm string
	Tag   string // given to the names it publishes
	// Hidden, if set, makes a key only another realm holds look
	// unpublished to the asker, as if it were not there (that it exists
	// is the other realm's to tell), and is told of each such key (step:
	// "lookup", "unpublish") so that the host can log the refusal. It is
	// called with the Service's lock held; it must not call the Service.
	Hidden func(step, key string)
}

// sees reports whether a may see n.
func (a Asker) sees(n *Name) bool {
	if n.Realm != a.Realm {
		return false
	}
	switch n.Range {
	case plugin.RangeNamespace:
		return a.Proc.Nspace == n.Publisher.Nspace
	case plugin.RangeLocal:
		return a.Node != "" && a.Node == n.Node
	default:
		return true
	}
}

// Options configure a Service.
type Options struct {
	// Host names the host in refusals: "gopmi-rm-local", "the node
	// daemon".
	Host string
	// RealmNoun names a realm in refusals ("user"); default "realm".
	RealmNoun string
	// Refuse is the host's policy on a publish the rules allow: a
	// persistence it cannot honour, a bound on what one realm holds
	// (held now, adding more). It is called with the Service's lock
	// held; it must not call the Service.
	Refuse func(held, adding Held, req *plugin.PublishRequest) error
	// Changes is woken on every change of the names; the host may wake
	// it too (a job ended), and waiting lookups then call their check
	// again. Nil: the Service makes its own.
	Changes *wake.Cond
	// Retries makes a publish of what the same process already published,
	// with the same value and range, succeed instead of conflicting: a
	// daemon's client retries a call across the daemon's restart. PMIx
	// itself calls it a duplicate.
	Retries bool
	// RealmUnpublishes lets any process of a realm unpublish a name it
	// sees, not only a process of the publisher's job: a daemon's user
	// owns their names across runs, and a name kept until unpublished
	// outlives the job that published it.
	RealmUnpublishes bool
	// OnChange is called, with the Service's lock held, with the names a
	// change added and removed: the daemon writes them to its state file.
	// It must not call the Service.
	OnChange func(added, removed []Name)
}

// Held is what a realm holds, or a publish adds: names, and their bytes
// (keys and values).
type Held struct {
	Names int
	Bytes int
}

func (h *Held) count(n *Name) {
	h.Names++
	h.Bytes += len(n.Key) + len(n.Value)
}

// Service holds published names.
type Service struct {
	opts Options

	mu    sync.Mutex
	names []*Name // guarded by mu; in publishing order
}

// New returns an empty name service.
func New(opts Options) *Service {
	if opts.RealmNoun == "" {
		opts.RealmNoun = "realm"
	}
	if opts.Changes == nil {
		opts.Changes = new(wake.Cond)
	}
	return &Service{opts: opts}
}

// Load puts back names a host kept (the daemon's state file), as they
// were: no rule is checked.
func (s *Service) Load(all []Name) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range all {
		s.names = append(s.names, &n)
	}
}

// changed wakes the waits and tells the host. Called with mu held.
func (s *Service) changed(added, removed []Name) {
	s.opts.Changes.Broadcast()
	if s.opts.OnChange != nil {
		s.opts.OnChange(added, removed)
	}
}

// remove deletes the names pred selects and tells the change. Called
// with mu held.
func (s *Service) remove(pred func(*Name) bool) int {
	var gone []Name
	s.names = slices.DeleteFunc(s.names, func(n *Name) bool {
		if pred(n) {
			gone = append(gone, *n)
			return true
		}
		return false
	})
	if len(gone) > 0 {
		s.changed(nil, gone)
	}
	return len(gone)
}

// snapshot copies the names keep selects (all for nil). Called with mu
// held.
func (s *Service) snapshot(keep func(*Name) bool) []Name {
	var out []Name
	for _, n := range s.names {
		if keep == nil || keep(n) {
			out = append(out, *n)
		}
	}
	return out
}

// Names returns a copy of the names keep selects, in publishing order.
func (s *Service) Names(keep func(*Name) bool) []Name {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot(keep)
}

// Drop removes the names pred selects (their publisher, job or run
// ended) and says how many went.
func (s *Service) Drop(pred func(*Name) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(pred)
}

// RefuseInfo refuses the first directive: the name service takes none,
// and a directive must never be silently ignored.
func (s *Service) RefuseInfo(step string, info []plugin.Info) error {
	if len(info) == 0 {
		return nil
	}
	return plugin.Errorf(plugin.ErrNotSupported, "%s: info key %q is not supported by %s", step, info[0].Key, s.opts.Host)
}

// Check validates a publish before the host acts on it (forwards it, or
// takes its own lock): names, range, persistence and directives.
func (s *Service) Check(req *plugin.PublishRequest) error {
	const step = "publish"
	switch {
	case len(req.Data) == 0:
		return plugin.Errorf(plugin.ErrInvalidArgument, "%s: no names", step)
	case req.Range < plugin.RangeDefault || req.Range > plugin.RangeGlobal:
		return plugin.Errorf(plugin.ErrNotSupported, "%s: range %d is not supported by %s", step, req.Range, s.opts.Host)
	case req.Persistence < plugin.PersistDefault || req.Persistence > plugin.PersistSession:
		return plugin.Errorf(plugin.ErrNotSupported, "%s: persistence %d is not supported by %s", step, req.Persistence, s.opts.Host)
	}
	for _, d := range req.Data {
		if d.Key == "" {
			return plugin.Errorf(plugin.ErrInvalidArgument, "%s: empty name", step)
		}
	}
	return s.RefuseInfo(step, req.Info)
}

// Publish publishes req's names for a, all or none. A key conflicts with a
// name of a's realm that a would see, or whose publisher would see the new
// name: ErrAlreadyExists naming that publisher. With Options.Retries, the
// same name published again by the same process with the same value and
// range is a retry and succeeds. Options.Refuse judges what would be
// added; a publish that adds nothing (retries only) is not judged again.
func (s *Service) Publish(a Asker, req *plugin.PublishRequest) error {
	if err := s.Check(req); err != nil {
		return err
	}
	rng := req.Range
	if rng == plugin.RangeDefault {
		rng = plugin.RangeSession
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var add []*Name
	for _, d := range req.Data {
		n := &Name{Key: d.Key, Value: d.Value, Publisher: a.Proc, Range: rng, Persist: req.Persistence, Node: a.Node, Realm: a.Realm, Tag: a.Tag}
		retry := false
		for _, o := range append(slices.Clip(s.names), add...) {
			if o.Key != n.Key || o.Realm != n.Realm {
				continue
			}
			owner := Asker{Proc: o.Publisher, Node: o.Node, Realm: o.Realm}
			if !a.sees(o) && !owner.sees(n) {
				continue
			}
			if s.opts.Retries && o.Publisher == n.Publisher && o.Value == n.Value && o.Range == n.Range {
				retry = true
				break
			}
			return plugin.Errorf(plugin.ErrAlreadyExists, "publish: %q is already published by %s", d.Key, o.Publisher)
		}
		if !retry {
			add = append(add, n)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if s.opts.Refuse != nil {
		var held, adding Held
		for _, n := range s.names {
			if n.Realm == a.Realm {
				held.count(n)
			}
		}
		for _, n := range add {
			adding.count(n)
		}
		if err := s.opts.Refuse(held, adding, req); err != nil {
			return err
		}
	}
	s.names = append(s.names, add...)
	added := make([]Name, len(add))
	for i, n := range add {
		added[i] = *n
	}
	s.changed(added, nil)
	return nil
}

// find returns the index of the name key that a sees, or -1, and whether
// another realm holds key. Called with mu held.
func (s *Service) find(a Asker, key string) (int, bool) {
	elsewhere := false
	for i, n := range s.names {
		if n.Key != key {
			continue
		}
		if a.sees(n) {
			return i, false
		}
		if n.Realm != a.Realm {
			elsewhere = true
		}
	}
	return -1, elsewhere
}

// Take finds keys for a now, without waiting: the names found, in the
// order of keys, and the keys not found. It removes the PersistFirstRead
// names it returns. A key that only another realm holds is refused with
// ErrPermission when refuseElsewhere (a lookup that does not wait),
// else counted missing.
func (s *Service) Take(a Asker, keys []string, refuseElsewhere bool) (found []plugin.Published, missing []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found, missing, err = s.findKeys(a, keys, refuseElsewhere)
	if err != nil {
		return nil, nil, err
	}
	s.readFirst(a, keys)
	return found, missing, nil
}

// findKeys is Take without the first read. Called with mu held.
func (s *Service) findKeys(a Asker, keys []string, refuseElsewhere bool) (found []plugin.Published, missing []string, err error) {
	for _, k := range keys {
		i, elsewhere := s.find(a, k)
		switch {
		case i >= 0:
			n := s.names[i]
			found = append(found, plugin.Published{Key: k, Value: n.Value, Publisher: n.Publisher})
		case elsewhere && a.Hidden != nil:
			a.Hidden("lookup", k)
			missing = append(missing, k)
		case elsewhere && refuseElsewhere:
			return nil, nil, plugin.Errorf(plugin.ErrPermission, "lookup of %s: %q is published by another %s", strings.Join(keys, ","), k, s.opts.RealmNoun)
		default:
			missing = append(missing, k)
		}
	}
	return found, missing, nil
}

// readFirst removes the PersistFirstRead names among keys that a sees.
// Called with mu held.
func (s *Service) readFirst(a Asker, keys []string) {
	var gone []Name
	for _, k := range keys {
		if i, _ := s.find(a, k); i >= 0 && s.names[i].Persist == plugin.PersistFirstRead {
			gone = append(gone, *s.names[i])
			s.names = slices.Delete(s.names, i, i+1)
		}
	}
	if len(gone) > 0 {
		s.changed(nil, gone)
	}
}

// Lookup finds req.Keys for a. Without req.Wait it answers at once: the
// keys found (and a lookup that found some of its keys succeeds with
// those), or ErrNotFound when none is published. With Wait it waits until
// every key is published, bounded by req.TimeoutOrDefault() and ctx, and
// fails with ErrTimeout naming the keys still missing. check, if not nil,
// is the host's say before each look (the asker's job ended, the host is
// stopping); its error ends the lookup. Lookup must be called without the
// host's lock.
func (s *Service) Lookup(ctx context.Context, a Asker, req *plugin.LookupRequest, check func() error) (*plugin.LookupResponse, error) {
	step := "lookup of " + strings.Join(req.Keys, ",")
	if len(req.Keys) == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "lookup: no keys")
	}
	if err := s.RefuseInfo(step, req.Info); err != nil {
		return nil, err
	}
	timeout := req.TimeoutOrDefault()
	var expired <-chan time.Time
	if req.Wait {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		ch := s.opts.Changes.C()
		if check != nil {
			if err := check(); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		found, missing, err := s.findKeys(a, req.Keys, !req.Wait)
		if err == nil && (len(missing) == 0 || (!req.Wait && len(found) > 0)) {
			s.readFirst(a, req.Keys)
			s.mu.Unlock()
			return &plugin.LookupResponse{Data: found}, nil
		}
		s.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case !req.Wait:
			return nil, plugin.Errorf(plugin.ErrNotFound, "%s: not published", step)
		}
		select {
		case <-ch:
			if s.opts.Changes.Closed() {
				// Woken for good: the host is stopping.
				return nil, plugin.Errorf(plugin.ErrUnavailable, "%s: the name service is closing", step)
			}
		case <-expired:
			return nil, plugin.Errorf(plugin.ErrTimeout, "lookup of %s: not published within %s", strings.Join(missing, ","), plugin.RoundDuration(timeout))
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, plugin.Errorf(plugin.ErrTimeout, "lookup of %s: not published before the caller's deadline", strings.Join(missing, ","))
			}
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, ctx.Err())
		}
	}
}

// Unpublish removes names for a. With req.Keys it removes each key a
// sees, which a process of a's job must have published unless
// RealmUnpublishes (ErrPermission otherwise, and ErrPermission for a key only another realm holds); the
// keys a does not see are returned, and nothing is removed when one is
// refused. Without keys it removes every name a.Proc published in
// req.Range (any range for RangeDefault). The host decides what a key
// not found means (ErrNotFound, or asking a name service beyond it):
// NotFound makes the usual error.
func (s *Service) Unpublish(a Asker, req *plugin.UnpublishRequest) (notFound []string, err error) {
	const step = "unpublish"
	if err := s.RefuseInfo(step, req.Info); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(req.Keys) == 0 {
		s.remove(func(n *Name) bool {
			return n.Publisher == a.Proc && n.Realm == a.Realm && (req.Range == plugin.RangeDefault || n.Range == req.Range)
		})
		return nil, nil
	}
	var drop []*Name
	for _, k := range req.Keys {
		i, elsewhere := s.find(a, k)
		switch {
		case i < 0 && elsewhere && a.Hidden != nil:
			a.Hidden(step, k)
			notFound = append(notFound, k)
		case i < 0 && elsewhere:
			return nil, plugin.Errorf(plugin.ErrPermission, "%s %q: published by another %s", step, k, s.opts.RealmNoun)
		case i < 0:
			notFound = append(notFound, k)
		case s.names[i].Publisher.Nspace != a.Proc.Nspace && !s.opts.RealmUnpublishes:
			return nil, plugin.Errorf(plugin.ErrPermission, "%s %q: published by %s, another job", step, k, s.names[i].Publisher)
		default:
			drop = append(drop, s.names[i])
		}
	}
	if len(drop) > 0 {
		s.remove(func(n *Name) bool { return slices.Contains(drop, n) })
	}
	return notFound, nil
}

// NotFound is the error of an Unpublish whose keys were not published.
func NotFound(keys []string) error {
	return plugin.Errorf(plugin.ErrNotFound, "unpublish %q: not published", strings.Join(keys, ","))
}

// String shows a name in a message: key=value by publisher.
func (n Name) String() string {
	return fmt.Sprintf("%s=%s by %s", n.Key, n.Value, n.Publisher)
}
