package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
)

// EventRunEnded is the event a run sends (plugin.NotifyEvent, Source's
// nspace any of its jobs) when it ends cleanly: its jobs end and the names
// that lived as long as the run go at once, instead of after the grace a
// run that lost its connection gets.
const EventRunEnded plugin.EventCode = "gopmi.run-ended"

// RunConfig is what a run tells the daemon about itself in each
// Configure's Config, as JSON.
type RunConfig struct {
	// Run names the run (one `gopmi run`, with every job it spawned);
	// a run re-registers under the same name after the daemon restarts.
	Run string `json:"run"`
	// PID is the run's process (`gopmi run`).
	PID int `json:"pid,omitempty"`
	// Cmd is the job's command, for gopmi ps.
	Cmd string `json:"cmd,omitempty"`
	// Pids are the job's tasks' pids by rank, when known.
	Pids []int `json:"pids,omitempty"`
	// Started is when the run started the job: a job registered again
	// after the daemon restarted keeps its age.
	Started time.Time `json:"started,omitzero"`
	// Universe is where the run serves its universe (the local RM's link,
	// "unix://<path>"): the daemon relays other runs' connects and reads
	// of its jobs' keys there.
	Universe string `json:"universe,omitempty"`
}

// run is one registered run.
type run struct {
	id       string
	uid      uint32
	pid      int
	node     string      // the node whose daemon relayed it to this hub; "" here
	universe string      // where the run serves its universe (on its node)
	link     *link.Conn  // to it, dialled on first use; guarded by Server.mu
	conns    int         // connections that registered it and are open
	lost     time.Time   // when its last connection closed; zero while connected
	grace    func() bool // stops what ends it when the grace after lost passes
	ended    bool
}

// job is one registered job.
type job struct {
	info     plugin.JobInfo
	nodes    []plugin.Node     // its layout: the ranks of each node
	log      []plugin.LogEntry // oldest first, within maxLog and maxLogBytes
	logBytes int               // the text of log
	regBytes int               // what its registration holds (registrationSize)
}

// Bounds on the jobs one user may have registered (at a hub: from each
// node), counting those that ended within the hour gopmi ps -a shows them
// (the oldest of those goes to make room): a run holds one job, and each
// spawn one more. Root is bound by neither.
const (
	maxJobsPerUser     = 256
	maxJobBytesPerUser = 16 << 20
	maxCmd             = 4 << 10
)

// registrationSize is about what a job's registration holds in memory.
func registrationSize(req *plugin.ConfigureRequest, rc RunConfig) int {
	n := 256 + len(req.Job.Nspace) + len(rc.Run) + len(rc.Cmd) + len(rc.Universe) + 8*len(rc.Pids)
	for _, nd := range req.Job.Nodes {
		n += 32 + len(nd.Name) + 4*len(nd.Ranks)
	}
	return n
}

// admitJobLocked makes room for a registration of size bytes of uid's
// job k, or says why there is none. Called with mu held.
func (s *Server) admitJobLocked(p peer, uid uint32, k string, size int) error {
	if s.opts.unbounded(uid) {
		return nil
	}
	count, held := 0, 0
	var oldest string
	for key, j := range s.jobs {
		if j.info.UID != uid || key == k {
			continue
		}
		if r := s.runs[j.info.Run]; r != nil && r.node != p.node {
			continue // a hub bounds each node's users apart
		}
		count++
		held += j.regBytes
		if !j.info.Ended.IsZero() && (oldest == "" || j.info.Ended.Before(s.jobs[oldest].info.Ended)) {
			oldest = key
		}
	}
	if count >= maxJobsPerUser && oldest != "" {
		held -= s.jobs[oldest].regBytes
		delete(s.jobs, oldest)
		count--
	}
	switch {
	case count >= maxJobsPerUser:
		return s.refuse(p, plugin.ErrPermission, "register: %d jobs of %s are running on this node, the most one user may", count, userName(uid))
	case held+size > maxJobBytesPerUser:
		return s.refuse(p, plugin.ErrPermission, "register: the jobs of %s hold %d of the %d bytes one user may register on this node", userName(uid), held, maxJobBytesPerUser)
	}
	return nil
}

// running is a registered job's state while its run lives (JobInfo.State);
// an ended job's says why it ended.
const running = string(plugin.JobRunning)

// jobKey keys a job by its user: users' job names are theirs.
func jobKey(uid uint32, nspace string) string {
	return strconv.FormatUint(uint64(uid), 10) + "/" + nspace
}

