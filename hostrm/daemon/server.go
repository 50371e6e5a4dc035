package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/peercred"
)

// Query keys the daemon answers (plugin.Query), besides RFC0010's
// "namespaces" and "job-status" (qualifier "nspace"). Values are JSON.
const (
	// QueryPS is every job the caller may see: a JSON array of JobInfo.
	QueryPS = "gopmi.ps"
	// QueryNames is every published name the caller may see: a JSON
	// array of NameInfo.
	QueryNames = "gopmi.names"
	// QueryLog is what the caller's jobs logged and what the daemon noted
	// about them (qualifier "nspace": one job), oldest first: a JSON array
	// of LogEntry.
	QueryLog = "gopmi.log"
	// QueryProcTable is a job's processes (qualifier "nspace", default
	// the caller's job): a JSON array of ProcInfo, by rank.
	QueryProcTable = "proc-table"
	// QueryLocalPeers is the ranks of a job (qualifier "nspace") on a
	// node (qualifier "node", default the daemon's): comma-separated, as
	// PMIX_LOCAL_PEERS.
	QueryLocalPeers = "local-peers"
)

// ProcInfo is one process of a job, as proc-table shows it.
type ProcInfo struct {
	Rank int32  `json:"rank"`
	Node string `json:"node"`
	// PID is 0 while not known (the run had not started it when it
	// registered the job).
	PID int `json:"pid,omitempty"`
}

// LogEntry is one line of a job's log (gopmi log).
type LogEntry struct {
	Time time.Time `json:"time"`
	Job  string    `json:"job"`
	// From is "daemon" (the daemon's own note) or "run" (what the run
	// sent: how it ended).
	From string `json:"from"`
	// Kind is the run's key for the line ("status", "line"), or the
	// daemon's level.
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
}

// maxLog bounds each job's log.
const maxLog = 200

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

