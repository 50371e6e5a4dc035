package daemon

import (
	"context"
	"errors"
	"os"
	"strconv"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
)

// The node daemon's name service is package names' (the rules every gopmi
// host shares: conflicts, ranges, persistence, the first read, the
// waiting lookup). Around it, the daemon's policy:
//
//   - each user has a name space of their own, a realm: no user can take,
//     block, see or stand in for another's service, and a key only
//     another user holds looks unpublished to her (the refusal is
//     logged: that the name exists is its owner's to tell);
//   - only a registered, running job of the caller's user, whose run
//     registered on the caller's connection, publishes, looks up or
//     unpublishes;
//   - a name lives until it is unpublished or its run ends (the default,
//     PersistSession), its first lookup (PersistFirstRead), or only until
//     it is unpublished (PersistIndefinite, across runs and restarts); a
//     name that lives as long as its process or job (PersistProc,
//     PersistApp) is refused: the daemon does not hear of a process's or
//     a job's end before its run's;
//   - bounds on what one user holds (Options.MaxNames and MaxNameBytes,
//     maxKey, maxValue);
//   - the names are kept in the state file.

// realmOf is the realm of uid's names.
func realmOf(uid uint32) string { return strconv.FormatUint(uint64(uid), 10) }

// realmUID is the uid of a realm.
func realmUID(realm string) uint32 {
	u, _ := strconv.ParseUint(realm, 10, 32)
	return uint32(u)
}

// askerLocked is p acting for job j's process proc. Called with mu held.
func (s *Server) askerLocked(p peer, j *job, proc plugin.Proc) names.Asker {
	node := p.node
	if node == "" {
		node, _ = os.Hostname()
	}
	a := names.Asker{Proc: proc, Node: node, Realm: realmOf(j.info.UID), Tag: j.info.Run}
	if p.uid != 0 {
		// Another user's name is not there for her; the log says she
		// asked. Root, who sees every user's jobs and names, is told.
		a.Hidden = func(step, key string) {
			s.logRefused(p, plugin.Errorf(plugin.ErrPermission, "%s of %s: %q is published by another user", step, key, key))
		}
	}
	return a
}

// actingLocked is the asker for a call of p about proc: its job must be
// registered, running, and its run's (actsForLocked). Called with mu held.
func (s *Server) actingLocked(ctx context.Context, step string, p peer, proc plugin.Proc) (names.Asker, error) {
	j, err := s.jobOfLocked(step, p, proc)
	if err == nil {
		err = s.actsForLocked(ctx, step, j)
	}
	if err != nil {
		return names.Asker{}, err
	}
	return s.askerLocked(p, j, proc), nil
}

// refusePublish is the daemon's policy on a publish the rules allow. A
// user at her bounds is refused as not permitted, not as unavailable: a
// client does not try again what only an unpublish makes pass.
func (s *Server) refusePublish(held, adding names.Held, req *plugin.PublishRequest) error {
	switch {
	case req.Persistence == plugin.PersistProc || req.Persistence == plugin.PersistApp:
		return plugin.Errorf(plugin.ErrNotSupported, "publish: names that end with their process or job are not supported across runs; publish for the run (the default) or until unpublished")
	case held.Names+adding.Names > s.opts.MaxNames:
		return plugin.Errorf(plugin.ErrPermission, "publish %q: %d names are published for this user on this node, the most one user may (gopmi daemon -max-names)", req.Data[0].Key, held.Names)
	case held.Bytes+adding.Bytes > s.opts.MaxNameBytes:
		return plugin.Errorf(plugin.ErrPermission, "publish %q: this user's names on this node hold %d of the %d bytes one user may (keys and values; gopmi daemon -max-name-bytes)",
			req.Data[0].Key, held.Bytes, s.opts.MaxNameBytes)
	}
	return nil
}

// namesChanged hands a change of the names to the state's writer.
func (s *Server) namesChanged(added, removed []names.Name) {
	if s.save != nil {
		s.save.put(added, removed)
	}
}

// Publish publishes names for the caller's user (see the policy above).
// Publishing again what a process already published, with the same
// value, succeeds (a call retried across a restart of the daemon).
func (s *Server) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	p, err := s.caller(ctx, "publish")
	if err != nil {
		return err
	}
	if err := s.names.Check(req); err != nil {
		return err
	}
	for _, d := range req.Data {
		if len(d.Key) > maxKey || len(d.Value) > maxValue {
			return plugin.Errorf(plugin.ErrInvalidArgument, "publish %q: names are at most %d bytes and values %d", d.Key[:min(len(d.Key), 64)], maxKey, maxValue)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.actingLocked(ctx, "publish", p, req.Proc)
	if err != nil {
		return err
	}
	return s.logRefusal(p, s.names.Publish(a, req))
}

// Lookup finds names of the caller's user, waiting with Wait (bounded by
// Timeout and ctx); a waiting lookup ends when the caller's job ends or
// the daemon stops.
func (s *Server) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	p, err := s.caller(ctx, "lookup")
	if err != nil {
		return nil, err
	}
	step := "lookup"
	var a names.Asker
	check := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return plugin.Errorf(plugin.ErrUnavailable, "%s: the node daemon is stopping", step)
		}
		var err error
		a, err = s.actingLocked(ctx, step, p, req.Proc)
		return err
	}
	if err := check(); err != nil {
		return nil, err
	}
	resp, err := s.names.Lookup(ctx, a, req, check)
	return resp, s.logRefusal(p, err)
}

// Unpublish removes names of the caller's user: with Keys each key (one
// not published is ErrNotFound), without every name req.Proc published.
// A job that ended may still unpublish.
func (s *Server) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	p, err := s.caller(ctx, "unpublish")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.jobOfLocked("unpublish", p, req.Proc)
	if err != nil && !errors.Is(err, plugin.ErrAborted) {
		return err
	}
	if err := s.actsForLocked(ctx, "unpublish", j); err != nil {
		return err
	}
	notFound, err := s.names.Unpublish(s.askerLocked(p, j, req.Proc), req)
	if err == nil && len(notFound) > 0 {
		err = names.NotFound(notFound)
	}
	return s.logRefusal(p, err)
}

// logRefusal logs err when it refuses p (ErrPermission, ErrUnavailable),
// once a minute for the same refusal, and returns it.
func (s *Server) logRefusal(p peer, err error) error {
	if errors.Is(err, plugin.ErrPermission) || errors.Is(err, plugin.ErrUnavailable) {
		s.logRefused(p, err)
	}
	return err
}
