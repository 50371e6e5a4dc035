package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/local/forwarder"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// run is one Launcher.Run in progress.
type run struct {
	l      *Launcher
	ctl    *ctlServer
	stderr *plugintest.Buffer
	boots  string // where the fake shims save their bootstraps
	result chan runResult
	cancel context.CancelFunc

	endedC chan string
}

type runResult struct {
	code int
	err  error
}

func testBinary(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startRun starts a Launcher whose shims are the fake shim and whose apps
// default to the fake task.
func startRun(t *testing.T, cfg Config) *run {
	t.Helper()
	self := testBinary(t)
	r := &run{ctl: newCtlServer(t), stderr: &plugintest.Buffer{}, boots: t.TempDir(), result: make(chan runResult, 1), endedC: make(chan string, 16)}
	t.Setenv(envFakeShimDir, r.boots)
	cfg.ShimPath, cfg.RMPath = self, self
	cfg.Env = append(cfg.Env, envHelper+"=task", envCtl+"="+r.ctl.path)
	for i := range cfg.Apps {
		if cfg.Apps[i].Path == "" {
			cfg.Apps[i].Path = self
		}
	}
	cfg.Stdout, cfg.Stderr = r.stderr, r.stderr
	cfg.Hostname = "vm"
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	if cfg.ShimGrace == 0 {
		cfg.ShimGrace = 300 * time.Millisecond
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = waitLimit
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l.onJobEnd = func(ns string) { r.endedC <- ns }
	r.l = l
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		code, err := l.Run(ctx)
		r.result <- runResult{code, err}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.result:
		case <-time.After(waitLimit):
			t.Errorf("Run did not return after the test")
		}
	})
	return r
}

// wait returns Run's result.
func (r *run) wait(t *testing.T) (int, error) {
	t.Helper()
	select {
	case res := <-r.result:
		r.result <- res // for the clean-up
		return res.code, res.err
	case <-time.After(2 * waitLimit):
		t.Fatalf("Run did not return in %s; stderr:\n%s", 2*waitLimit, r.stderr)
		return 0, nil
	}
}

// bootstrap reads the bootstrap the fake shim of a job's node received.
// Tasks start while their shim comes up, so a task may run before its
// shim has saved the bootstrap: call it once Run has returned, when every
// shim has exited, each having saved its bootstrap first thing.
func (r *run) bootstrap(t *testing.T, ns string, node int) *shimv1.Bootstrap {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.boots, ns+"-"+strconv.Itoa(node)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var bs shimv1.Bootstrap
	if err := protojson.Unmarshal(b, &bs); err != nil {
		t.Fatal(err)
	}
	return &bs
}

// procTable returns the universe's proc table of a job, by rank, as
// rows "<rank> <node> <pid> <state>" where an ended task's state says how
// it ended: "exited(3)", "signaled(TERM)".
func (r *run) procTable(t *testing.T, ns string) []string {
	t.Helper()
	procs, err := plugin.DecodeProcTable(query(t, r.l.Universe(), plugin.Proc{Nspace: ns}, plugin.QueryProcTable))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, p := range procs {
		state := string(p.State)
		switch {
		case p.State == plugin.ProcExited && p.Signal != "":
			state = "signaled(" + p.Signal + ")"
		case p.State == plugin.ProcExited:
			state = fmt.Sprintf("exited(%d)", p.ExitStatus)
		}
		rows = append(rows, fmt.Sprintf("%d %s %d %s", p.Rank, p.Node, p.PID, state))
	}
	return rows
}

func mainJob() string { return "gopmi." + strconv.Itoa(os.Getpid()) + ".0" }

