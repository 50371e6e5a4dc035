package local

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/plugin"
)

// newTestJob registers another job of size ranks, spawned by parent.
func newTestJob(t *testing.T, u *Universe, parent string, size int32) string {
	t.Helper()
	spec, err := u.NewJob([]AppSpec{{Path: "/bin/app", Procs: size}}, parent, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return spec.Job.Nspace
}

// jobsOf is the procs a PMI-2 job-connect sends: each job whole.
func jobsOf(nss ...string) []plugin.Proc {
	var ps []plugin.Proc
	for _, ns := range nss {
		ps = append(ps, world(ns)...)
	}
	return ps
}

func connect(ctx context.Context, u *Universe, nss ...string) (string, error) {
	resp, err := u.Connect(ctx, &plugin.ConnectRequest{Procs: jobsOf(nss...), Timeout: time.Second})
	if err != nil {
		return "", err
	}
	return resp.ID, nil
}

func disconnect(ctx context.Context, u *Universe, nss ...string) error {
	return u.Disconnect(ctx, &plugin.DisconnectRequest{Procs: jobsOf(nss...), Timeout: time.Second})
}

func TestConnect(t *testing.T) {
	ctx := context.Background()
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	a := job.Nspace
	b := newTestJob(t, u, a, 2)
	c := newTestJob(t, u, a, 1)

	info, err := u.GetInfo(ctx)
	if err != nil || !slices.Contains(info.Capabilities, plugin.CapConnect) {
		t.Fatalf("GetInfo: %+v, %v; want capability %q", info, err, plugin.CapConnect)
	}

	// Every rank of both jobs may connect, from either side; the ID is
	// the same for the same jobs.
	want := "connect:gopmi.test.0,gopmi.test.1"
	for i, nss := range [][]string{{a, b}, {b, a}, {a, b}} {
		id, err := connect(ctx, u, nss...)
		if err != nil || id != want {
			t.Fatalf("connect %d of %v: %q, %v; want %q", i, nss, id, err, want)
		}
	}
	// A rank, not the whole job, may be named too.
	resp, err := u.Connect(ctx, &plugin.ConnectRequest{Procs: []plugin.Proc{{Nspace: a, Rank: 3}, {Nspace: b, Rank: 1}}})
	if err != nil || resp.ID != want {
		t.Fatalf("connect of ranks: %+v, %v; want ID %q", resp, err, want)
	}
	var dump bytes.Buffer
	u.Dump(&dump)
	if line := "  jobs gopmi.test.0 and gopmi.test.1 connected (4 connects not undone)\n"; !strings.Contains(dump.String(), line) {
		t.Errorf("dump lacks %q:\n%s", line, dump.String())
	}

	// Each Disconnect undoes one Connect; one more is an error.
	for i := range 4 {
		if err := disconnect(ctx, u, b, a); err != nil {
			t.Fatalf("disconnect %d: %v", i, err)
		}
	}
	err = disconnect(ctx, u, a, b)
	if msg := "disconnect gopmi.test.0,gopmi.test.1: jobs gopmi.test.0 and gopmi.test.1 are not connected"; !errors.Is(err, plugin.ErrNotFound) || err.Error() != msg {
		t.Errorf("disconnect once too often: %v; want ErrNotFound with %q", err, msg)
	}
	dump.Reset()
	u.Dump(&dump)
	if strings.Contains(dump.String(), "connected") {
		t.Errorf("dump still shows a connection:\n%s", dump.String())
	}

	// Three jobs: every pair is connected; a failed disconnect changes
	// nothing.
	if id, err := connect(ctx, u, c, a, b); err != nil || id != "connect:gopmi.test.0,gopmi.test.1,gopmi.test.2" {
		t.Fatalf("connect of three jobs: %q, %v", id, err)
	}
	if err := disconnect(ctx, u, a, c); err != nil {
		t.Fatalf("disconnect of a pair of the three: %v", err)
	}
	err = disconnect(ctx, u, a, b, c)
	if msg := "disconnect gopmi.test.0,gopmi.test.1,gopmi.test.2: jobs gopmi.test.0 and gopmi.test.2 are not connected"; !errors.Is(err, plugin.ErrNotFound) || err.Error() != msg {
		t.Errorf("disconnect of three with one pair undone: %v; want ErrNotFound with %q", err, msg)
	}
	if err := disconnect(ctx, u, a, b); err != nil {
		t.Errorf("disconnect after a failed one: %v", err)
	}
	if err := disconnect(ctx, u, c, b); err != nil {
		t.Errorf("disconnect after a failed one: %v", err)
	}

	// A job may disconnect from a job that ended since.
	if _, err := connect(ctx, u, a, b); err != nil {
		t.Fatal(err)
	}
	u.EndJob(b, "")
	if err := disconnect(ctx, u, a, b); err != nil {
		t.Errorf("disconnect from a finished job: %v", err)
	}
}

// Reading another job's data needs no connect: spawned jobs and their
// parents read each other's keys through DirectModex without one.
func TestDirectModexNeedsNoConnect(t *testing.T) {
	ctx := context.Background()
	u, job := testUniverse(t, UniverseOptions{}, 4, 2)
	child := newTestJob(t, u, job.Nspace, 1)
	fences := []func() (*plugin.FenceResponse, error){}
	for node, data := range []string{"n0;", "n1;"} {
		fences = append(fences, async(t, func() (*plugin.FenceResponse, error) {
			return u.Fence(ctx, fenceReq(job, "world/1", node, data, false, waitLimit))
		}))
	}
	for _, f := range fences {
		if _, err := f(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := u.DirectModex(ctx, &plugin.ModexRequest{Requestor: procs(child, 0)[0], Proc: world(job.Nspace)[0], Timeout: waitLimit})
	if err != nil || string(resp.Data) != "n0;n1;" {
		t.Errorf("DirectModex of the parent from an unconnected child: %q, %v; want %q", resp, err, "n0;n1;")
	}
}

func TestConnectErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		// setup returns the procs to connect, given the running job a,
		// and jobs b, c spawned by it.
		setup func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc
		info  []plugin.Info
		ctx   context.Context
		want  error
		msg   string
	}{
		{
			name:  "unknown job",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return jobsOf(a, "x") },
			want:  plugin.ErrNotFound, msg: `connect gopmi.test.0,x: no job "x" in this run`,
		},
		{
			name:  "unknown jobs",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return jobsOf("y", a, "x") },
			want:  plugin.ErrNotFound, msg: `connect gopmi.test.0,x,y: no jobs "x", "y" in this run`,
		},
		{
			name:  "one job",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return procs(a, 0, 1) },
			want:  plugin.ErrInvalidArgument, msg: "connect gopmi.test.0: needs processes of two jobs at least, got 1",
		},
		{
			name:  "no procs",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return nil },
			want:  plugin.ErrInvalidArgument, msg: "connect: needs processes of two jobs at least, got 0",
		},
		{
			name:  "empty namespace",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return jobsOf(a, "") },
			want:  plugin.ErrInvalidArgument, msg: "connect: process 1 of the request has an empty namespace",
		},
		{
			name: "rank out of range",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc {
				return []plugin.Proc{{Nspace: a, Rank: 0}, {Nspace: b, Rank: 2}}
			},
			want: plugin.ErrInvalidArgument, msg: "connect gopmi.test.0,gopmi.test.1: job gopmi.test.1 has no rank 2",
		},
		{
			name:  "info key",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return jobsOf(a, b) },
			info:  []plugin.Info{{Key: "xchg-only", Value: "true"}},
			want:  plugin.ErrNotSupported, msg: `connect gopmi.test.0,gopmi.test.1: info key "xchg-only" is not supported by gopmi run`,
		},
		{
			name: "finished job",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc {
				u.EndJob(b, "")
				return jobsOf(a, b)
			},
			want: plugin.ErrNotFound, msg: "connect gopmi.test.0,gopmi.test.1: job gopmi.test.1 has finished: every process of it has ended",
		},
		{
			name: "failed job",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc {
				u.EndJob(c, "rank 0 exited with status 3")
				return jobsOf(a, c)
			},
			want: plugin.ErrAborted, msg: "connect gopmi.test.0,gopmi.test.2: job gopmi.test.2 failed: rank 0 exited with status 3",
		},
		{
			name: "aborted job",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc {
				if err := u.Abort(context.Background(), &plugin.AbortRequest{Proc: procs(b, 1)[0], Status: 2, Message: "bye"}); err != nil {
					t.Fatal(err)
				}
				return jobsOf(b, a)
			},
			want: plugin.ErrAborted, msg: "connect gopmi.test.0,gopmi.test.1: job gopmi.test.1 aborted: rank 1 of job gopmi.test.1 aborted with status 2: bye",
		},
		{
			name:  "caller gone",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc { return jobsOf(a, b) },
			ctx:   cancelled,
			want:  plugin.ErrAborted, msg: "connect gopmi.test.0,gopmi.test.1: caller went away: context canceled",
		},
		{
			name: "run ending",
			setup: func(t *testing.T, u *Universe, a, b, c string) []plugin.Proc {
				u.Close()
				return jobsOf(a, b)
			},
			want: plugin.ErrAborted, msg: "connect gopmi.test.0,gopmi.test.1: the run is ending",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, job := testUniverse(t, UniverseOptions{}, 2, 0)
			b := newTestJob(t, u, job.Nspace, 2)
			c := newTestJob(t, u, job.Nspace, 2)
			req := &plugin.ConnectRequest{Procs: tc.setup(t, u, job.Nspace, b, c), Info: tc.info, Timeout: time.Second}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			resp, err := u.Connect(ctx, req)
			if !errors.Is(err, tc.want) || err.Error() != tc.msg {
				t.Fatalf("Connect(%v): %+v, %v\nwant %v with %q", req.Procs, resp, err, tc.want, tc.msg)
			}
			// A refused connect leaves nothing to disconnect.
			dreq := &plugin.DisconnectRequest{Procs: req.Procs}
			if err := u.Disconnect(context.Background(), dreq); err == nil {
				t.Errorf("Disconnect(%v) after a refused connect: no error", dreq.Procs)
			}
		})
	}
}

