package grpcplugin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startPlugin starts the test binary as a plugin; Close is registered
// with t.Cleanup (a test may close earlier: Close is idempotent).
func startPlugin(t *testing.T, logger zerolog.Logger, env ...string) *grpcplugin.Client {
	t.Helper()
	c, err := grpcplugin.Start(testCtx(t), grpcplugin.ClientConfig{
		Path:      os.Args[0],
		Env:       append([]string{envPlugin + "=1", noRaceExitSleep}, env...),
		SocketDir: t.TempDir(),
		Logger:    logger,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestStartCallClose(t *testing.T) {
	ctx := testCtx(t)
	sockDir := t.TempDir()
	c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{
		Path: os.Args[0], Env: []string{envPlugin + "=1", noRaceExitSleep}, SocketDir: sockDir, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	want := &plugin.BackendInfo{Name: "testrm", Version: "1.2.3", APIVersions: []string{plugin.APIVersion1}, Capabilities: []string{plugin.CapQuery}}
	if diff := cmp.Diff(want, c.Info()); diff != "" {
		t.Errorf("Info (-want +got):\n%s", diff)
	}
	// The plugin's socket lives in the private directory.
	if entries, _ := os.ReadDir(sockDir); len(entries) == 0 {
		t.Errorf("socket dir %s is empty; want go-plugin's plugin-dir there", sockDir)
	}

	b := c.Backend()
	cresp, err := b.Configure(ctx, &plugin.ConfigureRequest{APIVersion: plugin.APIVersion1, Job: plugin.Job{Nspace: "j1"}, Config: []byte("cfg")})
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	if diff := cmp.Diff([]plugin.Info{{Key: "config", Value: "cfg"}, {Key: "nspace", Value: "j1"}}, cresp.Attrs); diff != "" {
		t.Errorf("Configure attrs (-want +got):\n%s", diff)
	}
	fresp, err := b.Fence(ctx, &plugin.FenceRequest{ID: "echo", Data: []byte("blob")})
	if err != nil || string(fresp.Data) != "blob" {
		t.Fatalf("Fence = %q, %v; want blob", fresp.Data, err)
	}
	// Lookup is not implemented by the backend: Unimplemented answers.
	if _, err := b.Lookup(ctx, &plugin.LookupRequest{}); !errors.Is(err, plugin.ErrNotSupported) {
		t.Errorf("Lookup: %v; want ErrNotSupported", err)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case <-c.Exited():
	default:
		t.Error("Exited not closed after Close")
	}
	if _, err := b.Fence(ctx, &plugin.FenceRequest{ID: "echo"}); !errors.Is(err, plugin.ErrBackendGone) {
		t.Errorf("Fence after Close: %v; want ErrBackendGone", err)
	}
	if entries, _ := os.ReadDir(sockDir); len(entries) != 0 {
		t.Errorf("socket dir %s not cleaned up: %v", sockDir, entries)
	}
}

// TestErrorsAcrossProcess: every sentinel a backend returns in the plugin
// process arrives in the host with errors.Is intact and the message as
// the backend wrote it.
func TestErrorsAcrossProcess(t *testing.T) {
	c := startPlugin(t, zerolog.Nop())
	ctx := testCtx(t)
	for id, want := range errByID {
		t.Run(id, func(t *testing.T) {
			_, err := c.Backend().Fence(ctx, &plugin.FenceRequest{ID: id})
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != want.Error() {
				t.Errorf("message %q; want %q", err, want)
			}
			if s := errors.Unwrap(want); s != nil && !errors.Is(err, s) {
				t.Errorf("errors.Is(%v, %v) = false", err, s)
			}
			if errors.Is(err, plugin.ErrBackendGone) {
				t.Errorf("%v is ErrBackendGone", err)
			}
		})
	}
}

func TestHostDeadline(t *testing.T) {
	c := startPlugin(t, zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Backend().Fence(ctx, &plugin.FenceRequest{ID: "block"})
	if !errors.Is(err, plugin.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fence past the host's deadline: %v; want ErrTimeout and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Fence returned %s after a 200ms deadline", d)
	}
	// The plugin is still fine.
	if _, err := c.Backend().Fence(testCtx(t), &plugin.FenceRequest{ID: "echo"}); err != nil {
		t.Errorf("Fence after a timed-out one: %v", err)
	}
}

func waitExited(t *testing.T, c *grpcplugin.Client) {
	t.Helper()
	select {
	case <-c.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("Exited not closed 10s after the plugin died")
	}
}

func TestPluginKilled(t *testing.T) {
	c := startPlugin(t, zerolog.Nop())
	ctx := testCtx(t)
	pid, err := pluginPid(ctx, c.Backend())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExited(t, c)
	_, err = c.Backend().Fence(ctx, &plugin.FenceRequest{ID: "echo"})
	if !errors.Is(err, plugin.ErrBackendGone) {
		t.Fatalf("Fence after the plugin died: %v; want ErrBackendGone", err)
	}
	if !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("message %q does not say how the plugin ended", err)
	}
}

func TestPluginDiesMidCall(t *testing.T) {
	c := startPlugin(t, zerolog.Nop())
	_, err := c.Backend().Fence(testCtx(t), &plugin.FenceRequest{ID: "exit"})
	if !errors.Is(err, plugin.ErrBackendGone) {
		t.Fatalf("Fence that kills the plugin: %v; want ErrBackendGone", err)
	}
	t.Logf("error seen by the host: %v", err)
	waitExited(t, c)
}

func TestPluginLogsRelevelled(t *testing.T) {
	var buf syncBuffer
	var raw syncBuffer
	c, err := grpcplugin.Start(testCtx(t), grpcplugin.ClientConfig{
		Path: os.Args[0], Env: []string{envPlugin + "=1", noRaceExitSleep}, SocketDir: t.TempDir(),
		Logger: zerolog.New(&buf).Level(zerolog.DebugLevel), Stderr: &raw,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Backend().Fence(testCtx(t), &plugin.FenceRequest{ID: "log"}); err != nil {
		t.Fatal(err)
	}
	// Close waits for the plugin's last stderr line to be relayed.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var found map[string]any
	for _, l := range strings.Split(buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "fence log test" {
			found = m
		}
	}
	if found == nil {
		t.Fatalf("host log lacks the plugin's line:\n%s", buf.String())
	}
	if found["level"] != "warn" || found["fence"] != "log" || found["module"] != filepath.Base(os.Args[0]) {
		t.Errorf("relayed line %v; want level warn, fence log, module %s", found, filepath.Base(os.Args[0]))
	}
	if !strings.Contains(raw.String(), `"@level":"warn"`) {
		t.Errorf("raw stderr lacks the hclog-shaped line:\n%s", raw.String())
	}
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     grpcplugin.ClientConfig
		timeout time.Duration
		want    error
		msg     string // the error says this
	}{
		{"no path", grpcplugin.ClientConfig{}, 5 * time.Second, plugin.ErrInvalidArgument, "no path"},
		{"missing binary", grpcplugin.ClientConfig{Path: "/nonexistent/gopmi-rm-x"}, 5 * time.Second, nil, "no such file"},
		{"not a plugin", grpcplugin.ClientConfig{Path: "/bin/true"}, 5 * time.Second, plugin.ErrBackendGone, "it exited before its handshake (exit status 0)"},
		{"dies", grpcplugin.ClientConfig{Path: os.Args[0], Env: []string{envPlugin + "=die"}}, 5 * time.Second, plugin.ErrBackendGone, "it exited before its handshake (exit status 3)"},
		{"hangs, ctx deadline", grpcplugin.ClientConfig{Path: os.Args[0], Env: []string{envPlugin + "=hang"}}, 300 * time.Millisecond, plugin.ErrTimeout, "timed out"}, // ctx's deadline or go-plugin's, whichever fires first
		{"hangs, start timeout", grpcplugin.ClientConfig{Path: os.Args[0], Env: []string{envPlugin + "=hang"}, StartTimeout: 300 * time.Millisecond}, 10 * time.Second, plugin.ErrTimeout, "no handshake in 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			start := time.Now()
			c, err := grpcplugin.Start(ctx, tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			t.Logf("error: %v", err)
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Start: %v; want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Start: %v; want it to say %q", err, tt.msg)
			}
			// Start kills what it started: none of these may take long.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Start took %s to fail", d)
			}
		})
	}
}

// procState returns the state letter in /proc/pid/stat, or "" if the
// process is gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// TestPdeathsig: a plugin dies with its host even when the host is
// SIGKILLed and cannot clean up.
func TestPdeathsig(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), envHost+"=1")
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	hostDone := false
	defer func() {
		if !hostDone {
			host.Process.Kill()
			host.Wait()
		}
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	var pid int
	select {
	case s := <-line:
		if _, err := fmt.Sscanf(s, "PID %d", &pid); err != nil {
			t.Fatalf("host said %q: %v", s, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("host did not report the plugin's pid in 30s")
	}
	if st := procState(pid); st == "" || st == "Z" {
		t.Fatalf("plugin %d not running before the host died (state %q)", pid, st)
	}

	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	host.Wait()
	hostDone = true

	// A dead orphan may stay a zombie here (PID 1 may not reap): state Z
	// counts as dead, kill -0 would not tell.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st := procState(pid)
		if st == "" || st == "Z" {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("plugin %d still running (state %s) 10s after its host was killed", pid, st)
		}
		<-tick.C
	}
}

// TestStartTime measures Start (fork, handshake, connect, GetInfo) and
// the first call after it.
func TestStartTime(t *testing.T) {
	const runs = 5
	var starts, firsts []time.Duration
	for range runs {
		ctx := testCtx(t)
		began := time.Now()
		c, err := grpcplugin.Start(ctx, grpcplugin.ClientConfig{Path: os.Args[0], Env: []string{envPlugin + "=1", noRaceExitSleep}, SocketDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		if _, err := c.Backend().Fence(ctx, &plugin.FenceRequest{ID: "echo"}); err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, time.Since(started))
		starts = append(starts, started.Sub(began))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(starts)
	slices.Sort(firsts)
	t.Logf("Start (incl. GetInfo): min %s median %s max %s; first call after: median %s (%d runs, test binary as plugin)",
		starts[0], starts[runs/2], starts[runs-1], firsts[runs/2], runs)
}