func TestRunTasks(t *testing.T) {
	tests := []struct {
		name    string
		ppn     int
		pmiPort bool
		nodes   int
	}{
		{"one node served here", 0, false, 1},
		{"one node, a shim", 4, false, 1},
		{"two nodes", 2, false, 2},
		{"pmi port", 3, true, 2},
		{"pmi port served here", 0, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdin, err := os.Create(filepath.Join(t.TempDir(), "stdin"))
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			r := startRun(t, Config{
				Apps:      []local.AppSpec{{Procs: 3, Args: []string{"first"}}, {Procs: 1, Args: []string{"second"}}},
				PPN:       tc.ppn,
				PMIPort:   tc.pmiPort,
				Env:       []string{"EXTRA=1"},
				Stdin:     stdin,
				FenceMode: "lazy", FenceTimeout: 5 * time.Second, MaxVal: 2048,
			})
			tasks := r.ctl.wait(t, 4)
			ns := mainJob()
			for i, tc2 := range tasks {
				rank := int32(i)
				local, localID := 4, i
				if tc.ppn > 0 && tc.ppn < 4 {
					local = min(tc.ppn, 4-i/tc.ppn*tc.ppn)
					localID = i % tc.ppn
				}
				want := map[string]string{
					"PMI_RANK": strconv.Itoa(i), "PMI_SIZE": "4", "PMI_JOBID": ns, "EXTRA": "1",
					"MPI_LOCALNRANKS": strconv.Itoa(local), "MPI_LOCALRANKID": strconv.Itoa(localID),
				}
				if tc.pmiPort {
					want["PMI_ID"] = strconv.Itoa(i)
					if !strings.HasPrefix(tc2.Env["PMI_PORT"], "127.0.0.1:") {
						t.Errorf("rank %d: PMI_PORT=%q", rank, tc2.Env["PMI_PORT"])
					}
					want["PMI_PORT"] = tc2.Env["PMI_PORT"]
					if len(tc2.FDs) != 0 {
						t.Errorf("rank %d: inherited fds %v, want none", rank, tc2.FDs)
					}
				} else {
					want["PMI_FD"] = "3"
					if len(tc2.FDs) != 1 || !strings.HasPrefix(tc2.FDs[0], "3:socket:") {
						t.Errorf("rank %d: inherited fds %v, want only the PMI socket on 3", rank, tc2.FDs)
					}
				}
				for k, v := range want {
					if tc2.Env[k] != v {
						t.Errorf("rank %d: %s=%q, want %q", rank, k, tc2.Env[k], v)
					}
				}
				for _, k := range []string{"PMI_SPAWNED", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET", forwarder.EnvUniverse} {
					if v, ok := tc2.Env[k]; ok {
						t.Errorf("rank %d: %s=%q leaked into the task", rank, k, v)
					}
				}
				wantStdin, wantArg := "/dev/null", "first"
				if i == 0 {
					wantStdin = stdin.Name()
				}
				if i == 3 {
					wantArg = "second"
				}
				if tc2.Stdin != wantStdin {
					t.Errorf("rank %d: stdin %s, want %s", rank, tc2.Stdin, wantStdin)
				}
				if len(tc2.Args) != 1 || tc2.Args[0] != wantArg {
					t.Errorf("rank %d: args %v, want [%s]", rank, tc2.Args, wantArg)
				}
			}
			for _, tc2 := range tasks {
				tc2.send(t, "exit 0")
			}
			code, err := r.wait(t)
			if code != 0 || err != nil {
				t.Errorf("Run: %d, %v; stderr:\n%s", code, err, r.stderr)
			}
			for n := range tc.nodes {
				if tc.ppn == 0 {
					// Served here: no shim, no bootstrap file. The
					// message is the one a shim would get (bootstrap).
					if entries, _ := os.ReadDir(r.boots); len(entries) != 0 {
						t.Errorf("a job served here started a shim: %v", entries)
					}
					break
				}
				b := r.bootstrap(t, ns, n)
				if b.GetFenceMode() != shimv1.FenceMode_FENCE_MODE_LAZY || b.GetLimits().GetValMax() != 2048 ||
					b.GetTimeouts().GetFence().AsDuration() != 5*time.Second || len(b.GetJob().GetNodes()) != tc.nodes ||
					len(b.GetJob().GetApps()) != 2 || b.GetJob().GetApps()[1].GetFirstRank() != 3 {
					t.Errorf("node %d bootstrap: %v", n, b)
				}
				if tc.pmiPort != (b.GetPmiPortFd() == pmiPortFD) {
					t.Errorf("node %d: pmi_port_fd %q", n, b.GetPmiPortFd())
				}
			}
			if s := r.stderr.String(); strings.Contains(s, "gopmi:") {
				t.Errorf("messages on a clean run:\n%s", s)
			}
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	ns := mainJob()
	tests := []struct {
		name   string
		ppn    int
		args   []string
		act    func(t *testing.T, r *run, tasks []*taskConn)
		code   int
		line   string
		states map[int]string // proc-table states expected afterwards, by rank
	}{
		{
			name:   "task exits non-zero",
			act:    func(t *testing.T, r *run, tasks []*taskConn) { tasks[2].send(t, "exit 3") },
			code:   3,
			line:   "gopmi: rank 2 (job " + ns + ") exited with status 3",
			states: map[int]string{0: "signaled(TERM)", 2: "exited(3)"},
		},
		{
			name:   "task killed by a signal",
			act:    func(t *testing.T, r *run, tasks []*taskConn) { tasks[1].send(t, "kill 9") },
			code:   137,
			line:   "gopmi: rank 1 (job " + ns + ") was killed by signal 9 (killed)",
			states: map[int]string{1: "signaled(KILL)", 3: "signaled(TERM)"},
		},
		{
			name:   "task ignoring SIGTERM is killed",
			args:   []string{"ignore-term"},
			act:    func(t *testing.T, r *run, tasks []*taskConn) { tasks[0].send(t, "exit 5") },
			code:   5,
			line:   "gopmi: rank 0 (job " + ns + ") exited with status 5",
			states: map[int]string{1: "signaled(KILL)"},
		},
		{
			name: "abort by a direct universe call",
			act: func(t *testing.T, r *run, tasks []*taskConn) {
				err := r.l.Universe().Abort(context.Background(), &plugin.AbortRequest{Proc: plugin.Proc{Nspace: ns, Rank: 1}, Status: 6, Message: "bye"})
				if err != nil {
					t.Error(err)
				}
			},
			code:   6,
			line:   "gopmi: job " + ns + " rank 1 aborted: bye (exit 6)",
			states: map[int]string{1: "signaled(TERM)"},
		},
		{
			name:   "abort through the shim's backend",
			ppn:    2,
			act:    func(t *testing.T, r *run, tasks []*taskConn) { tasks[3].send(t, "pmi abort 9 boom") },
			code:   9,
			line:   "gopmi: job " + ns + " rank 3 aborted: boom (exit 9)",
			states: map[int]string{0: "signaled(TERM)"},
		},
		{
			name: "abort served here",
			act: func(t *testing.T, r *run, tasks []*taskConn) {
				tasks[3].send(t, "pmi cmd=init pmi_version=1 pmi_subversion=1")
				tasks[3].send(t, "pmi cmd=abort exitcode=9")
			},
			code:   9,
			line:   "gopmi: job " + ns + " rank 3 aborted (exit 9)",
			states: map[int]string{0: "signaled(TERM)"},
		},
		{
			name: "task ended before finalize",
			ppn:  2,
			act:  func(t *testing.T, r *run, tasks []*taskConn) { tasks[0].send(t, "pmi failed") },
			code: 1,
			line: "gopmi: rank 0 (job " + ns + ") failed: fake: ended before finalize",
		},
		{
			name: "task served here ended before finalize",
			act: func(t *testing.T, r *run, tasks []*taskConn) {
				tasks[2].send(t, "pmi cmd=init pmi_version=1 pmi_subversion=1")
				tasks[2].send(t, "exit 0")
			},
			code: 1,
			// The task left its answer unread: its server's read of
			// the socket may fail rather than see an end of file.
			line: "gopmi: rank 2 (job " + ns + ") failed: rank 2 of job " + ns + " ",
		},
		{
			name: "shim dies while its tasks run",
			ppn:  2,
			act:  func(t *testing.T, r *run, tasks []*taskConn) { tasks[2].send(t, "pmi die") },
			code: 1,
			line: "gopmi: gopmi-shim for job " + ns + " node 1 failed: fake shim: told to die (exited with status 3)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := startRun(t, Config{Apps: []local.AppSpec{{Procs: 4, Args: tc.args}}, PPN: tc.ppn})
			tasks := r.ctl.wait(t, 4)
			tc.act(t, r, tasks)
			code, err := r.wait(t)
			if err != nil || code != tc.code {
				t.Errorf("Run: %d, %v; want %d; stderr:\n%s", code, err, tc.code, r.stderr)
			}
			if s := r.stderr.String(); !strings.Contains(s, tc.line) {
				t.Errorf("stderr lacks %q:\n%s", tc.line, s)
			}
			rows := r.procTable(t, ns)
			for rank, want := range tc.states {
				if !strings.HasSuffix(rows[rank], " "+want) {
					t.Errorf("proc-table row %q, want state %s", rows[rank], want)
				}
			}
		})
	}
}

func TestRunStartFailures(t *testing.T) {
	ns := mainJob()
	tests := []struct {
		mode    string
		timeout time.Duration
		line    string
	}{
		{"fail-start", 0, "gopmi: gopmi-shim for job " + ns + " node 0 failed to start: fake failure"},
		{"exit-early", 0, "gopmi: gopmi-shim for job " + ns + " node 0 exited with status 4 before it was ready: fake shim: exiting early"},
		{"no-ready", 300 * time.Millisecond, "gopmi: gopmi-shim for job " + ns + " node 0 was not ready in time: no message"},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv(envFakeShim, tc.mode)
			// -ppn 2 of 2 ranks: one node, served by a (fake) shim.
			r := startRun(t, Config{Apps: []local.AppSpec{{Procs: 2}}, PPN: 2, StartTimeout: tc.timeout})
			code, err := r.wait(t)
			if code != 1 || err != nil {
				t.Errorf("Run: %d, %v; want 1", code, err)
			}
			if s := r.stderr.String(); !strings.Contains(s, tc.line+"\n") {
				t.Errorf("stderr lacks %q:\n%s", tc.line, s)
			}
			// Tasks start while their shim comes up; a shim that never
			// gets ready takes them down with it.
			rows := r.procTable(t, ns)
			if len(rows) != 2 {
				t.Fatalf("proc table %q, want 2 rows", rows)
			}
			for _, row := range rows {
				for _, live := range []string{" started", " connected", " finalized"} {
					if strings.HasSuffix(row, live) {
						t.Errorf("task still alive after a failed start: %q", row)
					}
				}
			}
		})
	}
}

