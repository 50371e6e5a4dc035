package launcher

import (
	"fmt"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/serve"
)

// failureSettle is how long a failure waits before it is reported and
// ends the run: an aborting task often exits before its abort request
// reaches the universe, and a task that closes its PMI connection is
// reported by its server before its own exit is reaped; then the abort
// or the exit, not its echo, is the news.
const failureSettle = 100 * time.Millisecond

// policy decides what the events of a run mean for its user: which lines
// are printed, when the run ends and with what exit status. It does no
// I/O, keeps no clock and takes no lock: the launcher feeds it events
// under its own lock, each with the time it happened, carries out the
// effects it returns, and calls tick when due says.
//
// The rules:
//   - The first abort is printed at once and ends the run; its status is
//     the run's. But an abort that follows another task's own failure is
//     how MPI reacts to that failure (a peer's collective or MPI_Init
//     failed): it is held as an echo and the failure stays the news.
//   - A signal to gopmi run is printed and ends the run with 128+signal;
//     a second one while the run ends kills everything at once.
//   - A task that fails on its own (a non-zero exit or a signal that
//     gopmi run did not send), a task its server reports gone before
//     finalize, and a server that reports its job failed (exit 4) or
//     aborted (exit 5) are held for failureSettle, then printed and end
//     the run. A server's report is an echo: it is dropped when a task's
//     own failure or an abort explains it. A report of a task gone before
//     finalize is dropped when the task's signal says more, or when a
//     signal ended the run (a terminal's ^C reaches the tasks too).
//   - Any other server failure is printed at once and ends the run.
//   - The exit status: the abort's; else 128+signal of a signal to gopmi
//     run; else the status of the task its server reported gone first,
//     or else of the first failing task; else 1 for any other failure;
//     else 0.
type policy struct {
	settle time.Duration

	ending       bool              // the run is being torn down
	abort        *local.AbortEvent // the first abort
	signal       syscall.Signal    // the signal that ended the run
	taskStatus   int               // the status the run takes from a task; -1 if none
	failedStatus map[plugin.Proc]int
	rootCause    *plugin.Proc // the task its server reported gone first
	failed       bool         // a failure that is not a task's own
	pending      []pendingLine
	due          time.Time // when the pending lines are reported; zero if none
	hinted       bool      // a task's hint was held: one is enough
}

// pendingLine is a failure waiting for its settle time.
type pendingLine struct {
	proc     plugin.Proc
	line     string
	signaled bool // the task was killed by a signal
	early    bool // a server's report of a task gone before finalize
	echo     bool // a server's report that its job failed or was aborted
}

// effects is what the launcher does after an event.
type effects struct {
	// print are lines for stderr, in order.
	print []string
	// end, when not zero, ends the run: the tasks get this signal
	// (SIGINT first, then SIGTERM, for SIGINT) and the servers SIGTERM,
	// then everything SIGKILL after the grace period.
	end syscall.Signal
	// kill kills every process at once.
	kill bool
	// sigterm are processes to SIGTERM before the run ends (an abort's
	// targets; RankWildcard means a whole job).
	sigterm []plugin.Proc
}

func newPolicy() *policy {
	return &policy{settle: failureSettle, taskStatus: -1}
}

// taskExit is how a task ended.
type taskExit struct {
	proc   plugin.Proc
	status int    // gopmi run's status for it: the code, or 128+signal
	how    string // "exited with status 3", "was killed by signal 9 (killed)"
	ok     bool   // exit status 0
	// byUs: gopmi run signalled it (the run was ending, or it was an
	// abort's target): not news.
	byUs     bool
	signaled bool // it was killed by a signal
	// hint explains a failure gopmi can tell the cause of (a program
	// that speaks PMIx), in a line of its own after the task's; the
	// first one of the run is printed.
	hint string
}

// taskExited applies a task's end.
func (p *policy) taskExited(now time.Time, e taskExit) effects {
	if e.ok || e.byUs {
		return effects{}
	}
	if p.failedStatus == nil {
		p.failedStatus = make(map[plugin.Proc]int)
	}
	p.failedStatus[e.proc] = e.status
	if p.taskStatus < 0 || (p.rootCause != nil && *p.rootCause == e.proc) {
		p.taskStatus = e.status
	}
	p.hold(now, pendingLine{proc: e.proc, signaled: e.signaled,
		line: fmt.Sprintf("gopmi: rank %d (job %s) %s", e.proc.Rank, e.proc.Nspace, e.how)})
	if e.hint != "" && !p.hinted {
		p.hinted = true
		p.hold(now, pendingLine{proc: e.proc, signaled: e.signaled, line: e.hint})
	}
	return effects{}
}

// procFailed applies a server's report that a task ended before
// finalize.
func (p *policy) procFailed(now time.Time, proc plugin.Proc, reason string) effects {
	if p.ending {
		return effects{}
	}
	p.failed = true
	if p.rootCause == nil {
		p.rootCause = &proc
		if st, ok := p.failedStatus[proc]; ok {
			p.taskStatus = st
		}
	}
	p.hold(now, pendingLine{proc: proc, early: true,
		line: fmt.Sprintf("gopmi: rank %d (job %s) failed: %s", proc.Rank, proc.Nspace, reason)})
	return effects{}
}

