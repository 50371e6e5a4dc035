package launcher

import (
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
)

// step is one event fed to a policy at a time (ms after the start), with
// the effects it must have.
type step struct {
	at   int
	ev   func(p *policy, now time.Time) effects
	want effects
}

func rank(r int32) plugin.Proc { return plugin.Proc{Nspace: "j", Rank: r} }

func exited(r int32, status int) func(*policy, time.Time) effects {
	return func(p *policy, now time.Time) effects {
		return p.taskExited(now, taskExit{proc: rank(r), status: status, ok: status == 0,
			how: map[bool]string{true: "exited with status " + itoa(status), false: "was killed by signal " + itoa(status-128)}[status < 128]})
	}
}

// hinted is exited for a task whose program gopmi can explain.
func hinted(r int32, status int) func(*policy, time.Time) effects {
	return func(p *policy, now time.Time) effects {
		return p.taskExited(now, taskExit{proc: rank(r), status: status, how: "exited with status " + itoa(status), hint: "gopmi: why"})
	}
}

func killed(r int32, sig int, byUs bool) func(*policy, time.Time) effects {
	return func(p *policy, now time.Time) effects {
		return p.taskExited(now, taskExit{proc: rank(r), status: 128 + sig, byUs: byUs, signaled: true,
			how: "was killed by signal " + itoa(sig)})
	}
}

func gone(r int32) func(*policy, time.Time) effects {
	return func(p *policy, now time.Time) effects { return p.procFailed(now, rank(r), "left before finalize") }
}

func abort(r int32, status int32) func(*policy, time.Time) effects {
	return func(p *policy, now time.Time) effects {
		return p.aborted(now, local.AbortEvent{Proc: rank(r), Status: status, Message: "boom"})
	}
}

func server(code int, byUs bool) func(*policy, time.Time) effects {
	return func(p *policy, now time.Time) effects {
		return p.serverExited(now, serverExit{code: code, byUs: byUs, line: "gopmi: server failed: code " + itoa(code)})
	}
}

func sig(s syscall.Signal) func(*policy, time.Time) effects {
	return func(p *policy, _ time.Time) effects { return p.signalled(s) }
}

func tick(p *policy, now time.Time) effects { return p.tick(now) }

func itoa(n int) string { return strconv.Itoa(n) }

// reported is a report that ends the run.
func reported(lines ...string) effects { return effects{print: lines, end: syscall.SIGTERM} }