func TestRunSignals(t *testing.T) {
	tests := []struct {
		sig   syscall.Signal
		code  int
		state string
	}{
		{syscall.SIGTERM, 143, "signaled(TERM)"},
		{syscall.SIGINT, 130, "signaled(INT)"},
		{syscall.SIGHUP, 129, "signaled(TERM)"},
	}
	for _, tc := range tests {
		t.Run(signalName(tc.sig), func(t *testing.T) {
			r := startRun(t, Config{Apps: []local.AppSpec{{Procs: 3}}})
			r.ctl.wait(t, 3)
			r.l.Signal(tc.sig)
			code, err := r.wait(t)
			if code != tc.code || err != nil {
				t.Errorf("Run: %d, %v; want %d", code, err, tc.code)
			}
			for _, row := range r.procTable(t, mainJob()) {
				if !strings.HasSuffix(row, " "+tc.state) {
					t.Errorf("proc-table row %q, want %s", row, tc.state)
				}
			}
			if s := r.stderr.String(); !strings.Contains(s, "gopmi: got SIG"+signalName(tc.sig)+", ending the run\n") || strings.Contains(s, "killed by signal") {
				t.Errorf("stderr:\n%s", s)
			}
		})
	}
	t.Run("USR1 dumps the state", func(t *testing.T) {
		r := startRun(t, Config{Apps: []local.AppSpec{{Procs: 2}}})
		tasks := r.ctl.wait(t, 2)
		var dump bytes.Buffer
		r.l.Dump(&dump)
		r.l.Signal(syscall.SIGUSR1)
		for _, want := range []string{"universe state", "job " + mainJob() + ": size 2, 1 nodes (0 configured), running; procs started=2", "launcher job " + mainJob() + ": 2 tasks running"} {
			if !strings.Contains(dump.String(), want) {
				t.Errorf("dump lacks %q:\n%s", want, dump.String())
			}
		}
		for _, tc := range tasks {
			tc.send(t, "exit 0")
		}
		if code, err := r.wait(t); code != 0 || err != nil {
			t.Errorf("Run after SIGUSR1: %d, %v", code, err)
		}
		if !strings.Contains(r.stderr.String(), "universe state") {
			t.Errorf("SIGUSR1 wrote no dump:\n%s", r.stderr)
		}
	})
}

