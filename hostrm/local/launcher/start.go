package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
)

// pmiPortFD names the PMI_PORT listener among the shim's inherited fds.
const pmiPortFD = "pmi-port"

// taskFDName names rank r's socket among its shim's inherited fds.
func taskFDName(r int32) string { return "rank" + strconv.Itoa(int(r)) }

// runJob is the launcher's record of one job's processes.
type runJob struct {
	spec      *local.JobSpec
	launching bool
	nodes     []*runNode
	tasks     []*runTask // by rank; nil until started
	running   int        // tasks started and not reaped
	procs     int        // tasks and servers started and not ended
	graced    bool       // the servers' grace period started
	failure   string
	ended     bool
	// startFailed: launch failed, and said why; its servers' ends are not
	// news of their own.
	startFailed bool
	// secret is the job's PMI_PORT secret (PMI_AUTH_SECRET); "" without
	// PMI_PORT.
	secret string
	// adopt is the singleton that is this job's rank 0, not started here.
	adopt *Singleton
	// rdvs are the nodes' PMIx rendezvous (rendezvous.go) still open:
	// closed once every task ended. Guarded by mu.
	rdvs []*rendezvous
}

type runTask struct {
	proc      plugin.Proc
	pid       int
	exited    bool
	signalled bool
}

// runNode is one node of a job and the server that serves its tasks: a
// gopmi-shim process, or the serving loop in this process.
type runNode struct {
	node   plugin.Node
	shim   *shimProc   // nil for a node served here
	here   *hereServer // nil for a node served by a shim
	exited chan struct{}
	// Once exited is closed:
	code      int    // the server's exit status (serve.ExitCode)
	how       string // how it ended, in words: "exited with status 3"
	why       string // the line that reports its failure
	signalled bool   // gopmi run stopped it
	hungUp    bool   // gopmi run told it every task ended (SIGHUP); guarded by mu
}

// stop asks the server to end: a shim gets sig, a node served here stops
// its serving loop whatever sig is. Called with mu held.
func (n *runNode) stop(sig syscall.Signal) {
	switch {
	case isClosed(n.exited):
	case n.shim != nil && n.shim.pid > 0 && !isZombie(n.shim.pid):
		n.signalled = true
		_ = syscall.Kill(n.shim.pid, sig)
	case n.here != nil:
		n.signalled = true
		n.here.stop()
	}
}

// hangup tells the node's PMIx server that every task of its node ended
// (SIGHUP). It is no stop: the server's exit status still counts.
func (n *runNode) hangup() {
	if !isClosed(n.exited) && n.shim != nil && n.shim.pmix && n.shim.pid > 0 && !isZombie(n.shim.pid) {
		n.hungUp = true
		_ = syscall.Kill(n.shim.pid, syscall.SIGHUP)
	}
}

// describe is the node's line in a dump. Called with mu held.
func (n *runNode) describe() string {
	st := "running"
	if isClosed(n.exited) {
		st = "ended with status " + strconv.Itoa(n.code)
	}
	if n.shim != nil {
		return fmt.Sprintf("node %d gopmi-shim pid %d %s", n.node.ID, n.shim.pid, st)
	}
	return fmt.Sprintf("node %d served here, %s", n.node.ID, st)
}

// nodeStart is what starting one node of a job needs.
type nodeStart struct {
	rn      *runNode
	servers []*os.File   // the server's ends by local index; nil with PMI_PORT
	clients []*os.File   // the tasks' ends, by local index; nil with PMI_PORT
	port    net.Listener // the PMI_PORT listener until its server takes it
	portAt  string       // its address, for the tasks' PMI_PORT
	rdv     *rendezvous  // the node's PMIx rendezvous, or nil
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
	if ns.port != nil {
		ns.port.Close()
	}
	ns.servers, ns.clients, ns.port = nil, nil, nil
}

