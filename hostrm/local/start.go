package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// pmiPortFD names the PMI_PORT listener among the shim's inherited fds.
const pmiPortFD = "pmi-port"

// taskFDName names rank r's socket among its shim's inherited fds.
func taskFDName(r int32) string { return "rank" + strconv.Itoa(int(r)) }

// nodeStart is what starting one node of a job needs.
type nodeStart struct {
	rn      *runNode
	servers []*os.File // the shim's ends (or the PMI_PORT listener)
	clients []*os.File // the tasks' ends, by local index; nil with PMI_PORT
	port    int        // PMI_PORT listener port
}

// notifier receives one shim's sd_notify datagrams for its whole life:
// READY=1 once its tasks are served, STATUS= with ERRNO= when it fails to
// start, STATUS= with STOPPING=1 when it ends.
type notifier struct {
	conn   *net.UnixConn
	ready  chan struct{} // closed on READY=1
	failed chan struct{} // closed on ERRNO=
	read   chan struct{} // closed when the reader goroutine returned
	log    zerolog.Logger

	mu     sync.Mutex
	status string // last STATUS=; guarded by mu
	errno  string // guarded by mu
}

func newNotifier(path string, log zerolog.Logger) (*notifier, error) {
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	n := &notifier{conn: conn, ready: make(chan struct{}), failed: make(chan struct{}), read: make(chan struct{}), log: log}
	go func() {
		defer close(n.read)
		buf := make([]byte, 4096)
		for {
			size, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			n.handle(buf[:size])
		}
	}()
	return n, nil
}

// handle applies one datagram.
func (n *notifier) handle(b []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "READY":
			if v == "1" && !isClosed(n.ready) {
				close(n.ready)
			}
		case "STATUS":
			n.status = v
			n.log.Debug().Str("status", v).Msg("shim status")
		case "ERRNO":
			n.errno = v
			if !isClosed(n.failed) {
				close(n.failed)
			}
		}
	}
}

// isClosed reports whether ch is closed; callers serialize closing.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (n *notifier) lastStatus() (status, errno string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.status, n.errno
}

// close ends the reader goroutine, after reading what is still queued:
// a shim that said READY=1 and exited at once must not look as if it
// never got ready.
func (n *notifier) close() {
	_ = n.conn.SetReadDeadline(time.Now())
	<-n.read
	_ = n.conn.SetReadDeadline(time.Time{})
	if rc, err := n.conn.SyscallConn(); err == nil {
		buf := make([]byte, 4096)
		_ = rc.Read(func(fd uintptr) bool {
			for {
				size, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
				if err != nil {
					return true // EAGAIN: nothing more
				}
				n.handle(buf[:size])
			}
		})
	}
	n.conn.Close()
}

func (ns *nodeStart) closeFiles() {
	for _, f := range ns.servers {
		if f != nil {
			f.Close()
		}
	}
	for _, f := range ns.clients {
		if f != nil {
			f.Close()
		}
	}
	ns.servers, ns.clients = nil, nil
}

