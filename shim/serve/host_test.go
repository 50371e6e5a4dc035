package serve

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// hosted is one Host of an n-rank job on one node, every task on its own
// connection.
type hosted struct {
	h     *Hosted
	tasks []*task
}

func hostJob(t *testing.T, n int, edit func(b *shimv1.Bootstrap), o HostOptions) (*hosted, error) {
	t.Helper()
	c := testConfig(t, n, edit)
	j := &hosted{}
	o.Conns = map[int32]net.Conn{}
	for _, tk := range c.Tasks {
		srv, cli := connected(t)
		o.Conns[tk.Rank] = srv
		j.tasks = append(j.tasks, &task{t: t, c: cli, r: bufio.NewReader(cli)})
	}
	o.Logger = zerolog.Nop()
	var err error
	j.h, err = Host(context.Background(), c, o)
	return j, err
}

// fakeStart is a HostOptions.Start that counts its calls and hands out a
// fake backend that configures, with exited as its death and closed
// counting its Close.
func fakeStart(starts, closed *atomic.Int32, exited <-chan struct{}) func(context.Context) (*Started, error) {
	return func(context.Context) (*Started, error) {
		starts.Add(1)
		be := &plugintest.Fake{
			ConfigureF: func(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
				return &plugin.ConfigureResponse{}, nil
			},
			ClientConnectedF: func(context.Context, *plugin.ClientRequest) error { return nil },
			ClientFinalizedF: func(context.Context, *plugin.ClientRequest) error { return nil },
		}
		return &Started{Backend: be, Exited: exited, Close: func() error { closed.Add(1); return nil }}, nil
	}
}

// A host that cannot report readiness fails the job at once, and its
// backend never starts.
func TestHostReadyFails(t *testing.T) {
	var starts, closed atomic.Int32
	j, err := hostJob(t, 1, func(b *shimv1.Bootstrap) { b.Backend.StartAtOnce = true }, HostOptions{
		Start: fakeStart(&starts, &closed, nil),
		Ready: func() error { return errors.New("no launcher listens") },
	})
	if err == nil || !strings.Contains(err.Error(), "no launcher listens") || j.h != nil {
		t.Fatalf("Host: %v, %v; want the readiness error", j.h, err)
	}
	if n := starts.Load(); n != 0 {
		t.Errorf("the backend started %d times", n)
	}
}

// A job on one node that needs nothing from elsewhere ends without its
// backend; a ready host said so first.
func TestHostJobNeedsNoBackend(t *testing.T) {
	var starts, closed, ready atomic.Int32
	j, err := hostJob(t, 2, nil, HostOptions{
		Start: fakeStart(&starts, &closed, nil),
		Ready: func() error { ready.Add(1); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range j.tasks {
		k.send("cmd=init pmi_version=1 pmi_subversion=1")
		k.expect("cmd=response_to_init rc=0")
	}
	for _, k := range j.tasks {
		k.send("cmd=barrier_in")
	}
	for _, k := range j.tasks {
		k.expect("cmd=barrier_out rc=0")
		k.send("cmd=finalize")
		k.expect("cmd=finalize_ack rc=0")
		k.c.Close()
	}
	if err := j.h.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	j.h.Close()
	if ready.Load() != 1 || starts.Load() != 0 || closed.Load() != 0 {
		t.Errorf("ready %d, started %d, closed %d times; want 1, 0, 0", ready.Load(), starts.Load(), closed.Load())
	}
}

// A backend that dies during the job fails it with ErrBackend, and Close
// closes it once.
func TestHostBackendDies(t *testing.T) {
	var starts, closed atomic.Int32
	exited := make(chan struct{})
	j, err := hostJob(t, 1, func(b *shimv1.Bootstrap) { b.Backend.StartAtOnce = true }, HostOptions{
		Start: fakeStart(&starts, &closed, exited),
	})
	if err != nil {
		t.Fatal(err)
	}
	k := j.tasks[0]
	k.send("cmd=init pmi_version=1 pmi_subversion=1")
	k.expect("cmd=response_to_init rc=0")
	close(exited)
	err = j.h.Wait(context.Background())
	j.h.Close()
	if ExitCode(err) != ExitBackend || !strings.Contains(err.Error(), "gopmi-rm-fake exited during the job") {
		t.Errorf("Wait: %v (exit %d), want the backend's death", err, ExitCode(err))
	}
	if starts.Load() != 1 || closed.Load() != 1 {
		t.Errorf("started %d, closed %d times; want 1, 1", starts.Load(), closed.Load())
	}
}

// A backend that does not start fails the request that needed it and
// the job, with ErrBackend, whatever error the host's Start returned.
func TestHostBackendDoesNotStart(t *testing.T) {
	j, err := hostJob(t, 1, nil, HostOptions{
		Start: func(context.Context) (*Started, error) { return nil, errors.New("no such binary") },
	})
	if err != nil {
		t.Fatal(err)
	}
	k := j.tasks[0]
	k.send("cmd=init pmi_version=1 pmi_subversion=1")
	k.expect("cmd=response_to_init rc=0")
	k.send("cmd=publish_name service=s port=p")
	k.expect("cmd=publish_result rc=-1")
	err = j.h.Wait(context.Background())
	j.h.Close()
	if !errors.Is(err, ErrBackend) || !strings.Contains(err.Error(), "no such binary") {
		t.Errorf("Wait: %v, want ErrBackend with the start's error", err)
	}
}
