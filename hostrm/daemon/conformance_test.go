package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

// runView is one node of a job as a run reaches the daemon: through the
// run's Client on the daemon's real socket, whose kernel credentials the
// daemon checks (the run is this test process: RunName).
type runView struct {
	plugin.Unimplemented
	c    *Client
	job  plugin.Job
	once *sync.Once
}

func (v *runView) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "gopmi-daemon through a run's client", APIVersions: []string{plugin.APIVersion1, plugin.APIVersion11},
		Capabilities: []string{plugin.CapPublish, plugin.CapQuery}}, nil
}

// Configure registers the job once, as a run does for each of its jobs;
// the Client's calls wait for the registration.
func (v *runView) Configure(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	v.once.Do(func() { v.c.Register(v.job, RunConfig{Cmd: "conformance"}) })
	return &plugin.ConfigureResponse{}, nil
}

func (v *runView) Publish(ctx context.Context, req *plugin.PublishRequest) error {
	return v.c.Publish(ctx, req)
}

func (v *runView) Lookup(ctx context.Context, req *plugin.LookupRequest) (*plugin.LookupResponse, error) {
	return v.c.Lookup(ctx, req)
}

func (v *runView) Query(ctx context.Context, req *plugin.QueryRequest) (*plugin.QueryResponse, error) {
	return v.c.Query(ctx, req)
}

func (v *runView) Unpublish(ctx context.Context, req *plugin.UnpublishRequest) error {
	return v.c.Unpublish(ctx, req)
}

// The daemon's name service passes the SDK's name-service cases, and its
// answers the query vocabulary's, as a run's client reaches it: the same
// rules as the universe's (package names, plugin.Query*), through the
// socket, the registration and the per-user checks.
func TestNameServiceConformance(t *testing.T) {
	s, err := NewServer(Options{Logger: zerolog.Nop()}) // checkRun: the real one
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	path := serveTest(t, s)
	c := Dial(path, RunName(), zerolog.Nop())
	t.Cleanup(func() { _ = c.Close() })
	var mu sync.Mutex
	jobs := map[string]*sync.Once{}
	h := plugintest.Harness{
		Timeout: time.Second,
		NewNode: func(t *testing.T, job plugin.Job, node int32) plugin.Backend {
			mu.Lock()
			defer mu.Unlock()
			if jobs[job.Nspace] == nil {
				jobs[job.Nspace] = new(sync.Once)
			}
			return &runView{c: c, job: job, once: jobs[job.Nspace]}
		},
	}
	plugintest.RunNameService(t, h)
	plugintest.RunQueries(t, h)
}