// launch starts one job: one shim per node, each with its task sockets
// and bootstrap, and that node's tasks; then it waits for every shim to
// be ready. It returns when every task started and every shim is ready,
// or an error after killing what it started. It is the universe's Launch
// hook for spawned jobs.
func (l *Launcher) launch(ctx context.Context, spec *JobSpec) (err error) {
	ns := spec.Job.Nspace
	ctx, cancel := context.WithTimeout(ctx, l.cfg.StartTimeout)
	defer cancel()
	rj := &runJob{spec: spec, launching: true, tasks: make([]*runTask, spec.Job.Size)}
	l.mu.Lock()
	if l.terminating || l.finished {
		l.mu.Unlock()
		return errorf(plugin.ErrAborted, "start job %s: the run is ending", ns)
	}
	l.jobs = append(l.jobs, rj)
	l.live++
	l.mu.Unlock()

	starts := make([]*nodeStart, len(spec.Job.Nodes))
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, s := range starts {
			if s == nil {
				continue
			}
			s.closeFiles()
			if s.rn.pid == 0 && s.rn.notify != nil {
				s.rn.notify.close()
			}
		}
		rj.launching = false
		if err != nil {
			rj.failure = err.Error()
			// When a signal ended the run during the start, the
			// tear-down that follows signals tasks and shims as for any
			// job.
			if !l.terminating {
				l.failed = l.failed || !spec.Spawned
				// Nothing of a job that failed to start may linger.
				l.signalTasksLocked(rj, syscall.SIGKILL)
				l.signalShimsLocked(rj, syscall.SIGKILL)
			}
		} else {
			// reapShim left the shims that exited during the start to
			// be judged here, as it judges any other.
			for _, s := range starts {
				if s.rn.state != nil {
					l.shimExitedLocked(rj, s.rn)
				}
			}
		}
		l.checkJobLocked(rj)
	}()

	for i, node := range spec.Job.Nodes {
		s, err := l.prepareNode(rj, node)
		starts[i] = s
		if err != nil {
			return err
		}
	}
	// Every child is started on the starter's thread (see starter), in
	// one go. Tasks start while their shims are still coming up: their
	// sockets already exist, so a task's first PMI request waits in the
	// socket until the shim reads it, and process start-up, MPI library
	// loading and backend start-up overlap instead of adding up. A shim
	// that fails before READY still fails the launch, killing its tasks.
	l.start.do(func() {
		for _, s := range starts {
			if err = l.startShim(rj, s); err != nil {
				return
			}
		}
		for _, s := range starts {
			if err = l.startTasks(rj, s); err != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	for _, s := range starts {
		if err := l.waitReady(ctx, rj, s); err != nil {
			return err
		}
	}
	l.log.Debug().Str("job", ns).Int32("size", spec.Job.Size).Int("nodes", len(spec.Job.Nodes)).Msg("job started")
	return nil
}

// prepareNode makes a node's sockets: one socketpair per task (or one
// PMI_PORT listener) and the notify socket.
func (l *Launcher) prepareNode(rj *runJob, node plugin.Node) (*nodeStart, error) {
	s := &nodeStart{rn: &runNode{node: node, exited: make(chan struct{})}}
	l.mu.Lock()
	rj.nodes = append(rj.nodes, s.rn)
	l.mu.Unlock()
	if l.cfg.PMIPort {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return s, fmt.Errorf("job %s node %d: pmi port listener: %w", rj.spec.Job.Nspace, node.ID, err)
		}
		f, err := ln.File()
		s.port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if err != nil {
			return s, fmt.Errorf("job %s node %d: pmi port listener: %w", rj.spec.Job.Nspace, node.ID, err)
		}
		s.servers = []*os.File{f}
	} else {
		for _, r := range node.Ranks {
			srv, cli, err := socketpair(taskFDName(r))
			if err != nil {
				return s, fmt.Errorf("job %s node %d: %w", rj.spec.Job.Nspace, node.ID, err)
			}
			s.servers = append(s.servers, srv)
			s.clients = append(s.clients, cli)
		}
	}
	l.mu.Lock()
	path := filepath.Join(l.dir, "n"+strconv.Itoa(l.seq))
	l.seq++
	l.mu.Unlock()
	n, err := newNotifier(path, l.log.With().Str("job", rj.spec.Job.Nspace).Int32("node", node.ID).Logger())
	if err != nil {
		return s, fmt.Errorf("job %s node %d: notify socket: %w", rj.spec.Job.Nspace, node.ID, err)
	}
	s.rn.notify = n
	return s, nil
}

// bootstrap builds the shim's start-up message for one node.
func (l *Launcher) bootstrap(rj *runJob, s *nodeStart) ([]byte, error) {
	j := rj.spec.Job
	job := &shimv1.Job{Nspace: j.Nspace, Size: j.Size, UniverseSize: j.UniverseSize, Parent: j.Parent}
	for _, n := range j.Nodes {
		job.Nodes = append(job.Nodes, &shimv1.Node{Id: n.ID, Name: n.Name, Ranks: n.Ranks})
	}
	for _, a := range j.Apps {
		job.Apps = append(job.Apps, &shimv1.App{FirstRank: a.FirstRank, Size: a.Size, Cmd: a.Cmd})
	}
	for _, p := range rj.spec.Preput {
		job.Preput = append(job.Preput, &shimv1.KeyValue{Key: p.Key, Value: p.Value})
	}
	var tasks []*shimv1.Task
	for _, r := range s.rn.node.Ranks {
		t := &shimv1.Task{Rank: r}
		if !l.cfg.PMIPort {
			t.FdName = taskFDName(r)
		}
		tasks = append(tasks, t)
	}
	config, err := json.Marshal(ForwarderConfig{Universe: l.addr})
	if err != nil {
		return nil, err
	}
	mode := map[string]shimv1.FenceMode{
		FenceModeCollect: shimv1.FenceMode_FENCE_MODE_COLLECT,
		FenceModeLazy:    shimv1.FenceMode_FENCE_MODE_LAZY,
		FenceModeModex:   shimv1.FenceMode_FENCE_MODE_MODEX,
	}[l.cfg.FenceMode]
	b := &shimv1.Bootstrap{
		Version: 1,
		Job:     job,
		NodeId:  s.rn.node.ID,
		Tasks:   tasks,
		Backend: &shimv1.BackendConfig{
			Name:   "local",
			Path:   l.rmPath,
			Config: string(config),
			Args:   []string{"-universe", l.addr},
		},
		Limits:    &shimv1.Limits{ValMax: int32(l.cfg.MaxVal)},
		Timeouts:  &shimv1.Timeouts{Fence: durationpb.New(l.cfg.FenceTimeout)},
		FenceMode: mode,
		LogLevel:  l.cfg.LogLevel,
	}
	if l.cfg.PMIPort {
		b.PmiPortFd = pmiPortFD
	}
	return protojson.Marshal(b)
}

// startShim starts one node's gopmi-shim (on the starter's thread) and closes the launcher's copies
// of the shim's ends.
func (l *Launcher) startShim(rj *runJob, s *nodeStart) error {
	ns := rj.spec.Job.Nspace
	names := make([]string, 0, len(s.servers))
	if l.cfg.PMIPort {
		names = append(names, pmiPortFD)
	} else {
		for _, r := range s.rn.node.Ranks {
			names = append(names, taskFDName(r))
		}
	}
	env := childEnv(os.Environ())
	if os.Getenv("GOPMI_LOG_FORMAT") == "" {
		env = append(env, "GOPMI_LOG_FORMAT=console")
	}
	env = append(env,
		EnvUniverse+"="+l.addr,
		"LISTEN_FDS="+strconv.Itoa(len(s.servers)),
		"LISTEN_FDNAMES="+strings.Join(names, ":"),
		"NOTIFY_SOCKET="+s.rn.notify.conn.LocalAddr().String(),
	)
	s.rn.tail = &tailWriter{w: l.out, quiet: &l.quiet}
	cmd := &exec.Cmd{
		Path: l.shimPath,
		Args: []string{ShimBinary},
		Env:  env,
		Dir:  l.dir,
		// The bootstrap is built on exec's stdin goroutine, while the
		// tasks start: the shim reads it only once its runtime is up.
		Stdin: &lazyReader{make: func() ([]byte, error) {
			b, err := l.bootstrap(rj, s)
			if err != nil {
				l.log.Error().Err(err).Str("job", ns).Int32("node", s.rn.node.ID).Msg("bootstrap")
			}
			return b, err
		}},
		Stdout:     l.out,
		Stderr:     s.rn.tail,
		ExtraFiles: s.servers,
		// Its own process group: a terminal's ^C reaches the tasks, and
		// gopmi run decides when the shims go.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   time.Second,
	}
	if err := startChild(cmd); err != nil {
		return fmt.Errorf("start %s for job %s node %d: %w", l.shimPath, ns, s.rn.node.ID, err)
	}
	for _, f := range s.servers {
		f.Close()
	}
	s.servers = nil
	l.mu.Lock()
	s.rn.pid = cmd.Process.Pid
	rj.procs++
	if l.terminating {
		l.signalShimsLocked(rj, syscall.SIGKILL)
	}
	l.mu.Unlock()
	l.log.Debug().Str("job", ns).Int32("node", s.rn.node.ID).Int("pid", cmd.Process.Pid).Msg("shim started")
	go l.reapShim(rj, s.rn, cmd)
	return nil
}

// waitReady waits for the shim's READY=1, its failure (ERRNO=, or an
// exit), or ctx.
func (l *Launcher) waitReady(ctx context.Context, rj *runJob, s *nodeStart) error {
	what := fmt.Sprintf("%s for job %s node %d", ShimBinary, rj.spec.Job.Nspace, s.rn.node.ID)
	n := s.rn.notify
	why := func() string {
		status, errno := n.lastStatus()
		if errno != "" {
			errno = "errno " + errno
		}
		return firstNonEmpty(status, s.rn.tail.lastLine(), errno, "no message")
	}
	select {
	case <-n.ready:
		return nil
	case <-n.failed:
		return fmt.Errorf("%s failed to start: %s", what, why())
	case <-s.rn.exited:
		// Tasks start before their shim is ready, so a short job's shim
		// may serve it and exit before READY is read here: a clean exit
		// is not a failed start.
		if isClosed(n.ready) || (s.rn.state != nil && s.rn.state.Success()) {
			return nil
		}
		_, _, how := exitInfo(s.rn.state)
		return fmt.Errorf("%s %s before it was ready: %s", what, how, why())
	case <-l.ending:
		return errorf(plugin.ErrAborted, "%s: the run is ending", what)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s was not ready in time: %s", what, why())
		}
		return fmt.Errorf("%s: start cancelled: %w", what, ctx.Err())
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// startTasks starts one node's tasks (on the starter's thread).
func (l *Launcher) startTasks(rj *runJob, s *nodeStart) error {
	j := rj.spec.Job
	base := childEnv(os.Environ())
	base = append(base, l.cfg.Env...)
	nlocal := strconv.Itoa(len(s.rn.node.Ranks))
	for i, r := range s.rn.node.Ranks {
		app := l.appOf(rj, r)
		env := append(append([]string(nil), base...), app.Env...)
		env = append(env,
			"PMI_RANK="+strconv.Itoa(int(r)),
			"PMI_SIZE="+strconv.Itoa(int(j.Size)),
			"PMI_JOBID="+j.Nspace,
			"MPI_LOCALNRANKS="+nlocal,
			"MPI_LOCALRANKID="+strconv.Itoa(i),
		)
		if rj.spec.Spawned {
			env = append(env, "PMI_SPAWNED=1")
		}
		cmd := &exec.Cmd{
			Path:   app.Path,
			Args:   append([]string{app.Path}, app.Args...),
			Env:    env,
			Dir:    app.Dir,
			Stdout: l.cfg.Stdout,
			Stderr: l.cfg.Stderr,
			// Output that is not a file is copied through a pipe: a
			// process the task left behind must not hold its reaping up.
			WaitDelay: time.Second,
		}
		if l.cfg.PMIPort {
			cmd.Env = append(cmd.Env, "PMI_PORT=127.0.0.1:"+strconv.Itoa(s.port), "PMI_ID="+strconv.Itoa(int(r)))
		} else {
			cmd.Env = append(cmd.Env, "PMI_FD=3")
			cmd.ExtraFiles = []*os.File{s.clients[i]}
		}
		if r == 0 && !rj.spec.Spawned && l.cfg.Stdin != nil {
			cmd.Stdin = l.cfg.Stdin
		}
		err := startChild(cmd)
		if s.clients != nil {
			s.clients[i].Close()
			s.clients[i] = nil
		}
		if err != nil {
			return fmt.Errorf("start rank %d of job %s (%s): %w", r, j.Nspace, app.Path, err)
		}
		p := plugin.Proc{Nspace: j.Nspace, Rank: r}
		t := &runTask{proc: p, pid: cmd.Process.Pid}
		l.mu.Lock()
		rj.tasks[r] = t
		rj.running++
		rj.procs++
		if l.terminating {
			l.signalTask(t, syscall.SIGKILL)
		}
		l.mu.Unlock()
		l.u.TaskStarted(p, t.pid)
		if l.onTaskStart != nil {
			l.onTaskStart(p, t.pid)
		}
		go l.reapTask(rj, t, cmd)
	}
	return nil
}

// appOf finds the app a rank belongs to.
func (l *Launcher) appOf(rj *runJob, r int32) AppSpec {
	first := int32(0)
	for _, a := range rj.spec.Apps {
		if r < first+a.Procs {
			return a
		}
		first += a.Procs
	}
	return rj.spec.Apps[len(rj.spec.Apps)-1]
}

// reapTask waits for a task and applies the failure policy.
func (l *Launcher) reapTask(rj *runJob, t *runTask, cmd *exec.Cmd) {
	_ = wait(cmd)
	ps := cmd.ProcessState
	status, state, how := exitInfo(ps)
	l.u.TaskExited(t.proc, state)
	l.mu.Lock()
	defer l.mu.Unlock()
	t.exited = true
	rj.running--
	rj.procs--
	if !ps.Success() && !t.signalled {
		// A failure gopmi run did not cause: report it and end the run,
		// after failureSettle.
		if l.failedStatus == nil {
			l.failedStatus = make(map[plugin.Proc]int)
		}
		l.failedStatus[t.proc] = status
		if l.taskStatus < 0 || (l.rootCause != nil && *l.rootCause == t.proc) {
			l.taskStatus = status
		}
		if rj.failure == "" {
			rj.failure = fmt.Sprintf("rank %d %s", t.proc.Rank, how)
		}
		l.pending = append(l.pending, pendingLine{proc: t.proc, line: fmt.Sprintf("gopmi: rank %d (job %s) %s", t.proc.Rank, t.proc.Nspace, how), signaled: status > 128 && ps.ExitCode() < 0})
		l.settleLocked()
	}
	l.checkJobLocked(rj)
}

// reapShim waits for a shim; a shim that fails on its own fails the run.
func (l *Launcher) reapShim(rj *runJob, n *runNode, cmd *exec.Cmd) {
	_ = wait(cmd)
	n.notify.close()
	l.mu.Lock()
	defer l.mu.Unlock()
	n.state = cmd.ProcessState
	close(n.exited)
	rj.procs--
	if !rj.launching {
		// Otherwise launch, once done, judges the exit or the failed
		// start.
		l.shimExitedLocked(rj, n)
	}
	l.checkJobLocked(rj)
}

// shimExitedLocked applies the failure policy to a reaped shim: a shim
// that failed on its own fails the run.
func (l *Launcher) shimExitedLocked(rj *runJob, n *runNode) {
	if n.state.Success() || n.signalled {
		return
	}
	if code := n.state.ExitCode(); code == shimExitJobFailed || code == shimExitAborted {
		// The shim reports what a task did (an early exit, an abort);
		// the task's own exit or the abort, arriving within
		// failureSettle, is the news.
		l.failed = true
		l.pending = append(l.pending, pendingLine{line: l.shimFailureLine(rj, n), shim: true})
		l.settleLocked()
		return
	}
	l.shimFailedLocked(rj, n)
}

// settleLocked reports the pending failure lines and ends the run after
// failureSettle, so that the failure's cause, not its echoes, is the news.
func (l *Launcher) settleLocked() {
	l.after(failureSettle, func() {
		l.flushLocked()
		l.terminateLocked(syscall.SIGTERM)
	})
}

// The shim's exit statuses for a job that failed or was aborted by a task
// (package shim's ExitJobFailed and ExitAborted; hostrm may not import it).
const (
	shimExitJobFailed = 4
	shimExitAborted   = 5
)

// shimFailedLocked reports a shim that failed on its own. While the run
// is already ending its exit is a consequence, not news.
func (l *Launcher) shimFailedLocked(rj *runJob, n *runNode) {
	if l.terminating {
		return
	}
	l.printf("%s", l.shimFailureLine(rj, n))
	if rj.failure == "" {
		rj.failure = "shim of node " + strconv.Itoa(int(n.node.ID)) + " failed"
	}
	l.failed = true
	l.terminateLocked(syscall.SIGTERM)
}

// shimFailureLine says why a shim failed: its last STATUS= or log line,
// and how it exited.
func (l *Launcher) shimFailureLine(rj *runJob, n *runNode) string {
	_, _, how := exitInfo(n.state)
	msg := how
	status, _ := n.notify.lastStatus()
	if last := firstNonEmpty(status, n.tail.lastLine()); last != "" {
		msg = last + " (" + how + ")"
	}
	return fmt.Sprintf("gopmi: %s for job %s node %d failed: %s", ShimBinary, rj.spec.Job.Nspace, n.node.ID, msg)
}

// checkJobLocked moves a job on: once its last task exited, its shims get
// a grace period to exit on their own, then SIGTERM, then SIGKILL; once
// every process is reaped the job ends, and with the last job the run.
func (l *Launcher) checkJobLocked(rj *runJob) {
	if rj.ended || rj.launching {
		return
	}
	if rj.running == 0 && rj.procs > 0 && !rj.graced {
		rj.graced = true
		l.after(l.cfg.ShimGrace, func() {
			l.signalShimsLocked(rj, syscall.SIGTERM)
			l.after(l.cfg.KillGrace, func() { l.signalShimsLocked(rj, syscall.SIGKILL) })
		})
	}
	if rj.procs > 0 {
		return
	}
	rj.ended = true
	l.u.EndJob(rj.spec.Job.Nspace, rj.failure)
	l.log.Debug().Str("job", rj.spec.Job.Nspace).Str("failure", rj.failure).Msg("job ended")
	if l.onJobEnd != nil {
		l.onJobEnd(rj.spec.Job.Nspace)
	}
	l.live--
	if l.live == 0 && !l.finished {
		l.finished = true
		close(l.done)
	}
}

// lazyReader makes its content on the first Read.
type lazyReader struct {
	make func() ([]byte, error)
	r    *bytes.Reader
	err  error
}

func (z *lazyReader) Read(p []byte) (int, error) {
	if z.r == nil && z.err == nil {
		b, err := z.make()
		z.r, z.err = bytes.NewReader(b), err
	}
	if z.err != nil {
		return 0, z.err
	}
	return z.r.Read(p)
}
