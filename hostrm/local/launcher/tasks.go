package launcher

// A job's tasks: started on their node's PMI sockets, reaped, and their ends
// weighed against the job.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
)

// startTasks starts one node's tasks (on the starter's thread).
func (l *Launcher) startTasks(rj *runJob, s *nodeStart) error {
	j := rj.spec.Job
	// Open MPI's direct-launch variable (or, with a rendezvous, the PMIx
	// environment) comes before what the user set, which may override it.
	base := append(childEnv(os.Environ()), openMPIDirectLaunch)
	if s.rdv != nil {
		base = append(base, l.rendezvousEnv(rj, s)...)
	}
	base = append(base, l.cfg.Env...)
	nlocal := strconv.Itoa(len(s.rn.node.Ranks))
	if l.face.pmix() {
		return l.startPMIxTasks(rj, s, base)
	}
	for i, r := range s.rn.node.Ranks {
		if rj.adopt != nil && r == 0 {
			l.adoptTask(rj, plugin.Proc{Nspace: j.Nspace, Rank: r})
			continue
		}
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
		if s.rdv != nil {
			env = append(env, "PMIX_RANK="+strconv.Itoa(int(r)))
		}
		cmd := l.taskCmd(rj, r, app, env)
		if l.face == facePort {
			cmd.Env = append(cmd.Env, "PMI_PORT="+s.portAt, "PMI_ID="+strconv.Itoa(int(r)), "PMI_AUTH_SECRET="+rj.secret)
		} else {
			cmd.Env = append(cmd.Env, "PMI_FD=3")
			cmd.ExtraFiles = []*os.File{s.clients[i]}
		}
		out, err := l.startTask(cmd, r)
		if s.clients != nil {
			s.clients[i].Close()
			s.clients[i] = nil
		}
		if err != nil {
			return fmt.Errorf("start rank %d of job %s (%s): %w", r, j.Nspace, app.Path, err)
		}
		t := l.taskStarted(rj, plugin.Proc{Nspace: j.Nspace, Rank: r}, cmd.Process.Pid)
		go l.reapTask(rj, t, cmd, out)
	}
	return nil
}

// taskStarted records a running task of rj, which the caller watches for
// its end (reapTask, adoptTask).
func (l *Launcher) taskStarted(rj *runJob, p plugin.Proc, pid int) *runTask {
	t := &runTask{proc: p, pid: pid}
	l.mu.Lock()
	rj.tasks[p.Rank] = t
	rj.running++
	rj.procs++
	if l.terminating() {
		l.signalTask(t, syscall.SIGKILL)
	}
	l.mu.Unlock()
	l.u.TaskStarted(p, pid)
	if l.onTaskStart != nil {
		l.onTaskStart(p, pid)
	}
	return t
}

// taskCmd is rank r's process, of app, with env: the job's first rank of
// the run reads gopmi run's stdin. Its output is startTask's.
func (l *Launcher) taskCmd(rj *runJob, r int32, app local.AppSpec, env []string) *exec.Cmd {
	cmd := &exec.Cmd{
		Path: app.Path,
		Args: append([]string{app.Path}, app.Args...),
		Env:  env,
		Dir:  app.Dir,
	}
	if r == 0 && !rj.spec.Spawned && l.cfg.Stdin != nil {
		cmd.Stdin = l.cfg.Stdin
	}
	return cmd
}

// startTask starts rank r's cmd with its stdout and stderr forwarded to
// gopmi run's, a whole line at a time (labelled with -l).
func (l *Launcher) startTask(cmd *exec.Cmd, r int32) (*output, error) {
	out, err := newOutput()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out.child[0], out.child[1]
	if err := startChild(cmd); err != nil {
		out.closeAll()
		return nil, err
	}
	out.forward(l.cfg.Stdout.(*sink), l.cfg.Stderr.(*sink), r, l.cfg.Label)
	return out, nil
}

// appOf finds the app a rank belongs to.
func (l *Launcher) appOf(rj *runJob, r int32) local.AppSpec {
	first := int32(0)
	for _, a := range rj.spec.Apps {
		if r < first+a.Procs {
			return a
		}
		first += a.Procs
	}
	return rj.spec.Apps[len(rj.spec.Apps)-1]
}

// reapTask waits for a task and its output, and applies the failure
// policy.
func (l *Launcher) reapTask(rj *runJob, t *runTask, cmd *exec.Cmd, out *output) {
	_ = wait(cmd)
	// What it wrote is out before gopmi says anything of its end.
	out.drain()
	ps := cmd.ProcessState
	status, state, how := exitInfo(ps)
	ex := taskExit{
		proc: t.proc, status: status, how: how, ok: ps.Success(),
		signaled: status > 128 && ps.ExitCode() < 0,
	}
	l.mu.Lock()
	lazy := lazyPMIxServed(rj, l.nodeOf(rj, t.proc.Rank))
	l.mu.Unlock()
	switch st := l.u.ProcState(t.proc); {
	case !ex.ok && !l.face.pmix() && !l.rendezvous && (st == "pending" || st == "started"):
		// It never initialized PMI: gopmi may know why.
		ex.hint = l.hints.pmixProgram(cmd.Path)
	case (l.face.endsSeenHere() || lazy) && st == "connected":
		// A PMI task's server sees its connection close before finalize;
		// a PMIx task's end is seen here: the job fails as for PMI.
		err := l.u.NotifyEvent(context.Background(), &plugin.EventRequest{Code: plugin.EventProcAborted, Source: t.proc,
			Info: []plugin.Info{{Key: "reason", Value: "ended before PMIx_Finalize (" + how + ")"}}})
		if err != nil {
			l.log.Warn().Err(err).Str("proc", t.proc.String()).Msg("report a task that ended before PMIx_Finalize")
		}
	}
	l.taskEnded(rj, t, ex, state)
}

// taskEnded records a task's end and applies the failure policy.
func (l *Launcher) taskEnded(rj *runJob, t *runTask, ex taskExit, state string) {
	l.u.TaskExited(t.proc, state)
	l.mu.Lock()
	defer l.mu.Unlock()
	t.exited = true
	rj.running--
	rj.procs--
	if !ex.ok && !t.signalled && rj.failure == "" {
		rj.failure = fmt.Sprintf("rank %d %s", t.proc.Rank, ex.how)
	}
	ex.byUs = t.signalled
	l.applyLocked(l.pol.taskExited(time.Now(), ex))
	l.checkJobLocked(rj)
}
