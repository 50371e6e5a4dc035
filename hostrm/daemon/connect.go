package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// Connect connects jobs of separately started runs of one user (PMI-2
// job-connect across runs): every job named must be registered by the
// caller's user and running. A connect is a call of one process, as in
// the universe: the ID depends on the jobs alone.
func (s *Server) Connect(ctx context.Context, req *plugin.ConnectRequest) (*plugin.ConnectResponse, error) {
	p, err := s.caller(ctx, "connect")
	if err != nil {
		return nil, err
	}
	nss, err := s.connectable(p, "connect", req.Procs)
	if err != nil {
		return nil, err
	}
	return &plugin.ConnectResponse{ID: "connect:" + strings.Join(nss, ",")}, nil
}

// Disconnect undoes a Connect: the same checks; nothing is counted here
// (each run's universe counts its own connects).
func (s *Server) Disconnect(ctx context.Context, req *plugin.DisconnectRequest) error {
	p, err := s.caller(ctx, "disconnect")
	if err != nil {
		return err
	}
	_, err = s.connectable(p, "disconnect", req.Procs)
	return err
}

// connectable checks that the jobs of procs are the caller's user's and
// running, and returns their namespaces, sorted.
func (s *Server) connectable(p peer, step string, procs []plugin.Proc) ([]string, error) {
	var nss []string
	for _, pr := range procs {
		nss = append(nss, pr.Nspace)
	}
	slices.Sort(nss)
	nss = slices.Compact(nss)
	if len(nss) < 2 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "%s: needs two jobs at least", step)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range nss {
		if _, err := s.jobOfLocked(step, p, plugin.Proc{Nspace: ns}); err != nil {
			return nil, err
		}
	}
	return nss, nil
}

// DirectModex reads a key of a job of another run of the caller's user:
// the daemon asks that run's universe. A job that ended, or whose run does
// not answer, fails at once: a reader is never left waiting on a job that
// is gone.
func (s *Server) DirectModex(ctx context.Context, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	p, err := s.caller(ctx, "direct modex")
	if err != nil {
		return nil, err
	}
	step := fmt.Sprintf("direct modex of %s", req.Proc)
	s.mu.Lock()
	j, err := s.jobOfLocked(step, p, req.Proc)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	r := s.runs[j.info.Run]
	if r == nil || r.universe == "" {
		s.mu.Unlock()
		return nil, plugin.Errorf(plugin.ErrUnavailable, "%s: run %s does not serve its jobs to other runs", step, j.info.Run)
	}
	c, addr, node, uid, pid := r.link, r.universe, r.node, r.uid, r.pid
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, req.TimeoutOrDefault())
	defer cancel()
	var resp *plugin.ModexResponse
	where := ""
	if node != "" {
		// The run's universe is a socket on its node: that node's
		// daemon reads it for the hub.
		resp, err = s.remoteModex(ctx, node, addr, uid, pid, req)
		where = " on node " + node
	} else {
		resp, err = s.universeModex(ctx, r, c, addr, uid, pid, req)
	}
	switch {
	case errors.Is(err, plugin.ErrPermission):
		return nil, s.refuse(p, plugin.ErrPermission, "%s: %v", step, err)
	case errors.Is(err, plugin.ErrUnavailable):
		return nil, plugin.Errorf(plugin.ErrAborted, "%s: run %s%s does not answer (it ended?): %v", step, j.info.Run, where, err)
	}
	return resp, err
}

// universeModex reads req from run r's universe on this node at addr,
// over c, r's link to it, or one dialled now (and kept in r while it
// lasts).
func (s *Server) universeModex(ctx context.Context, r *run, c *link.Conn, addr string, uid uint32, pid int, req *plugin.ModexRequest) (*plugin.ModexResponse, error) {
	c, err := s.universeConn(ctx, r, c, addr, uid, pid)
	if err != nil {
		return nil, err
	}
	return c.Backend().DirectModex(ctx, req)
}

// universeConn is c, or a link to run r's universe at addr dialled now
// (and kept in r while it lasts), whose server the kernel says is the
// run's process.
func (s *Server) universeConn(ctx context.Context, r *run, c *link.Conn, addr string, uid uint32, pid int) (*link.Conn, error) {
	if c != nil {
		return c, nil
	}
	stopping := plugin.Errorf(plugin.ErrUnavailable, "the node daemon is stopping")
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, stopping
	}
	// Dialled without the lock: no other call waits on this run.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, err := dialUniverse(dctx, addr, uid, pid)
	cancel()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		// Close closed the runs' links already: this one would outlive it.
		c.Close()
		return nil, stopping
	case r.link != nil:
		// Another call dialled first.
		c.Close()
		return r.link, nil
	case r.ended || r.universe != addr:
		c.Close()
		return nil, plugin.Errorf(plugin.ErrUnavailable, "run %s ended or moved its universe meanwhile", r.id)
	}
	r.link = c
	s.crew.Spawn(func(context.Context) {
		<-c.Done() // Close closes the runs' links first
		s.mu.Lock()
		if r.link == c {
			r.link = nil
		}
		s.mu.Unlock()
	})
	return c, nil
}

// dialUniverse connects to the universe a run said it serves at addr, and
// checks that the run's own process serves it (its uid and, when known,
// pid, from SO_PEERCRED): the daemon dials as root, and a run could name
// another user's universe to read that user's keys through it.
func dialUniverse(ctx context.Context, addr string, uid uint32, pid int) (*link.Conn, error) {
	path, ok := link.PrivatePath(addr)
	if !ok {
		return nil, plugin.Errorf(plugin.ErrPermission, "universe %q is not a run's private socket (unix://@gopmi-...)", addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, plugin.Errorf(plugin.ErrUnavailable, "dial %s: %v", addr, err)
	}
	cred, err := peercred.Of(c)
	switch {
	case err != nil:
		c.Close()
		return nil, plugin.Errorf(plugin.ErrPermission, "universe %s: who serves it: %v", addr, err)
	case cred.Uid != uid || (pid > 0 && int(cred.Pid) != pid):
		c.Close()
		return nil, plugin.Errorf(plugin.ErrPermission, "universe %s is served by uid %d pid %d, not by the run that named it (uid %d pid %d)", addr, cred.Uid, cred.Pid, uid, pid)
	}
	return link.NewConn(c), nil
}
