package forwarder

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/plugin"
)

func TestForwarderAddress(t *testing.T) {
	u, job := testUniverse(t, local.UniverseOptions{}, 2, 0)
	addr := serveUniverse(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg := []byte(`{"universe":"` + addr + `"}`)
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		config []byte
		getErr error // GetInfo's error before Configure
		cfgErr error
	}{
		{name: "flag", args: []string{"-universe", addr}},
		{name: "flag with =", args: []string{"-universe=" + addr}},
		{name: "environment", env: map[string]string{EnvUniverse: addr}},
		{name: "config only", config: cfg, getErr: plugin.ErrUnavailable},
		{name: "flag and same config", args: []string{"-universe", addr}, config: cfg},
		{name: "nothing", getErr: plugin.ErrUnavailable, cfgErr: plugin.ErrUnavailable},
		{name: "bad config", args: []string{"-universe", addr}, config: []byte(`{"universe":1}`), cfgErr: plugin.ErrInvalidArgument},
		{name: "unknown config field", args: []string{"-universe", addr}, config: []byte(`{"other":"x"}`), cfgErr: plugin.ErrInvalidArgument},
		{name: "other universe in config", args: []string{"-universe", addr}, config: []byte(`{"universe":"unix:///elsewhere"}`), cfgErr: plugin.ErrInvalidArgument},
		{name: "unreachable", args: []string{"-universe", "unix:///nonexistent/u.sock"}, getErr: plugin.ErrUnavailable, cfgErr: plugin.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newBackend(tc.args, env(tc.env))
			defer f.Close()
			info, err := f.GetInfo(ctx)
			if !errors.Is(err, tc.getErr) || (tc.getErr == nil && err != nil) {
				t.Fatalf("GetInfo: %v, want %v", err, tc.getErr)
			}
			if err == nil && info.Name != "local" {
				t.Errorf("GetInfo name %q", info.Name)
			}
			_, err = f.Configure(ctx, &plugin.ConfigureRequest{Job: job, NodeID: 0, Config: tc.config})
			if !errors.Is(err, tc.cfgErr) || (tc.cfgErr == nil && err != nil) {
				t.Fatalf("Configure: %v, want %v", err, tc.cfgErr)
			}
		})
	}
}

// The universe's errors reach the shim with their sentinel and message.
func TestForwarderErrorsUnchanged(t *testing.T) {
	u, job := testUniverse(t, local.UniverseOptions{}, 4, 2)
	addr := serveUniverse(t, u)
	f := newBackend([]string{"-universe", addr}, func(string) string { return "" })
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := f.Fence(ctx, fenceReq(job, "world/3", 0, "x", true, 50*time.Millisecond))
	want := "fence world/3 of job gopmi.test.0: ranks 2-3 (node vm-1) did not arrive in 50ms"
	if !errors.Is(err, plugin.ErrTimeout) || err.Error() != want {
		t.Errorf("Fence through the forwarder: %v\nwant ErrTimeout with %q", err, want)
	}
	_, err = f.Spawn(ctx, &plugin.SpawnRequest{Requestor: plugin.Proc{Nspace: job.Nspace}, Apps: []plugin.SpawnApp{{Cmd: "x", MaxProcs: 1}}})
	if !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Spawn through the forwarder: %v, want ErrNotSupported", err)
	}
	_, err = f.Connect(ctx, &plugin.ConnectRequest{Procs: jobsOf(job.Nspace, "x")})
	want = `connect gopmi.test.0,x: no job "x" in this run`
	if !errors.Is(err, plugin.ErrNotFound) || err.Error() != want {
		t.Errorf("Connect through the forwarder: %v\nwant ErrNotFound with %q", err, want)
	}
	err = f.Disconnect(ctx, &plugin.DisconnectRequest{Procs: jobsOf(job.Nspace, "x")})
	want = `disconnect gopmi.test.0,x: jobs gopmi.test.0 and x are not connected`
	if !errors.Is(err, plugin.ErrNotFound) || err.Error() != want {
		t.Errorf("Disconnect through the forwarder: %v\nwant ErrNotFound with %q", err, want)
	}
}

// Connect and Disconnect reach the universe through the forwarder, as a
// shim's job-connect does.
func TestForwarderConnect(t *testing.T) {
	u, job := testUniverse(t, local.UniverseOptions{}, 2, 0)
	child := newTestJob(t, u, job.Nspace, 1)
	addr := serveUniverse(t, u)
	f := newBackend([]string{"-universe", addr}, func(string) string { return "" })
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	info, err := f.GetInfo(ctx)
	if err != nil || !slices.Contains(info.Capabilities, plugin.CapConnect) {
		t.Fatalf("GetInfo through the forwarder: %+v, %v; want capability %q", info, err, plugin.CapConnect)
	}
	resp, err := f.Connect(ctx, &plugin.ConnectRequest{Procs: jobsOf(job.Nspace, child)})
	if want := "connect:gopmi.test.0,gopmi.test.1"; err != nil || resp.ID != want {
		t.Fatalf("Connect through the forwarder: %+v, %v; want ID %q", resp, err, want)
	}
	if err := f.Disconnect(ctx, &plugin.DisconnectRequest{Procs: jobsOf(child, job.Nspace)}); err != nil {
		t.Errorf("Disconnect through the forwarder: %v", err)
	}
}
