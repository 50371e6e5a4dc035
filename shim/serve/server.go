package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
)

// Options are what Start takes beyond the job's Config.
type Options struct {
	// Backend is the job's backend, up or still starting.
	Backend *bridge.Backend
	// Conns are the PMI_FD tasks' connections by rank; Start owns them.
	Conns map[int32]net.Conn
	// Port is the PMI_PORT listener, nil when no task uses PMI_PORT;
	// Start owns it.
	Port net.Listener
	// Logger receives the server's log; Start adds job= and node=.
	Logger zerolog.Logger
}

// Server serves PMI to the tasks of one job on one node: one reader and
// one writer goroutine per task connection, the PMI_PORT accept loop, and
// the bridge.Job that decides the answers.
type Server struct {
	cfg  *Config
	job  *bridge.Job
	log  zerolog.Logger
	port net.Listener // the PMI_PORT listener, or nil

	// readers counts the goroutines that feed the job: connection readers
	// and the accept loop. writers counts the connection writers.
	readers sync.WaitGroup
	writers sync.WaitGroup

	mu       sync.Mutex
	conns    []*taskConn         // guarded by mu; every connection ever attached
	byRank   map[int32]*taskConn // guarded by mu; PMI_FD connections
	budget   *portBudget         // guarded by mu; the open PMI_PORT connections
	portSeen int                 // guarded by mu; PMI_PORT connections accepted
	closing  bool                // guarded by mu; no new connections
}

// Start builds the job's PMI engine and serves every connection in o at
// once: a task's local requests need no backend, and those that do wait
// for it. On an error every connection is closed.
func Start(ctx context.Context, c *Config, o Options) (*Server, error) {
	log := o.Logger.With().Str("job", c.Job.Nspace).Int32("node", c.NodeID).Logger()
	job, err := bridge.NewJob(ctx, bridge.Config{
		Job:        c.Job,
		NodeID:     c.NodeID,
		Preput:     c.Preput,
		Attrs:      c.Attrs,
		Limits:     c.Limits,
		Timeouts:   c.bridgeTimeouts(),
		FenceMode:  c.FenceMode,
		PMIDebug:   c.PMIDebug,
		PortSecret: c.PortSecret,
		Backend:    o.Backend,
		// The bridge adds the job and node fields itself.
		Logger:  o.Logger,
		KVSHeld: kvsHeldHook(),
	})
	if err != nil {
		for _, conn := range o.Conns {
			_ = conn.Close()
		}
		if o.Port != nil {
			_ = o.Port.Close()
		}
		return nil, fmt.Errorf("%w: build the PMI engine: %w", ErrUsage, err)
	}
	s := &Server{cfg: c, job: job, log: log, byRank: map[int32]*taskConn{}, budget: newPortBudget(c.PortTasks())}
	var attachErr error
	for _, t := range c.Tasks {
		conn, ok := o.Conns[t.Rank]
		if !ok {
			continue // a PMI_PORT task
		}
		delete(o.Conns, t.Rank)
		if attachErr != nil {
			_ = conn.Close()
			continue
		}
		if err := s.attach(t.Rank, conn); err != nil {
			attachErr = fmt.Errorf("attach rank %d: %w", t.Rank, err)
		}
	}
	for r, conn := range o.Conns {
		log.Warn().Int32("rank", r).Msg("a connection for a rank that is not a task here; closing it")
		_ = conn.Close()
	}
	if attachErr != nil {
		if o.Port != nil {
			_ = o.Port.Close()
		}
		s.Fail(attachErr)
		s.shutdown()
		return nil, attachErr
	}
	if o.Port != nil {
		s.port = o.Port
		s.readers.Add(1)
		go s.acceptLoop(s.port)
	}
	return s, nil
}

// Job is the server's PMI engine.
func (s *Server) Job() *bridge.Job { return s.job }

// Fail ends the job from outside (its backend died, the host stops):
// every pending request is answered with err and Wait returns.
func (s *Server) Fail(err error) { s.job.Fail(err) }