// aborted applies an abort: the first one decides, unless another task
// had failed on its own before it.
func (p *policy) aborted(now time.Time, ev local.AbortEvent) effects {
	if p.abort != nil {
		return effects{}
	}
	line := fmt.Sprintf("gopmi: job %s rank %d aborted (exit %d)", ev.Proc.Nspace, ev.Proc.Rank, uint8(ev.Status))
	if ev.Message != "" {
		line = fmt.Sprintf("gopmi: job %s rank %d aborted: %s (exit %d)", ev.Proc.Nspace, ev.Proc.Rank, ev.Message, uint8(ev.Status))
	}
	targets := ev.Targets
	if len(targets) == 0 {
		targets = []plugin.Proc{{Nspace: ev.Proc.Nspace, Rank: plugin.RankWildcard}}
	}
	if p.otherFailed(ev.Proc) {
		p.hold(now, pendingLine{line: line, echo: true})
		if p.ending {
			return effects{}
		}
		fx := p.end(syscall.SIGTERM)
		fx.sigterm = targets
		return fx
	}
	p.abort = &ev
	fx := p.end(syscall.SIGTERM)
	fx.print = append([]string{line}, fx.print...)
	fx.sigterm = targets
	return fx
}

// otherFailed reports whether a task other than proc has failed on its
// own (exited badly, or left before finalize).
func (p *policy) otherFailed(proc plugin.Proc) bool {
	if p.rootCause != nil && *p.rootCause != proc {
		return true
	}
	for q := range p.failedStatus {
		if q != proc {
			return true
		}
	}
	return false
}

// serverExit is how a node's server ended: a gopmi-shim process, or the
// serving loop of a job gopmi run served itself.
type serverExit struct {
	code int    // the shim's exit status (serve.ExitCode)
	line string // the line that reports it
	byUs bool   // gopmi run stopped it
}

// serverExited applies a server's end. Exits 4 and 5 report what a task
// did; the task's own end or the abort is the news.
func (p *policy) serverExited(now time.Time, e serverExit) effects {
	if e.code == 0 || e.byUs {
		return effects{}
	}
	if e.code == serve.ExitJobFailed || e.code == serve.ExitAborted {
		p.failed = true
		p.hold(now, pendingLine{line: e.line, echo: true})
		return effects{}
	}
	if p.ending {
		return effects{}
	}
	p.failed = true
	fx := p.end(syscall.SIGTERM)
	fx.print = append([]string{e.line}, fx.print...)
	return fx
}

// startFailed applies the failed start of the run's first job.
func (p *policy) startFailed(err error) effects {
	var fx effects
	if !p.ending {
		fx.print = []string{"gopmi: " + err.Error()}
	}
	p.failed = true
	end := p.end(syscall.SIGTERM)
	fx.end = end.end
	return fx
}

// signalled applies a signal to gopmi run (not SIGUSR1).
func (p *policy) signalled(sig syscall.Signal) effects {
	if p.ending {
		if p.signal != 0 || sig == syscall.SIGINT {
			return effects{print: []string{fmt.Sprintf("gopmi: %s again, killing every process", signalName(sig))}, kill: true}
		}
		return effects{}
	}
	p.signal = sig
	fx := p.end(sig)
	fx.print = append([]string{fmt.Sprintf("gopmi: got SIG%s, ending the run", signalName(sig))}, fx.print...)
	return fx
}

// nextTick says when tick is due; ok is false when nothing waits.
func (p *policy) nextTick() (at time.Time, ok bool) {
	return p.due, !p.due.IsZero()
}

// tick reports the pending failures once their settle time has passed,
// and ends the run.
func (p *policy) tick(now time.Time) effects {
	if p.due.IsZero() || now.Before(p.due) {
		return effects{}
	}
	p.due = time.Time{}
	lines := p.flush()
	fx := p.end(syscall.SIGTERM)
	fx.print = append(lines, fx.print...)
	return fx
}

// status reports what is still pending and gives the run's exit status.
func (p *policy) status() (lines []string, status int) {
	lines = p.flush()
	switch {
	case p.abort != nil:
		return lines, int(uint8(p.abort.Status))
	case p.signal != 0:
		return lines, 128 + int(p.signal)
	case p.taskStatus >= 0:
		return lines, p.taskStatus
	case p.failed:
		return lines, 1
	}
	return lines, 0
}

// hold queues a failure for the next report.
func (p *policy) hold(now time.Time, l pendingLine) {
	p.pending = append(p.pending, l)
	if p.due.IsZero() {
		p.due = now.Add(p.settle)
	}
}

// end starts the run's end, once.
func (p *policy) end(sig syscall.Signal) effects {
	if p.ending {
		return effects{}
	}
	p.ending = true
	return effects{end: sig}
}

// flush returns the pending lines worth printing: not the line of a task
// whose abort was printed, not a task's early-exit report when its
// signal says more, not a server's echo when a task's own line or an
// abort explains it, and not the death of tasks by the signal that ended
// the run (a terminal's ^C reaches them too).
func (p *policy) flush() []string {
	killed := make(map[plugin.Proc]bool)
	tasks := false
	for _, l := range p.pending {
		if l.signaled {
			killed[l.proc] = true
		}
		tasks = tasks || !l.echo
	}
	var out []string
	for _, l := range p.pending {
		switch {
		case p.abort != nil && p.abort.Proc == l.proc && !l.echo:
		case l.early && killed[l.proc]:
		case l.echo && (tasks || p.abort != nil):
		case p.signal != 0 && (l.signaled || l.early):
		default:
			out = append(out, l.line)
		}
	}
	p.pending = nil
	return out
}