func TestPolicy(t *testing.T) {
	tests := []struct {
		name   string
		steps  []step
		lines  []string // what status still prints
		status int
	}{
		{name: "clean run", status: 0},
		{
			name: "a task fails: reported after the settle time",
			steps: []step{
				{0, exited(2, 3), effects{}},
				{50, tick, effects{}},
				{100, tick, effects{print: []string{"gopmi: rank 2 (job j) exited with status 3"}, end: syscall.SIGTERM}},
				{150, killed(0, 15, true), effects{}},
			},
			status: 3,
		},
		{
			name: "a failure gopmi can explain: one explanation, after the first task's line",
			steps: []step{
				{0, hinted(1, 1), effects{}},
				{10, hinted(0, 1), effects{}},
				{100, tick, effects{print: []string{"gopmi: rank 1 (job j) exited with status 1", "gopmi: why", "gopmi: rank 0 (job j) exited with status 1"}, end: syscall.SIGTERM}},
			},
			status: 1,
		},
		{
			name: "an abort is the news, not the aborting task's exit",
			steps: []step{
				{0, exited(1, 7), effects{}},
				{20, abort(1, 7), effects{print: []string{"gopmi: job j rank 1 aborted: boom (exit 7)"}, end: syscall.SIGTERM,
					sigterm: []plugin.Proc{{Nspace: "j", Rank: plugin.RankWildcard}}}},
				{30, abort(0, 9), effects{}},
				{100, tick, effects{}},
				{120, server(5, false), effects{}},
			},
			status: 7,
		},
		{
			name: "an abort that follows another task's failure is its echo",
			steps: []step{
				{0, exited(2, 3), effects{}},
				{20, abort(0, 15), effects{end: syscall.SIGTERM, sigterm: []plugin.Proc{{Nspace: "j", Rank: plugin.RankWildcard}}}},
				{30, abort(1, 15), effects{}},
				{100, tick, effects{print: []string{"gopmi: rank 2 (job j) exited with status 3"}}},
			},
			status: 3,
		},
		{
			name: "an abort that follows another task's early exit is its echo",
			steps: []step{
				{0, gone(1), effects{}},
				{5, abort(0, 15), effects{end: syscall.SIGTERM, sigterm: []plugin.Proc{{Nspace: "j", Rank: plugin.RankWildcard}}}},
				{10, exited(1, 0), effects{}},
				{100, tick, effects{print: []string{"gopmi: rank 1 (job j) failed: left before finalize"}}},
			},
			status: 1,
		},
		{
			name: "a signal to the run reaches the tasks too: their early exits are no news",
			steps: []step{
				{0, gone(0), effects{}},
				{1, sig(syscall.SIGINT), effects{print: []string{"gopmi: got SIGINT, ending the run"}, end: syscall.SIGINT}},
				{2, killed(1, 2, false), effects{}},
				{100, tick, effects{}},
			},
			status: 130,
		},
		{
			name: "a task's signal says more than its server's report",
			steps: []step{
				{0, gone(1), effects{}},
				{10, killed(1, 9, false), effects{}},
				{100, tick, effects{print: []string{"gopmi: rank 1 (job j) was killed by signal 9"}, end: syscall.SIGTERM}},
			},
			status: 137,
		},
		{
			name: "the task its server reported gone decides the status, whoever was reaped first",
			steps: []step{
				{0, exited(0, 2), effects{}},
				{5, gone(1), effects{}},
				{10, exited(1, 5), effects{}},
				{100, tick, reported("gopmi: rank 0 (job j) exited with status 2", "gopmi: rank 1 (job j) failed: left before finalize",
					"gopmi: rank 1 (job j) exited with status 5")},
			},
			status: 5,
		},
		{
			name: "a task gone before finalize that exits 0",
			steps: []step{
				{0, gone(2), effects{}},
				{1, exited(2, 0), effects{}},
				{2, server(4, false), effects{}},
				{100, tick, reported("gopmi: rank 2 (job j) failed: left before finalize")},
			},
			status: 1,
		},
		{
			name: "a server's report alone is printed",
			steps: []step{
				{0, server(4, false), effects{}},
				{100, tick, reported("gopmi: server failed: code 4")},
			},
			status: 1,
		},
		{
			name: "a server that fails on its own ends the run at once",
			steps: []step{
				{0, server(3, false), reported("gopmi: server failed: code 3")},
				{10, server(1, false), effects{}},
				{20, killed(0, 15, true), effects{}},
			},
			status: 1,
		},
		{
			name:   "a server stopped by gopmi run is no news",
			steps:  []step{{0, server(4, true), effects{}}, {0, server(3, true), effects{}}},
			status: 0,
		},
		{
			name: "SIGINT, then again",
			steps: []step{
				{0, sig(syscall.SIGINT), effects{print: []string{"gopmi: got SIGINT, ending the run"}, end: syscall.SIGINT}},
				{10, killed(0, 2, false), effects{}},
				{20, sig(syscall.SIGINT), effects{print: []string{"gopmi: INT again, killing every process"}, kill: true}},
			},
			status: 130,
		},
		{
			name: "SIGTERM twice kills; SIGTERM after a failure does not",
			steps: []step{
				{0, server(3, false), reported("gopmi: server failed: code 3")},
				{10, sig(syscall.SIGTERM), effects{}},
				{20, sig(syscall.SIGHUP), effects{}},
				{30, sig(syscall.SIGINT), effects{print: []string{"gopmi: INT again, killing every process"}, kill: true}},
			},
			status: 1,
		},
		{
			name: "a failure held when the run ends is printed with the status",
			steps: []step{
				{0, sig(syscall.SIGTERM), effects{print: []string{"gopmi: got SIGTERM, ending the run"}, end: syscall.SIGTERM}},
				{1, server(4, false), effects{}},
			},
			lines:  []string{"gopmi: server failed: code 4"},
			status: 143,
		},
		{
			name: "the first job's start fails",
			steps: []step{
				{0, func(p *policy, _ time.Time) effects { return p.startFailed(errors.New("shim not ready")) },
					effects{print: []string{"gopmi: shim not ready"}, end: syscall.SIGTERM}},
			},
			status: 1,
		},
		{
			name: "a start that fails while the run ends is not news",
			steps: []step{
				{0, sig(syscall.SIGTERM), effects{print: []string{"gopmi: got SIGTERM, ending the run"}, end: syscall.SIGTERM}},
				{1, func(p *policy, _ time.Time) effects { return p.startFailed(errors.New("the run is ending")) }, effects{}},
				{2, gone(0), effects{}},
			},
			status: 143,
		},
		{
			name: "failures after the report are reported in their turn",
			steps: []step{
				{0, exited(0, 1), effects{}},
				{100, tick, effects{print: []string{"gopmi: rank 0 (job j) exited with status 1"}, end: syscall.SIGTERM}},
				{150, server(4, false), effects{}},
				{200, tick, effects{}},
				{250, tick, effects{print: []string{"gopmi: server failed: code 4"}}},
			},
			status: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy()
			t0 := time.Unix(1000, 0)
			for i, s := range tc.steps {
				got := s.ev(p, t0.Add(time.Duration(s.at)*time.Millisecond))
				if d := cmp.Diff(s.want, got, cmp.AllowUnexported(effects{}), cmpopts.EquateEmpty()); d != "" {
					t.Errorf("step %d (at %dms): effects (-want +got):\n%s", i, s.at, d)
				}
			}
			lines, status := p.status()
			if d := cmp.Diff(tc.lines, lines, cmpopts.EquateEmpty()); d != "" || status != tc.status {
				t.Errorf("status %d, want %d; lines (-want +got):\n%s", status, tc.status, d)
			}
		})
	}
}

// The settle time runs from the first failure held, and tick is due then.
func TestPolicyDue(t *testing.T) {
	p := newPolicy()
	if _, ok := p.nextTick(); ok {
		t.Fatal("a new policy wants a tick")
	}
	t0 := time.Unix(1000, 0)
	p.taskExited(t0, taskExit{proc: rank(0), status: 1, how: "exited with status 1"})
	p.taskExited(t0.Add(60*time.Millisecond), taskExit{proc: rank(1), status: 1, how: "exited with status 1"})
	if at, ok := p.nextTick(); !ok || !at.Equal(t0.Add(failureSettle)) {
		t.Fatalf("next tick %v %v, want %v", at, ok, t0.Add(failureSettle))
	}
	fx := p.tick(t0.Add(failureSettle))
	if len(fx.print) != 2 || fx.end != syscall.SIGTERM {
		t.Fatalf("tick: %+v", fx)
	}
	if _, ok := p.nextTick(); ok {
		t.Fatal("a tick is still due after the report")
	}
}