// launch starts one job: for each node its server (a gopmi-shim, or the
// serving loop here) and its tasks; then it waits for every shim to be
// ready. It returns when every task started and every server serves, or
// an error after killing what it started. It is the universe's Launch
// hook for spawned jobs.
func (l *Launcher) launch(ctx context.Context, spec *local.JobSpec) (err error) {
	ns := spec.Job.Nspace
	cmd := ""
	if len(spec.Apps) > 0 {
		cmd = spec.Apps[0].Path
	}
	if l.cfg.OnJob != nil {
		l.cfg.OnJob(spec.Job, cmd, nil, l.universeAddr())
	}
	// Runs last, with no lock held: the job started whole.
	defer func() {
		if err != nil || l.cfg.OnJob == nil {
			return
		}
		pids := make([]int, spec.Job.Size)
		l.mu.Lock()
		for _, rj := range l.jobs {
			if rj.spec == spec {
				for r, t := range rj.tasks {
					if t != nil {
						pids[r] = t.pid
					}
				}
			}
		}
		l.mu.Unlock()
		l.cfg.OnJob(spec.Job, cmd, pids, l.universeAddr())
	}()
	ctx, cancel := context.WithTimeout(ctx, l.cfg.StartTimeout)
	defer cancel()
	rj := &runJob{spec: spec, launching: true, tasks: make([]*runTask, spec.Job.Size)}
	if l.face == facePort {
		rj.secret = newSecret()
	}
	l.mu.Lock()
	if l.terminating() || l.finished {
		l.mu.Unlock()
		return plugin.Errorf(plugin.ErrAborted, "start job %s: the run is ending", ns)
	}
	if l.cfg.Singleton != nil && !spec.Spawned && !l.adopted {
		l.adopted = true
		rj.adopt = l.cfg.Singleton
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
			if s.rn.shim != nil && s.rn.shim.pid == 0 {
				s.rn.shim.notify.close()
			}
		}
		rj.launching = false
		if err != nil {
			closeRendezvous(rj)
			rj.failure = err.Error()
			rj.startFailed = true
			// When a signal ended the run during the start, the
			// tear-down that follows stops tasks and servers as for any
			// job; otherwise nothing of a job that failed to start may
			// linger.
			if !l.terminating() {
				l.signalTasksLocked(rj, syscall.SIGKILL)
				l.signalServersLocked(rj, syscall.SIGKILL)
			}
		} else {
			// Servers that ended during the start were left to be
			// judged here, as any other.
			for _, s := range starts {
				if isClosed(s.rn.exited) {
					l.serverEndedLocked(rj, s.rn)
				}
			}
		}
		l.checkJobLocked(rj)
	}()

	for i, node := range spec.Job.Nodes {
		s, err := l.prepareNode(rj, node, i)
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
	// A node served here serves as soon as its server started.
	//
	// PMIx tasks wait for their servers instead: a PMIx client whose job
	// its node's server has not registered yet is refused at once, and
	// the tasks' environment comes with the server's READY.
	pmix := l.face.tasksAfterReady()
	l.start.do(func() {
		for _, s := range starts {
			if l.shims {
				err = l.startShim(rj, s)
			} else {
				err = l.startHere(rj, s)
			}
			if err != nil {
				return
			}
		}
		for _, s := range starts {
			if pmix {
				break
			}
			if err = l.startTasks(rj, s); err != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	for _, s := range starts {
		if s.rn.shim == nil {
			continue
		}
		if err := l.waitReady(ctx, rj, s); err != nil {
			return err
		}
	}
	if pmix {
		l.start.do(func() {
			for _, s := range starts {
				if err = l.startTasks(rj, s); err != nil {
					return
				}
			}
		})
		if err != nil {
			return err
		}
	}
	for _, s := range starts {
		if s.rdv != nil {
			go l.watchRendezvous(rj, s.rn, s.rdv)
			s.rdv = nil // the watcher's, closed with the job's tasks
		}
	}
	l.log.Debug().Str("job", ns).Int32("size", spec.Job.Size).Int("nodes", len(spec.Job.Nodes)).Msg("job started")
	return nil
}

// prepareNode makes a node's sockets: one socketpair per task, or one
// PMI_PORT listener.
func (l *Launcher) prepareNode(rj *runJob, node plugin.Node, index int) (*nodeStart, error) {
	s := &nodeStart{rn: &runNode{node: node, exited: make(chan struct{})}}
	l.mu.Lock()
	rj.nodes = append(rj.nodes, s.rn)
	l.mu.Unlock()
	switch l.face {
	case facePMIx:
		return s, nil // PMIx clients connect to their node's PMIx server
	case facePort:
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return s, fmt.Errorf("job %s node %d: pmi port listener: %w", rj.spec.Job.Nspace, node.ID, err)
		}
		s.port, s.portAt = ln, ln.Addr().String()
		return s, nil
	}
	for _, r := range node.Ranks {
		if rj.adopt != nil && r == 0 {
			// The singleton's connection is made; startHere takes it.
			s.servers = append(s.servers, nil)
			s.clients = append(s.clients, nil)
			continue
		}
		srv, cli, err := socketpair(taskFDName(r))
		if err != nil {
			return s, fmt.Errorf("job %s node %d: %w", rj.spec.Job.Nspace, node.ID, err)
		}
		s.servers = append(s.servers, srv)
		s.clients = append(s.clients, cli)
	}
	if l.rendezvous {
		return s, l.listenRendezvous(rj, s)
	}
	return s, nil
}

// bootstrap is the start-up message of node index of a job, for its
// gopmi-shim or, validated by serve.NewConfig, for the serving loop here:
// both serve a job from the same message.
func (l *Launcher) bootstrap(spec *local.JobSpec, index int, secret string) *shimv1.Bootstrap {
	j := spec.Job
	job := &shimv1.Job{Nspace: j.Nspace, Size: j.Size, UniverseSize: j.UniverseSize, Parent: j.Parent}
	for _, n := range j.Nodes {
		job.Nodes = append(job.Nodes, &shimv1.Node{Id: n.ID, Name: n.Name, Ranks: n.Ranks})
	}
	for _, a := range j.Apps {
		job.Apps = append(job.Apps, &shimv1.App{FirstRank: a.FirstRank, Size: a.Size, Cmd: a.Cmd})
	}
	for _, p := range spec.Preput {
		job.Preput = append(job.Preput, &shimv1.KeyValue{Key: p.Key, Value: p.Value})
	}
	node := j.Nodes[index]
	var tasks []*shimv1.Task
	for _, r := range node.Ranks {
		t := &shimv1.Task{Rank: r, FdName: l.face.taskFD(r)}
		tasks = append(tasks, t)
	}
	be := &shimv1.BackendConfig{Name: "local"}
	// With a node daemon, other runs may connect to this job and read its
	// keys: its data must reach the universe, so its backend starts at
	// once (on one node it would start only when a request needs it).
	be.StartAtOnce = l.cfg.Beyond != nil
	if l.shims {
		addr := l.universeAddr()
		config, _ := json.Marshal(forwarder.Config{Universe: addr})
		be.Path, be.Config, be.Args = l.rmPath, string(config), []string{"-universe", addr}
	}
	b := &shimv1.Bootstrap{
		Version: 1,
		Job:     job,
		NodeId:  node.ID,
		Tasks:   tasks,
		Backend: be,
		Limits:  &shimv1.Limits{ValMax: int32(l.cfg.MaxVal), KvsMax: l.cfg.MaxKVS},
		Timeouts: &shimv1.Timeouts{
			Fence: durationpb.New(l.cfg.FenceTimeout),
			// A server told to stop is killed after the grace period.
			Shutdown: durationpb.New(l.cfg.KillGrace),
		},
		FenceMode: l.fence,
		LogLevel:  l.cfg.LogLevel,
	}
	switch l.face {
	case facePort:
		b.PmiPortFd = pmiPortFD
		b.PmiPortSecret = secret
	case facePMIx:
		// A PMIx face brings its backend up at once: its clients' calls
		// come through libpmix, not through requests the shim reads.
		b.Pmix, be.StartAtOnce = true, true
	}
	return b
}

// serverEnded records a node's server's end and applies the failure
// policy, unless the job is still starting: launch judges it then.
func (l *Launcher) serverEnded(rj *runJob, n *runNode, code int, how, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if how == hangupDeath && n.hungUp {
		// Told that every task ended, it ended: a server that the
		// hangup caught before it could take it (its handler not yet
		// or no longer there) ended as asked, not failed.
		code, why = 0, ""
	}
	n.code, n.how, n.why = code, how, why
	close(n.exited)
	rj.procs--
	if !rj.launching && !rj.startFailed {
		l.serverEndedLocked(rj, n)
	}
	l.checkJobLocked(rj)
}

// serverEndedLocked applies the failure policy to a server that ended.
func (l *Launcher) serverEndedLocked(rj *runJob, n *runNode) {
	if n.code != 0 && n.code != serve.ExitJobFailed && n.code != serve.ExitAborted && !n.signalled && rj.failure == "" {
		rj.failure = "server of node " + strconv.Itoa(int(n.node.ID)) + " failed"
	}
	l.applyLocked(l.pol.serverExited(time.Now(), serverExit{code: n.code, line: n.why, byUs: n.signalled}))
}

// checkJobLocked moves a job on: once its last task exited, its servers
// get a grace period to end on their own, then SIGTERM, then SIGKILL;
// once every process is reaped the job ends, and with the last job the
// run.
func (l *Launcher) checkJobLocked(rj *runJob) {
	if rj.ended || rj.launching {
		return
	}
	if rj.running == 0 {
		// No task is left to come to a rendezvous.
		closeRendezvous(rj)
	}
	if rj.running == 0 && rj.procs > 0 && !rj.graced {
		rj.graced = true
		// A PMIx server waits for its clients' finalize, and cannot
		// tell a task that never connected (a program that is no PMIx
		// client) from one not started yet: it is told that every task
		// ended, and ends at once, cleanly.
		for _, n := range rj.nodes {
			n.hangup()
		}
		l.after(l.cfg.ShimGrace, func() {
			l.signalServersLocked(rj, syscall.SIGTERM)
			l.after(l.cfg.KillGrace, func() { l.signalServersLocked(rj, syscall.SIGKILL) })
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

// newSecret makes a job's PMI_PORT secret: 128 random bits in hex.
func newSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