// Configure registers a job of a run (RunConfig in req.Config): the
// caller's uid owns it. A run re-registers its jobs after the daemon
// restarts or its connection broke; another user cannot take over a run or
// a job.
func (s *Server) Configure(ctx context.Context, req *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	p, err := s.caller(ctx, "register")
	if err != nil {
		return nil, err
	}
	var rc RunConfig
	if err := json.Unmarshal(req.Config, &rc); err != nil || rc.Run == "" {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "register: config %q: want {\"run\": ...}", cut(string(req.Config), 256))
	}
	if err := req.Job.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.opts.checkRun(rc.Run, p); err != nil {
		return nil, s.refuse(p, plugin.ErrPermission, "register: %v", err)
	}
	r := s.runs[rc.Run]
	if r != nil && r.uid != p.uid {
		return nil, s.refuse(p, plugin.ErrPermission, "register: run %s belongs to %s", rc.Run, userName(r.uid))
	}
	uid := p.uid
	if r != nil {
		uid = r.uid
	}
	// A job is its user's: another user's job of the same name is another
	// job. One that ended may be replaced (a new run with a recycled pid).
	k := jobKey(uid, req.Job.Nspace)
	if j := s.jobs[k]; j != nil && j.info.Run != rc.Run && j.info.State == running {
		return nil, s.refuse(p, plugin.ErrAlreadyExists, "register: job %s belongs to run %s, which is running", req.Job.Nspace, j.info.Run)
	}
	rc.Cmd = cut(rc.Cmd, maxCmd)
	size := registrationSize(req, rc)
	if err := s.admitJobLocked(p, uid, k, size); err != nil {
		return nil, err
	}
	if r == nil {
		r = &run{id: rc.Run, uid: uid}
		s.runs[rc.Run] = r
	}
	// The pid is the kernel's word for who connected (gopmi run itself),
	// not the caller's; the node is where that kernel is (a run kept
	// from the state file after a restart of the hub learns it again).
	if p.pid > 0 {
		r.pid = int(p.pid)
	}
	r.node = p.node
	if rc.Universe != "" && rc.Universe != r.universe {
		r.universe = rc.Universe
		if r.link != nil {
			r.link.Close()
			r.link = nil
		}
	}
	if c := connOf(ctx); c != nil && c.attach(r) {
		r.conns++
		r.lost = time.Time{}
		context.AfterFunc(c.ctx, func() {
			if done, ok := s.crew.Enter(); ok {
				defer done()
				s.lostConn(r)
			}
		})
	}
	nodes := make([]string, 0, len(req.Job.Nodes))
	for _, n := range req.Job.Nodes {
		nodes = append(nodes, n.Name)
	}
	j := s.jobs[k]
	ev := s.log.Debug()
	if j == nil || j.info.Run != rc.Run {
		started := time.Now()
		if !rc.Started.IsZero() && rc.Started.Before(started) {
			started = rc.Started
		}
		j = &job{info: plugin.JobInfo{Nspace: req.Job.Nspace, Run: rc.Run, UID: r.uid, User: userName(r.uid), Started: started}}
		s.jobs[k] = j
		ev = s.log.Info()
		j.note("daemon", "info", fmt.Sprintf("registered by run %s (pid %d), %d ranks on %d nodes", rc.Run, r.pid, req.Job.Size, len(req.Job.Nodes)))
	} else if j.info.State != running {
		j.note("daemon", "info", "registered again after its connection came back")
	}
	j.info.PID, j.info.Cmd, j.info.Size, j.info.Nodes, j.info.State = r.pid, rc.Cmd, req.Job.Size, nodes, running
	j.nodes, j.regBytes = req.Job.Nodes, size
	if rc.Pids != nil {
		j.info.Pids = rc.Pids
	}
	if p.node != "" {
		ev = ev.Str("node", p.node)
	}
	ev.Str("job", req.Job.Nspace).Str("run", rc.Run).Str("user", j.info.User).Int32("size", req.Job.Size).Msg("job registered")
	s.broadcast()
	return &plugin.ConfigureResponse{}, nil
}

// lostConn is a registering connection's end: the run gets Grace to come
// back.
func (s *Server) lostConn(r *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.conns > 0 {
		r.conns--
	}
	if r.ended || r.conns > 0 || s.runs[r.id] != r {
		return
	}
	r.lost = time.Now()
	s.log.Info().Str("run", r.id).Dur("grace", s.opts.Grace).Msg("run's connection closed; keeping its jobs and names for the grace")
	s.expireLater(r)
	s.watchExit(r, r.lost)
}

// exitWatch bounds how long after its connection closed a run's process
// is watched for its end: a killed process closes its sockets before the
// kernel shows it exited, so one look at once can miss it.
const (
	exitWatch      = 2 * time.Second
	exitWatchEvery = 20 * time.Millisecond
)