func TestRunSpawn(t *testing.T) {
	for _, ppn := range []int{0, 1} {
		t.Run("ppn "+strconv.Itoa(ppn), func(t *testing.T) { testRunSpawn(t, ppn) })
	}
}

func testRunSpawn(t *testing.T, ppn int) {
	r := startRun(t, Config{Apps: []local.AppSpec{{Procs: 1}}, PPN: ppn})
	parent := r.ctl.wait(t, 1)[0]
	u := r.l.Universe()
	ns := mainJob()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	self := testBinary(t)
	req := &plugin.SpawnRequest{
		Requestor: plugin.Proc{Nspace: ns, Rank: 0},
		Apps: []plugin.SpawnApp{
			{Cmd: self, Argv: []string{"child-a"}, MaxProcs: 2, Env: []string{"APPVAR=a"}},
			{Cmd: filepath.Base(self), Argv: []string{"child-b"}, MaxProcs: 1, Info: []plugin.Info{{Key: "path", Value: filepath.Dir(self)}, {Key: "host", Value: "localhost"}}},
		},
		Preput: []plugin.Info{{Key: "PARENT_ROOT_PORT_NAME", Value: "port#1$"}},
	}
	resp, err := u.Spawn(ctx, req)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	child := "gopmi." + strconv.Itoa(os.Getpid()) + ".1"
	if resp.Nspace != child {
		t.Errorf("spawned %q, want %q", resp.Nspace, child)
	}
	kids := r.ctl.wait(t, 3)
	for i, k := range kids {
		want := map[string]string{"PMI_SPAWNED": "1", "PMI_JOBID": child, "PMI_SIZE": "3", "PMI_RANK": strconv.Itoa(i)}
		if i < 2 {
			want["APPVAR"] = "a"
		}
		for key, v := range want {
			if k.Env[key] != v {
				t.Errorf("child rank %d: %s=%q, want %q", i, key, k.Env[key], v)
			}
		}
	}

	// An unknown info key is refused by name and starts nothing.
	bad := *req
	bad.Apps = []plugin.SpawnApp{{Cmd: self, MaxProcs: 1, Info: []plugin.Info{{Key: "map_by", Value: "core"}}}}
	if _, err := u.Spawn(ctx, &bad); !errors.Is(err, plugin.ErrNotSupported) || !strings.Contains(err.Error(), `"map_by"`) {
		t.Errorf("spawn with map_by: %v", err)
	}

	// gopmi run waits for the spawned job too.
	parent.send(t, "exit 0")
	select {
	case ended := <-r.endedC:
		if ended != ns {
			t.Errorf("job %s ended first, want %s", ended, ns)
		}
	case <-time.After(waitLimit):
		t.Fatal("the parent job did not end")
	}
	select {
	case res := <-r.result:
		t.Fatalf("Run returned %v while the spawned job runs", res)
	default:
	}
	for _, k := range kids {
		k.send(t, "exit 0")
	}
	if code, err := r.wait(t); code != 0 || err != nil {
		t.Errorf("Run: %d, %v; stderr:\n%s", code, err, r.stderr)
	}
	if got := query(t, u, plugin.Proc{Nspace: child}, plugin.QueryJobStatus); got != "finished" {
		t.Errorf("spawned job status %q", got)
	}
	if ppn == 0 {
		return // served here: no shims, no bootstraps to read
	}
	// One shim per node: ppn 1 makes three.
	for n := range 3 {
		b := r.bootstrap(t, child, n)
		if b.GetJob().GetParent() != ns || len(b.GetJob().GetPreput()) != 1 || b.GetJob().GetPreput()[0].GetKey() != "PARENT_ROOT_PORT_NAME" {
			t.Errorf("child node %d bootstrap job: %v", n, b.GetJob())
		}
	}
}