// JobInfo is one job as gopmi ps shows it.
type JobInfo struct {
	Nspace  string    `json:"nspace"`
	Run     string    `json:"run"`
	UID     uint32    `json:"uid"`
	User    string    `json:"user"`
	PID     int       `json:"pid"`
	Cmd     string    `json:"cmd,omitempty"`
	Size    int32     `json:"size"`
	Nodes   []string  `json:"nodes"`
	Pids    []int     `json:"pids,omitempty"`
	State   string    `json:"state"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// NameInfo is one published name as gopmi query shows it.
type NameInfo struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Publisher string `json:"publisher"`
	UID       uint32 `json:"uid"`
	Run       string `json:"run"`
	// Lasts says how long the name lives: "run" (until unpublished or the
	// publishing run ends), "job" (its job ends), "first-read", or
	// "unpublished" (until unpublished, across runs and restarts).
	Lasts string `json:"lasts"`
}

// name is one published name, as the state file keeps it.
type name struct {
	Key       string             `json:"key"`
	Value     string             `json:"value"`
	Publisher plugin.Proc        `json:"publisher"`
	UID       uint32             `json:"uid"`
	Run       string             `json:"run"`
	Persist   plugin.Persistence `json:"persist"`
}

// lasts names how long n lives; see NameInfo.Lasts.
func (n *name) lasts() string {
	switch n.Persist {
	case plugin.PersistProc, plugin.PersistApp:
		return "job"
	case plugin.PersistFirstRead:
		return "first-read"
	case plugin.PersistIndefinite:
		return "unpublished"
	default:
		return "run"
	}
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
	grace    *time.Timer // ends it when the grace after lost passes
	ended    bool
}

// job is one registered job.
type job struct {
	info  JobInfo
	nodes []plugin.Node // its layout: the ranks of each node
	log   []LogEntry    // oldest first, at most maxLog
}

// note appends an entry to j's log.
func (j *job) note(from, kind, msg string) {
	j.log = append(j.log, LogEntry{Time: time.Now(), Job: j.info.Nspace, From: from, Kind: kind, Msg: msg})
	if len(j.log) > maxLog {
		j.log = slices.Delete(j.log, 0, len(j.log)-maxLog)
	}
}

// Server is the node daemon's state: the runs and jobs registered with it
// and the name service they share. It is a plugin.Full served over the
// local RM's link (ServeConns with ConnContext), each call made by the
// connection's peer, whose uid owns what it registers and publishes.
type Server struct {
	plugin.Unimplemented

	opts Options
	log  zerolog.Logger

	mu      sync.Mutex
	names   []*name
	jobs    map[string]*job // by jobKey
	runs    map[string]*run
	changed chan struct{} // closed and replaced on every change
	closed  bool
	nodes   map[string]*nodeLink // guarded by mu; other nodes' own links, by node (a hub's)

	refused quietly // which refusals are logged; see refuse
	calls   counts  // relayed connections open, by node/uid (a hub's)
	shaking counts  // handshakes in progress, by host (a hub's)

	save *saver // writes the names outside mu; nil without a StateFile
}

// Options configure a Server.
type Options struct {
	// StateFile keeps the published names across restarts; "" keeps
	// them in memory only.
	StateFile string
	// Grace is how long a run whose connection closed keeps its jobs and
	// names, waiting for it to come back (a restart of the daemon looks
	// like this to every run). Default 30s.
	Grace time.Duration
	// Logger receives the daemon's lines; each refusal is one.
	Logger zerolog.Logger
	// Version is reported by GetInfo.
	Version string
	// OnChange is called, without locks held, after jobs or names
	// changed (sd_notify STATUS).
	OnChange func()

	// checkRun says whether the caller may register run; default
	// callerRun (tests replace it).
	checkRun func(run string, p peer) error
}

// NewServer returns a server, with the names StateFile kept. The runs that
// published them get Grace to come back before their run-long names go.
func NewServer(opts Options) (*Server, error) {
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.checkRun == nil {
		opts.checkRun = callerRun
	}
	s := &Server{opts: opts, log: opts.Logger, jobs: map[string]*job{}, runs: map[string]*run{}, changed: make(chan struct{})}
	if opts.StateFile != "" {
		names, err := loadNames(opts.StateFile)
		if err != nil {
			// The node's name service must come up: the names are lost,
			// the file is kept for whoever wants to look.
			aside := opts.StateFile + ".bad-" + time.Now().Format("20060102-150405")
			if rerr := os.Rename(opts.StateFile, aside); rerr != nil {
				return nil, fmt.Errorf("%w, and it cannot be moved aside: %w", err, rerr)
			}
			opts.Logger.Error().Err(err).Str("moved_to", aside).Msg("the state file cannot be read: starting with no names")
			names = nil
		}
		s.save = newSaver(opts.StateFile, opts.Logger)
		now := time.Now()
		for _, n := range names {
			if n.Persist == plugin.PersistIndefinite {
				continue
			}
			if r := s.runs[n.Run]; r == nil {
				r = &run{id: n.Run, uid: n.UID, lost: now}
				s.runs[n.Run] = r
				s.expireLater(r)
			}
		}
		s.names = names
	}
	return s, nil
}

// Close ends the waits in flight and the graces, and writes the names a
// last time; the server answers nothing more.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.changed)
		for _, r := range s.runs {
			if r.grace != nil {
				r.grace.Stop()
			}
		}
	}
	s.mu.Unlock()
	if s.save != nil {
		s.save.close()
	}
}

// Counts is what sd_notify's STATUS says: the jobs running and their
// processes.
func (s *Server) Counts() (jobs, procs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.jobs {
		if j.info.State == "running" {
			jobs++
			procs += int(j.info.Size)
		}
	}
	return jobs, procs
}

// broadcast wakes the waits, and saves the names when they changed.
// Called with mu held.
func (s *Server) broadcast(namesChanged bool) {
	if s.closed {
		return
	}
	close(s.changed)
	s.changed = make(chan struct{})
	if namesChanged && s.save != nil {
		s.save.put(slices.Clone(s.names)) // names are never changed in place
	}
	if s.opts.OnChange != nil {
		go s.opts.OnChange()
	}
}

// jobKey keys a job by its user: users' job names are theirs.
func jobKey(uid uint32, nspace string) string {
	return strconv.FormatUint(uint64(uid), 10) + "/" + nspace
}

// caller is who made the call; a call whose credentials the kernel did
// not give (not over the daemon's socket) is refused.
func (s *Server) caller(ctx context.Context, step string) (peer, error) {
	p, ok := peerOf(ctx)
	if !ok {
		s.log.Warn().Str("call", step).Msg("refused: a caller without credentials")
		return p, plugin.Errorf(plugin.ErrPermission, "%s: the caller's credentials are unknown", step)
	}
	return p, nil
}

// refuse logs a refusal and returns it as an error of kind. The same
// refusal of the same user is logged once a minute at most, with how many
// were not: a program that polls cannot flood the journal.
func (s *Server) refuse(p peer, kind error, format string, args ...any) error {
	err := plugin.Errorf(kind, format, args...)
	ok, notLogged := s.refused.news(strconv.FormatUint(uint64(p.uid), 10) + " " + err.Error())
	if !ok {
		return err
	}
	ev := s.log.Warn().Uint32("uid", p.uid).Int32("pid", p.pid).Str("user", userName(p.uid))
	if notLogged > 0 {
		ev = ev.Int("same_refusals_not_logged", notLogged)
	}
	ev.Msg("refused: " + err.Error())
	return err
}

// Bounds on what one user may put in the daemon.
const (
	maxNamesPerUser = 10000
	maxKey          = 256
	maxValue        = 64 << 10
)

// may reports whether p may see or change what uid owns: its owner and
// root.
func (p peer) may(uid uint32) bool { return p.uid == 0 || p.uid == uid }

func (s *Server) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "gopmi-daemon", Version: s.opts.Version, APIVersions: []string{plugin.APIVersion1},
		Capabilities: []string{plugin.CapPublish, plugin.CapQuery, plugin.CapConnect}}, nil
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
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "register: config %q: want {\"run\": ...}", req.Config)
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
	if j := s.jobs[k]; j != nil && j.info.Run != rc.Run && j.info.State == "running" {
		return nil, s.refuse(p, plugin.ErrAlreadyExists, "register: job %s belongs to run %s, which is running", req.Job.Nspace, j.info.Run)
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
		context.AfterFunc(c.ctx, func() { s.lostConn(r) })
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
		j = &job{info: JobInfo{Nspace: req.Job.Nspace, Run: rc.Run, UID: r.uid, User: userName(r.uid), Started: started}}
		s.jobs[k] = j
		ev = s.log.Info()
		j.note("daemon", "info", fmt.Sprintf("registered by run %s (pid %d), %d ranks on %d nodes", rc.Run, r.pid, req.Job.Size, len(req.Job.Nodes)))
	} else if j.info.State != "running" {
		j.note("daemon", "info", "registered again after its connection came back")
	}
	j.info.PID, j.info.Cmd, j.info.Size, j.info.Nodes, j.info.State = r.pid, rc.Cmd, req.Job.Size, nodes, "running"
	j.nodes = req.Job.Nodes
	if rc.Pids != nil {
		j.info.Pids = rc.Pids
	}
	if p.node != "" {
		ev = ev.Str("node", p.node)
	}
	ev.Str("job", req.Job.Nspace).Str("run", rc.Run).Str("user", j.info.User).Int32("size", req.Job.Size).Msg("job registered")
	s.broadcast(false)
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
			time.AfterFunc(exitWatchEvery, check)
		}
	}
	time.AfterFunc(0, check)
}

// expireLater ends r once Grace passed without it coming back. Called with
// mu held.
func (s *Server) expireLater(r *run) {
	lost := r.lost
	if r.grace != nil {
		r.grace.Stop()
	}
	r.grace = time.AfterFunc(s.opts.Grace, func() {
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
		if j.info.Run == r.id && j.info.State == "running" {
			j.info.State, j.info.Ended = why, now
			j.note("daemon", "info", "ended: "+why)
		}
	}
	before := len(s.names)
	s.names = slices.DeleteFunc(s.names, func(n *name) bool { return n.Run == r.id && n.Persist != plugin.PersistIndefinite })
	s.log.Info().Str("run", r.id).Str("why", why).Msg("run ended")
	delete(s.runs, r.id)
	s.pruneLocked(now)
	s.broadcast(len(s.names) != before)
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
	case j.info.State != "running":
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

// Publish publishes names for the whole node: every run of the
// publisher's user sees them. A name lives until it is unpublished or its
// run ends (the default, PersistSession), its first lookup
// (PersistFirstRead), or only until it is unpublished (PersistIndefinite,
// across runs and restarts). A name that lives as long as its process or
// job (PersistProc, PersistApp) is refused: the daemon does not hear of a
// job's end before its run's. Publishing again what a process already
// published, with the same value, succeeds (a call retried across a
// restart of the daemon).
func (s *Server) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	p, err := s.caller(ctx, "publish")
	if err != nil {
		return err
	}
	switch {
	case len(req.Data) == 0:
		return plugin.Errorf(plugin.ErrInvalidArgument, "publish: no names")
	case len(req.Info) > 0:
		return plugin.Errorf(plugin.ErrNotSupported, "publish: info key %q is not supported by the node daemon", req.Info[0].Key)
	case req.Persistence == plugin.PersistProc || req.Persistence == plugin.PersistApp:
		return plugin.Errorf(plugin.ErrNotSupported, "publish: names that end with their process or job are not supported across runs; publish for the run (the default) or until unpublished")
	case req.Persistence < plugin.PersistDefault || req.Persistence > plugin.PersistSession:
		return plugin.Errorf(plugin.ErrInvalidArgument, "publish: persistence %d", req.Persistence)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.jobOfLocked("publish", p, req.Proc)
	if err != nil {
		return err
	}
	if err := s.actsForLocked(ctx, "publish", j); err != nil {
		return err
	}
	var add []*name
	owned := 0
	for _, n := range s.names {
		if n.UID == j.info.UID {
			owned++
		}
	}
	for _, d := range req.Data {
		switch {
		case d.Key == "":
			return plugin.Errorf(plugin.ErrInvalidArgument, "publish: empty name")
		case len(d.Key) > maxKey || len(d.Value) > maxValue:
			return plugin.Errorf(plugin.ErrInvalidArgument, "publish %q: names are at most %d bytes and values %d", d.Key[:min(len(d.Key), 64)], maxKey, maxValue)
		case owned+len(add) >= maxNamesPerUser:
			return s.refuse(p, plugin.ErrUnavailable, "publish %q: %s has %d names published on this node, the most one user may", d.Key, userName(j.info.UID), maxNamesPerUser)
		}
		// Each user has a name space of their own: no user can take,
		// block or stand in for another's service.
		dup := false
		for _, o := range append(slices.Clone(s.names), add...) {
			if o.Key != d.Key || o.UID != j.info.UID {
				continue
			}
			if o.Publisher == req.Proc && o.Value == d.Value {
				dup = true // the same publish, retried
				break
			}
			return plugin.Errorf(plugin.ErrAlreadyExists, "publish: %q is already published by %s", d.Key, o.Publisher)
		}
		if !dup {
			add = append(add, &name{Key: d.Key, Value: d.Value, Publisher: req.Proc, UID: j.info.UID, Run: j.info.Run, Persist: req.Persistence})
		}
	}
	s.names = append(s.names, add...)
	s.broadcast(true)
	return nil
}

// findLocked returns uid's name key and its index, or nil, and whether
// another user has a name key.
func (s *Server) findLocked(uid uint32, key string) (int, *name, bool) {
	other := false
	for i, n := range s.names {
		if n.Key != key {
			continue
		}
		if n.UID == uid {
			return i, n, false
		}
		other = true
	}
	return -1, nil, other
}

// Lookup finds names, waiting with Wait (bounded by Timeout and ctx). A
// name another user published is refused, not shown.
func (s *Server) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	p, err := s.caller(ctx, "lookup")
	if err != nil {
		return nil, err
	}
	step := "lookup of " + strings.Join(req.Keys, ",")
	if len(req.Keys) == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "lookup: no keys")
	}
	timeout := req.TimeoutOrDefault()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrUnavailable, "%s: the node daemon is stopping", step)
		}
		j, err := s.jobOfLocked(step, p, req.Proc)
		if err == nil {
			err = s.actsForLocked(ctx, step, j)
		}
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		var found []plugin.Published
		var missing []string
		for _, k := range req.Keys {
			_, n, other := s.findLocked(p.uid, k)
			switch {
			case n != nil:
				found = append(found, plugin.Published{Key: k, Value: n.Value, Publisher: n.Publisher})
			case other && !req.Wait:
				s.mu.Unlock()
				return nil, s.refuse(p, plugin.ErrPermission, "%s: %q is published by another user", step, k)
			default:
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 || (!req.Wait && len(found) > 0) {
			first := func(n *name) bool {
				return n.Persist == plugin.PersistFirstRead && n.UID == p.uid && slices.Contains(req.Keys, n.Key)
			}
			if slices.ContainsFunc(s.names, first) {
				s.names = slices.DeleteFunc(s.names, first)
				s.broadcast(true)
			}
			s.mu.Unlock()
			return &plugin.LookupResponse{Data: found}, nil
		}
		if !req.Wait {
			s.mu.Unlock()
			return nil, plugin.Errorf(plugin.ErrNotFound, "%s: not published", step)
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return nil, plugin.Errorf(plugin.ErrTimeout, "lookup of %s: not published within %s", strings.Join(missing, ","), timeout)
		case <-ctx.Done():
			return nil, plugin.Errorf(plugin.ErrAborted, "%s: caller went away: %v", step, ctx.Err())
		}
	}
}

// Unpublish removes names: with Keys each key (another user's is refused,
// one not published is ErrNotFound), without every name req.Proc
// published.
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
	if len(req.Keys) == 0 {
		before := len(s.names)
		s.names = slices.DeleteFunc(s.names, func(n *name) bool { return n.Publisher == req.Proc && n.UID == j.info.UID })
		s.broadcast(len(s.names) != before)
		return nil
	}
	var drop []*name
	for _, k := range req.Keys {
		_, n, other := s.findLocked(p.uid, k)
		switch {
		case n == nil && other:
			return s.refuse(p, plugin.ErrPermission, "unpublish %q: published by another user", k)
		case n == nil:
			return plugin.Errorf(plugin.ErrNotFound, "unpublish %q: not published", k)
		}
		drop = append(drop, n)
	}
	s.names = slices.DeleteFunc(s.names, func(n *name) bool { return slices.Contains(drop, n) })
	s.broadcast(true)
	return nil
}

// Query answers QueryPS, QueryNames, "namespaces" and "job-status" with
// what the caller may see: its own jobs and names (root: all).
func (s *Server) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	p, err := s.caller(ctx, "query")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(time.Now())
	var jobs []JobInfo
	for _, j := range s.jobs {
		if p.may(j.info.UID) {
			jobs = append(jobs, j.info)
		}
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Started.Before(jobs[b].Started) })
	resp := &plugin.QueryResponse{}
	for _, q := range req.Queries {
		for _, k := range q.Keys {
			var v string
			switch k {
			case QueryPS:
				b, _ := json.Marshal(jobs)
				v = string(b)
			case QueryLog:
				out := []LogEntry{}
				want := qualifier(q.Qualifiers, "nspace", "")
				for _, j := range s.jobs {
					if p.may(j.info.UID) && (want == "" || j.info.Nspace == want) {
						out = append(out, j.log...)
					}
				}
				sort.SliceStable(out, func(a, b int) bool { return out[a].Time.Before(out[b].Time) })
				b, _ := json.Marshal(out)
				v = string(b)
			case QueryNames:
				out := []NameInfo{}
				for _, n := range s.names {
					if p.may(n.UID) {
						out = append(out, NameInfo{Key: n.Key, Value: n.Value, Publisher: n.Publisher.String(), UID: n.UID, Run: n.Run, Lasts: n.lasts()})
					}
				}
				b, _ := json.Marshal(out)
				v = string(b)
			case "namespaces":
				var ns []string
				for _, j := range jobs {
					ns = append(ns, j.Nspace)
				}
				v = strings.Join(ns, ",")
			case QueryProcTable, QueryLocalPeers:
				want := qualifier(q.Qualifiers, "nspace", req.Proc.Nspace)
				var j *job
				for _, c := range s.jobs {
					if c.info.Nspace == want && p.may(c.info.UID) && (j == nil || c.info.Started.After(j.info.Started)) {
						j = c
					}
				}
				if j == nil {
					continue
				}
				if k == QueryLocalPeers {
					here := p.node // the caller's node
					if here == "" {
						here, _ = os.Hostname()
					}
					node := qualifier(q.Qualifiers, "node", here)
					var ranks []string
					for _, n := range j.nodes {
						if n.Name == node {
							for _, r := range n.Ranks {
								ranks = append(ranks, strconv.Itoa(int(r)))
							}
						}
					}
					v = strings.Join(ranks, ",")
					break
				}
				procs := []ProcInfo{}
				for _, n := range j.nodes {
					for _, r := range n.Ranks {
						pi := ProcInfo{Rank: r, Node: n.Name}
						if int(r) < len(j.info.Pids) {
							pi.PID = j.info.Pids[r]
						}
						procs = append(procs, pi)
					}
				}
				sort.Slice(procs, func(a, b int) bool { return procs[a].Rank < procs[b].Rank })
				b, _ := json.Marshal(procs)
				v = string(b)
			case "job-status":
				want := qualifier(q.Qualifiers, "nspace", req.Proc.Nspace)
				i := slices.IndexFunc(jobs, func(j JobInfo) bool { return j.Nspace == want })
				if i < 0 {
					continue
				}
				v = jobs[i].State
			default:
				continue
			}
			resp.Results = append(resp.Results, plugin.Info{Key: k, Value: v})
		}
	}
	if len(resp.Results) == 0 {
		var keys []string
		for _, q := range req.Queries {
			keys = append(keys, q.Keys...)
		}
		if ns := qualifier(firstQualifiers(req), "nspace", req.Proc.Nspace); ns != "" {
			return nil, plugin.Errorf(plugin.ErrNotFound, "query %s: no job %s of %s is registered", strings.Join(keys, ","), ns, userName(p.uid))
		}
		return nil, plugin.Errorf(plugin.ErrNotFound, "query %s: not a key the node daemon answers (namespaces, %s, %s, %s, job-status, %s, %s)",
			strings.Join(keys, ","), QueryPS, QueryNames, QueryLog, QueryProcTable, QueryLocalPeers)
	}
	return resp, nil
}

// Log keeps what a run says about one of its jobs (how it ended) in that
// job's log, for gopmi log.
func (s *Server) Log(ctx context.Context, req *plugin.LogRequest) error {
	p, err := s.caller(ctx, "log")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.jobOfLocked("log", p, req.Proc)
	if err != nil && !errors.Is(err, plugin.ErrAborted) {
		return err
	}
	if err := s.actsForLocked(ctx, "log", j); err != nil {
		return err
	}
	for _, d := range req.Data {
		j.note("run", d.Key, d.Value)
	}
	return nil
}

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
	ctx, cancel := context.WithTimeout(ctx, modexTimeout(req))
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
	if c == nil {
		// Dialled without the lock: no other call waits on this run.
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		c, err = dialUniverse(dctx, addr, uid, pid)
		cancel()
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if r.link != nil || r.ended || r.universe != addr {
			// Another call dialled first, or the run changed meanwhile.
			s.mu.Unlock()
			defer c.Close()
		} else {
			r.link = c
			s.mu.Unlock()
			go func() {
				<-c.Done()
				s.mu.Lock()
				if r.link == c {
					r.link = nil
				}
				s.mu.Unlock()
			}()
		}
	}
	return c.Backend().DirectModex(ctx, req)
}

// modexTimeout bounds a read of another run's keys: the request's own
// time-out, else 30 s; a run that stopped answering fails the read.
func modexTimeout(req *plugin.ModexRequest) time.Duration {
	if req.Timeout > 0 {
		return req.Timeout
	}
	return 30 * time.Second
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

// firstQualifiers are the qualifiers of req's first query.
func firstQualifiers(req *plugin.QueryRequest) []plugin.Info {
	if len(req.Queries) == 0 {
		return nil
	}
	return req.Queries[0].Qualifiers
}

// qualifier is the value of key in qs, else def.
func qualifier(qs []plugin.Info, key, def string) string {
	for _, q := range qs {
		if q.Key == key {
			return q.Value
		}
	}
	return def
}

// String names a peer for messages.
func (p peer) String() string {
	if p.node != "" {
		return fmt.Sprintf("uid %d (%s), pid %d on node %s", p.uid, userName(p.uid), p.pid, p.node)
	}
	return fmt.Sprintf("uid %d (%s), pid %d", p.uid, userName(p.uid), p.pid)
}