// watchExit ends r as soon as its process is seen gone, within exitWatch
// of lost: a killed run is not coming back, and its peers hear it at once
// rather than after the grace, which is for a restart of the daemon.
// Called with mu held.
func (s *Server) watchExit(r *run, lost time.Time) {
	var check func()
	watching := func() bool {
		return !s.closed && !r.ended && r.conns == 0 && r.lost.Equal(lost) && s.runs[r.id] == r
	}
	check = func() {
		s.mu.Lock()
		if !watching() {
			s.mu.Unlock()
			return
		}
		node, pid, id := r.node, r.pid, r.id
		s.mu.Unlock()
		// A run on another node is looked at by that node's daemon: a
		// call that must not hold the lock.
		alive := s.runAlive(node, pid, id)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !watching() {
			return
		}
		if !alive {
			s.endRunLocked(r, fmt.Sprintf("lost: its process (pid %d) is gone", r.pid))
			return
		}
		if time.Since(lost) < exitWatch {
			s.crew.After(exitWatchEvery, check)
		}
	}
	s.crew.After(0, check)
}

// expireLater ends r once Grace passed without it coming back. Called with
// mu held.
func (s *Server) expireLater(r *run) {
	lost := r.lost
	if r.grace != nil {
		r.grace()
	}
	r.grace = s.crew.After(s.opts.Grace, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if cur := s.runs[r.id]; cur == r && r.conns == 0 && r.lost.Equal(lost) && !r.ended && !s.closed {
			s.endRunLocked(r, "lost: its connection closed and it did not come back within "+s.opts.Grace.String())
		}
	})
}

// endRunLocked ends a run's jobs and drops the names that lived as long
// as the run or one of its jobs.
func (s *Server) endRunLocked(r *run, why string) {
	r.ended = true
	if r.link != nil {
		r.link.Close()
		r.link = nil
	}
	now := time.Now()
	for _, j := range s.jobs {
		if j.info.Run == r.id && j.info.State == running {
			j.info.State, j.info.Ended = why, now
			j.note("daemon", "info", "ended: "+why)
			s.failFencesLocked(jobKey(j.info.UID, j.info.Nspace), plugin.Errorf(plugin.ErrAborted, "fence: job %s has ended (%s)", j.info.Nspace, why))
		}
	}
	s.names.Drop(func(n *names.Name) bool { return n.Tag == r.id && n.Persist != plugin.PersistIndefinite })
	s.log.Info().Str("run", r.id).Str("why", why).Msg("run ended")
	delete(s.runs, r.id)
	s.pruneLocked(now)
	s.broadcast()
}

// pruneLocked forgets jobs that ended more than an hour ago.
func (s *Server) pruneLocked(now time.Time) {
	for ns, j := range s.jobs {
		if !j.info.Ended.IsZero() && now.Sub(j.info.Ended) > time.Hour {
			delete(s.jobs, ns)
		}
	}
}

// NotifyEvent takes EventRunEnded from the run itself.
func (s *Server) NotifyEvent(ctx context.Context, req *plugin.EventRequest) error {
	if req.Code != EventRunEnded {
		return plugin.Errorf(plugin.ErrNotSupported, "event %q is not one the daemon takes", req.Code)
	}
	p, err := s.caller(ctx, "run end")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[jobKey(p.uid, req.Source.Nspace)]
	if j == nil {
		return plugin.Errorf(plugin.ErrNotFound, "run end: job %s is not registered", req.Source.Nspace)
	}
	if err := s.actsForLocked(ctx, "run end", j); err != nil {
		return err
	}
	if r := s.runs[j.info.Run]; r != nil {
		s.endRunLocked(r, "finished")
	}
	return nil
}

// jobOfLocked is the registered, running job of proc that p may act for.
func (s *Server) jobOfLocked(step string, p peer, proc plugin.Proc) (*job, error) {
	j := s.jobs[jobKey(p.uid, proc.Nspace)]
	switch {
	case j == nil:
		return nil, plugin.Errorf(plugin.ErrNotFound, "%s: job %s of %s is not registered with this node's daemon", step, proc.Nspace, userName(p.uid))
	case j.info.State != running:
		return j, plugin.Errorf(plugin.ErrAborted, "%s: job %s has ended (%s)", step, proc.Nspace, j.info.State)
	}
	return j, nil
}

// actsForLocked checks that the caller's connection registered j's run: a
// job's names and log are its run's. Two runs of one user whose jobs
// share a name (the same pid on two nodes of a hub) cannot act for each
// other; the second one's registration was refused.
func (s *Server) actsForLocked(ctx context.Context, step string, j *job) error {
	c, r := connOf(ctx), s.runs[j.info.Run]
	if c == nil || r == nil {
		return nil // the run ended: nothing left to act on
	}
	c.mu.Lock()
	ok := c.runs[r]
	c.mu.Unlock()
	if !ok {
		return plugin.Errorf(plugin.ErrPermission, "%s: job %s belongs to run %s, which did not register on this connection", step, j.info.Nspace, r.id)
	}
	return nil
}