func TestMissingBinary(t *testing.T) {
	empty, onPath := t.TempDir(), t.TempDir()
	t.Setenv("PATH", onPath+":relative")
	t.Setenv(EnvShim, "")
	t.Setenv(EnvRMLocal, "")
	self := testBinary(t)
	// A job on one node needs no other binary: gopmi run serves it.
	l, err := New(Config{Apps: []local.AppSpec{{Path: "x", Procs: 1}}})
	if err != nil {
		t.Fatalf("New without -ppn and without the shim: %v", err)
	}
	// A program that does not exist is an error before anything starts.
	code, err := l.Run(context.Background())
	if code != 1 || err == nil || !strings.HasPrefix(err.Error(), `command "x" not found in PATH or the working directory `) {
		t.Errorf("Run of a missing program: %d, %v", code, err)
	}
	_, err = New(Config{Apps: []local.AppSpec{{Path: "x", Procs: 1}}, PPN: 1})
	// The message names every directory searched, PATH's included.
	want := "cannot find gopmi-shim in " + filepath.Dir(self) + ":" + onPath + " (next to gopmi, then PATH); install it there or set GOPMI_SHIM"
	if err == nil || err.Error() != want {
		t.Errorf("New: %v\nwant %q", err, want)
	}
	shim := exe(t, empty, ShimBinary)
	_, err = New(Config{Apps: []local.AppSpec{{Path: "x", Procs: 1}}, PPN: 1, ShimPath: shim})
	// gopmi-rm-local is looked for next to the shim too.
	if want := "cannot find gopmi-rm-local in " + filepath.Dir(self) + ":" + empty + ":" + onPath + " "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New without gopmi-rm-local: %v", err)
	}
	// Next to the shim is good enough for the backend.
	exe(t, empty, RMLocalBinary)
	l, err = New(Config{Apps: []local.AppSpec{{Path: "x", Procs: 1}}, PPN: 1, ShimPath: shim})
	if err != nil || l.rmPath != filepath.Join(empty, RMLocalBinary) {
		t.Errorf("New: %v", err)
	}
}