// Wait serves until every task has finalized and closed its connection,
// or the job fails or is aborted, or ctx ends (which fails the job with
// ctx's cause); then it shuts down, losing no answer owed, within the
// shutdown time-out. The error says how the job ended on this node (see
// ExitCode); the log's last line is the caller's to write.
func (s *Server) Wait(ctx context.Context) error {
	s.wait(ctx)
	res := s.job.Result()
	if res.Aborted {
		s.awaitKill(ctx)
	}
	s.shutdown()
	switch {
	case res.Aborted:
		if res.Err != nil {
			return fmt.Errorf("%w: %w", ErrJobAborted, res.Err)
		}
		return fmt.Errorf("%w with status %d", ErrJobAborted, res.Status)
	case res.Err != nil && errors.Is(res.Err, ErrBackend):
		return res.Err
	case res.Err != nil && errors.Is(res.Err, plugin.ErrBackendGone):
		return fmt.Errorf("%w: %w", ErrBackend, res.Err)
	case res.Err != nil:
		return fmt.Errorf("%w: %w", ErrJobFailed, res.Err)
	}
	return nil
}

// awaitKill holds the task connections open after an abort until the
// tasks close them, ctx ends or the shutdown time-out passes: MPICH's
// PMI-1 client waits on its connection after sending abort, for the
// process manager to kill it, and a connection closed first makes its
// MPI_Abort return ("readline failed") and the program go on.
func (s *Server) awaitKill(ctx context.Context) {
	gone := make(chan struct{})
	go func() {
		s.readers.Wait()
		close(gone)
	}()
	t := time.NewTimer(s.cfg.Shutdown)
	defer t.Stop()
	select {
	case <-gone:
	case <-ctx.Done():
	case <-t.C:
	}
}

// Reason says in a few words how the job has ended, for a host's
// STOPPING status; "" while it runs.
func (s *Server) Reason() string {
	select {
	case <-s.job.Done():
	default:
		return ""
	}
	res := s.job.Result()
	switch {
	case res.Aborted:
		return fmt.Sprintf("job aborted with status %d", res.Status)
	case res.Err != nil:
		return res.Err.Error()
	}
	return "job finished"
}

// wait blocks until the job ends, failing it when ctx ends or a task has
// not connected within the connect time-out.
func (s *Server) wait(ctx context.Context) {
	var connectC <-chan time.Time
	if s.cfg.Connect > 0 {
		t := time.NewTimer(s.cfg.Connect)
		defer t.Stop()
		connectC = t.C
	}
	for {
		select {
		case <-s.job.Done():
			return
		case <-ctx.Done():
			s.job.Fail(fmt.Errorf("stopped: %w", context.Cause(ctx)))
			return
		case <-connectC:
			connectC = nil
			if err := s.checkConnected(); err != nil {
				s.log.Error().Err(err).Msg("failing the job")
				s.job.Fail(err)
				return
			}
		}
	}
}

// attach hands one PMI_FD connection to the bridge and starts its
// goroutines.
func (s *Server) attach(rank int32, conn net.Conn) error {
	tc := newTaskConn(conn, s.queueBytes(), s.log.With().Int32("rank", rank).Logger())
	sess, err := s.job.Attach(rank, tc)
	if err != nil {
		_ = conn.Close()
		return err
	}
	s.mu.Lock()
	s.conns = append(s.conns, tc)
	s.byRank[rank] = tc
	s.mu.Unlock()
	s.serveConn(tc, sess, nil)
	return nil
}

// queueBytes bounds one connection's unsent replies: a few of the longest
// lines the job allows.
func (s *Server) queueBytes() int {
	return max(minQueueBytes, 4*s.cfg.Limits.LineMax)
}