func TestDisconnectErrors(t *testing.T) {
	u, job := testUniverse(t, UniverseOptions{}, 2, 0)
	a := job.Nspace
	b := newTestJob(t, u, a, 1)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		procs []plugin.Proc
		info  []plugin.Info
		ctx   context.Context
		want  error
		msg   string
	}{
		{"never connected", jobsOf(a, b), nil, nil, plugin.ErrNotFound,
			"disconnect gopmi.test.0,gopmi.test.1: jobs gopmi.test.0 and gopmi.test.1 are not connected"},
		{"unknown job", jobsOf("x", a), nil, nil, plugin.ErrNotFound,
			"disconnect gopmi.test.0,x: jobs gopmi.test.0 and x are not connected"},
		{"one job", jobsOf(a, a), nil, nil, plugin.ErrInvalidArgument,
			"disconnect gopmi.test.0: needs processes of two jobs at least, got 1"},
		{"info key", jobsOf(a, b), []plugin.Info{{Key: "timeout", Value: "1"}}, nil, plugin.ErrNotSupported,
			`disconnect gopmi.test.0,gopmi.test.1: info key "timeout" is not supported by gopmi run`},
		{"caller gone", jobsOf(a, b), nil, cancelled, plugin.ErrAborted,
			"disconnect gopmi.test.0,gopmi.test.1: caller went away: context canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			err := u.Disconnect(ctx, &plugin.DisconnectRequest{Procs: tc.procs, Info: tc.info})
			if !errors.Is(err, tc.want) || err.Error() != tc.msg {
				t.Errorf("Disconnect(%v): %v\nwant %v with %q", tc.procs, err, tc.want, tc.msg)
			}
		})
	}
}