// A setting a shim would refuse in its bootstrap is refused before
// anything starts, with or without shims.
func TestBadSettings(t *testing.T) {
	for _, ppn := range []int{0, 1} {
		_, err := New(Config{Apps: []local.AppSpec{{Path: "x", Procs: 1}}, PPN: ppn, MaxVal: 10, ShimPath: testBinary(t), RMPath: testBinary(t)})
		var se *SettingError
		if want := "-max-val: 10 is below the minimum 64"; !errors.As(err, &se) || err.Error() != want {
			t.Errorf("ppn %d: New with -max-val 10: %v, want %q", ppn, err, want)
		}
	}
}

// TestRunManyTasks launches 1024 tasks (/bin/true) with the fake shim: a
// 1024-rank job needs about 2 fds per rank in the launcher for a moment.
func TestRunManyTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("1024 processes")
	}
	for _, ppn := range []int{0, 256} {
		t.Run("ppn "+strconv.Itoa(ppn), func(t *testing.T) {
			start := time.Now()
			r := startRun(t, Config{Apps: []local.AppSpec{{Path: "/bin/true", Procs: 1024}}, PPN: ppn})
			code, err := r.wait(t)
			if code != 0 || err != nil {
				t.Fatalf("Run: %d, %v; stderr:\n%s", code, err, r.stderr)
			}
			t.Logf("1024 tasks, ppn %d: %s, fd limit %d", ppn, time.Since(start), fdLimit())
			rows := r.procTable(t, mainJob())
			if len(rows) != 1024 || rows[1023] != "1023 vm"+map[bool]string{true: "", false: "-3"}[ppn == 0]+" "+strings.Fields(rows[1023])[2]+" exited(0)" {
				t.Errorf("last row %q of %d", rows[len(rows)-1], len(rows))
			}
		})
	}
}

// A READY=1 still queued when the shim is reaped counts: close reads what
// is left before it closes the socket.
func TestNotifierKeepsQueuedReady(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		path := filepath.Join(dir, "n"+strconv.Itoa(i))
		n, err := newNotifier(path, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("READY=1\nSTATUS=serving 1 tasks")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		n.close()
		if !isClosed(n.ready) {
			t.Fatalf("round %d: READY=1 sent before close was lost", i)
		}
		if st, _ := n.lastStatus(); st != "serving 1 tasks" {
			t.Fatalf("round %d: status %q", i, st)
		}
	}
}
