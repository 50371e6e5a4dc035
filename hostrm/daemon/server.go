package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/crew"
	"github.com/gopmi/gopmi/plugin/names"
	"github.com/gopmi/gopmi/plugin/wake"
)

// Server is the node daemon's state: the runs and jobs registered with it
// (registry.go), the name service they share (names.go), the jobs' logs
// (joblog.go), the answers to queries (query.go), the relaying of calls
// to other runs' universes (connect.go) and, on a hub, the other nodes'
// links (hub.go). It is a plugin.Full served over the local RM's link
// (ServeConns with ConnContext), each call made by the connection's peer,
// whose uid owns what it registers and publishes.
type Server struct {
	plugin.Unimplemented

	opts Options
	log  zerolog.Logger

	mu      sync.Mutex
	jobs    map[string]*job        // by jobKey; guarded by mu
	runs    map[string]*run        // guarded by mu
	closed  bool                   // guarded by mu
	nodes   map[string]*nodeLink   // guarded by mu; other nodes' own links, by node (a hub's)
	fences  map[string]*crossFence // fences across runs, by participants and ID; guarded by mu
	changed wake.Cond              // woken on every change of runs, jobs and names

	names *names.Service // one name space per user (its own lock)

	refused quietly // which refusals are logged; see refuse
	calls   counts  // relayed connections open, by node/uid (a hub's)
	conns   counts  // local connections open, by uid (root's uncounted)
	budget  budgets // what callers' unanswered calls hold (serve.go)

	refusing atomic.Int32 // connections being told why they are refused
	shaking  counts       // handshakes in progress, by host or local user (a hub's; handshaker)
	// shakingRoot is shaking for root's connections (from privileged ports).
	shakingRoot counts
	crew        *crew.Crew // the goroutines and timers Close waits for

	save *saver // writes the names outside mu; nil without a StateFile
}

// DefaultGrace is how long a run whose connection closed keeps its jobs
// and names by default (gopmi daemon -grace).
const DefaultGrace = 30 * time.Second

// Options configure a Server.
type Options struct {
	// StateFile keeps the published names across restarts; "" keeps
	// them in memory only.
	StateFile string
	// Grace is how long a run whose connection closed keeps its jobs and
	// names, waiting for it to come back (a restart of the daemon looks
	// like this to every run). Default DefaultGrace.
	Grace time.Duration
	// Logger receives the daemon's lines; each refusal is one.
	Logger zerolog.Logger
	// Version is reported by GetInfo.
	Version string
	// MaxNames and MaxNameBytes bound what one user may publish on the
	// node: names, and their keys' and values' bytes; default
	// DefaultMaxNames and DefaultMaxNameBytes.
	MaxNames     int
	MaxNameBytes int
	// OnChange is called, without locks held, after jobs or names
	// changed (sd_notify STATUS).
	OnChange func()

	// checkRun says whether the caller may register run; default
	// callerRun (tests replace it).
	checkRun func(run string, p peer) error
	// unbounded says whether uid's connections are held to no bounds
	// (serve.go); default root's (tests bound root too).
	unbounded func(uid uint32) bool
}

// NewServer returns a server, with the names StateFile kept. The runs that
// published them get Grace to come back before their run-long names go.
func NewServer(opts Options) (*Server, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.MaxNames <= 0 {
		opts.MaxNames = DefaultMaxNames
	}
	if opts.MaxNameBytes <= 0 {
		opts.MaxNameBytes = DefaultMaxNameBytes
	}
	if opts.checkRun == nil {
		opts.checkRun = callerRun
	}
	if opts.unbounded == nil {
		opts.unbounded = func(uid uint32) bool { return uid == 0 }
	}
	s := &Server{opts: opts, log: opts.Logger, jobs: map[string]*job{}, runs: map[string]*run{}, crew: crew.New(nil)}
	var kept []names.Name
	if opts.StateFile != "" {
		var (
			err  error
			torn bool
		)
		kept, torn, err = loadNames(opts.StateFile)
		if err != nil {
			// The node's name service must come up: the names are lost,
			// the files are kept for whoever wants to look.
			suffix := ".bad-" + time.Now().Format("20060102-150405")
			for _, f := range []string{opts.StateFile, journalOf(opts.StateFile)} {
				if rerr := os.Rename(f, f+suffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					return nil, fmt.Errorf("%w, and %s cannot be moved aside: %w", err, f, rerr)
				}
			}
			opts.Logger.Error().Err(err).Str("moved_aside", "*"+suffix).Msg("the state cannot be read: starting with no names")
			kept = nil
		}
		if torn {
			opts.Logger.Warn().Str("file", journalOf(opts.StateFile)).Msg("the state journal's last line was cut short (the daemon was killed as it wrote it): that change is lost")
		}
		s.save = newSaver(opts.StateFile, kept, opts.Logger)
	}
	s.names = names.New(names.Options{Host: "the node daemon", RealmNoun: "user", Retries: true, RealmUnpublishes: true, Refuse: s.refusePublish, Changes: &s.changed, OnChange: s.namesChanged})
	s.names.Load(kept)
	now := time.Now()
	for _, n := range kept {
		if n.Persist == plugin.PersistIndefinite {
			continue
		}
		if r := s.runs[n.Tag]; r == nil {
			r = &run{id: n.Tag, uid: realmUID(n.Realm), lost: now}
			s.runs[n.Tag] = r
			s.expireLater(r)
		}
	}
	return s, nil
}

// Close ends the waits in flight and the graces, waits for the server's
// own goroutines and timers, and writes the names a last time; the server
// answers nothing more.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.failFencesLocked("", plugin.Errorf(plugin.ErrAborted, "fence: the node daemon is closing"))
	for _, r := range s.runs {
		if r.link != nil {
			r.link.Close()
		}
	}
	s.mu.Unlock()
	s.changed.Close()
	s.crew.Close()
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

// broadcast wakes the waits and tells OnChange. Called with mu held.
func (s *Server) broadcast() {
	if s.closed {
		return
	}
	s.changed.Broadcast()
	if s.opts.OnChange != nil {
		s.crew.Spawn(func(context.Context) { s.opts.OnChange() })
	}
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
	s.logRefused(p, err)
	return err
}

// logRefused logs a refusal of p, as refuse does.
func (s *Server) logRefused(p peer, err error) {
	ok, notLogged := s.refused.news(strconv.FormatUint(uint64(p.uid), 10) + " " + err.Error())
	if !ok {
		return
	}
	ev := s.log.Warn().Uint32("uid", p.uid).Int32("pid", p.pid).Str("user", userName(p.uid))
	if notLogged > 0 {
		ev = ev.Int("same_refusals_not_logged", notLogged)
	}
	ev.Msg("refused: " + err.Error())
}

// Bounds on what one user may put in the daemon: the defaults of
// Options.MaxNames and MaxNameBytes (an MPI port name is some 100 bytes:
// 10,000 of them are 1 MiB), and each name's key and value.
const (
	DefaultMaxNames     = 10000
	DefaultMaxNameBytes = 4 << 20
	maxKey              = 256
	maxValue            = 64 << 10
)

// may reports whether p may see or change what uid owns: its owner and
// root.
func (p peer) may(uid uint32) bool { return p.uid == 0 || p.uid == uid }

func (s *Server) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "gopmi-daemon", Version: s.opts.Version, APIVersions: []string{plugin.APIVersion1, plugin.APIVersion11},
		Capabilities: []string{plugin.CapPublish, plugin.CapQuery, plugin.CapConnect}}, nil
}