func (s *Server) serveConn(tc *taskConn, sess *bridge.Session, onExit func()) {
	s.writers.Add(1)
	go func() {
		defer s.writers.Done()
		tc.writeLoop()
	}()
	s.readers.Add(1)
	go func() {
		defer s.readers.Done()
		tc.readLoop(sess)
		if onExit != nil {
			onExit()
		}
	}()
}

// acceptLoop serves the PMI_PORT listener until the server shuts down.
func (s *Server) acceptLoop(l net.Listener) {
	defer s.readers.Done()
	var backoff *time.Timer
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends pass; retry soon unless shutting down.
			s.log.Warn().Err(err).Msg("pmi_port: accept")
			if backoff == nil {
				backoff = time.NewTimer(100 * time.Millisecond)
			} else {
				backoff.Reset(100 * time.Millisecond)
			}
			<-backoff.C
			continue
		}
		peer, source := portPeer(conn, "/proc")
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		pc, why := s.budget.admit(peer.Owner, source)
		if pc == nil {
			s.mu.Unlock()
			_ = conn.Close()
			s.refusePort(peer, why)
			continue
		}
		s.portSeen++
		// Attached under mu so that shutdown, which takes the list of
		// connections under mu, cannot miss this one. The bridge calls
		// only the taskConn's own methods, which never take s.mu.
		tc := newTaskConn(conn, s.queueBytes(), s.log.With().Str("conn", "pmi_port").Logger())
		sess := s.job.AttachPort(tc, peer)
		s.conns = append(s.conns, tc)
		if !pc.owner {
			s.awaitClaim(pc, tc, sess, peer)
		}
		s.mu.Unlock()
		s.serveConn(tc, sess, func() {
			s.mu.Lock()
			s.budget.leave(pc)
			s.mu.Unlock()
		})
	}
}

// checkConnected fails when a task has not spoken PMI within the connect
// time-out: a PMI_FD task that sent nothing, or fewer PMI_PORT
// connections than PMI_PORT tasks.
func (s *Server) checkConnected() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var silent []int32
	for r, tc := range s.byRank {
		if !tc.spoke.Load() {
			silent = append(silent, r)
		}
	}
	want := s.cfg.PortTasks()
	switch {
	case len(silent) > 0:
		return fmt.Errorf("connect: %s sent nothing within %v", plugin.RankList(silent), s.cfg.Connect)
	case s.portSeen < want:
		return fmt.Errorf("connect: %d of %d PMI_PORT tasks connected within %v", s.portSeen, want, s.cfg.Connect)
	}
	return nil
}

// shutdown ends everything within the shutdown time-out, in an order
// that loses no answer. The job has ended already (every caller fails it
// first), but answers may still be on their way: from a connection reader
// (a task's EOF failed the job and answers its peers) and from the job's
// backend calls (a fence the backend failed). So: stop feeding the job
// (readers and the accept loop end; sockets stay open for writing), then
// wait for the job's backend calls, then let each connection drain its
// queued answers and close.
func (s *Server) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Shutdown)
	defer cancel()
	// A no-op when the job has ended; it answers anything pending if not.
	s.job.Fail(fmt.Errorf("%w: shutting down", plugin.ErrAborted))

	s.mu.Lock()
	s.closing = true
	conns := append([]*taskConn(nil), s.conns...)
	s.mu.Unlock()
	if s.port != nil {
		_ = s.port.Close()
	}
	for _, tc := range conns {
		tc.stopReading()
	}
	// Readers return at once: their reads hit a past deadline.
	s.readers.Wait()

	if err := s.job.Shutdown(ctx); err != nil {
		s.log.Warn().Err(err).Msg("PMI engine did not stop in time")
	}

	for _, tc := range conns {
		if tc.unclosed != nil {
			tc.unclosed.Close(errStopped)
		}
		_ = tc.Close()
	}
	drained := make(chan struct{})
	go func() {
		s.writers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.log.Warn().Dur("timeout", s.cfg.Shutdown).Msg("task connections did not drain in time; closing them")
		for _, tc := range conns {
			tc.abort(net.ErrClosed)
		}
		<-drained
	}
}
