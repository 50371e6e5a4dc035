package serve

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// validBootstrap is a two-node, four-rank job seen from node 0.
func validBootstrap() *shimv1.Bootstrap {
	return &shimv1.Bootstrap{
		Version: 1,
		Job: &shimv1.Job{
			Nspace: "job-1",
			Size:   4,
			Nodes: []*shimv1.Node{
				{Id: 0, Name: "n0", Ranks: []int32{0, 1}},
				{Id: 1, Name: "n1", Ranks: []int32{2, 3}},
			},
		},
		NodeId: 0,
		Tasks: []*shimv1.Task{
			{Rank: 0, FdName: "rank0"},
			{Rank: 1, FdName: "rank1"},
		},
		Backend: &shimv1.BackendConfig{Name: "local"},
	}
}

func TestNewConfigDefaults(t *testing.T) {
	c, err := NewConfig(validBootstrap())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bridge.Limits{KvsnameMax: 256, KeyMax: 64, ValMax: 1024, LineMax: 1 << 20, KVSMax: bridge.DefaultKVSMax}, c.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	wantT := bridge.Timeouts{Fence: 120 * time.Second, Get: 120 * time.Second, Lookup: 60 * time.Second,
		NodeAttr: 120 * time.Second, Spawn: 120 * time.Second}
	if diff := cmp.Diff(wantT, c.Timeouts); diff != "" {
		t.Errorf("timeouts (-want +got):\n%s", diff)
	}
	if c.BackendStart != 30*time.Second || c.Shutdown != 5*time.Second || c.Connect != 0 {
		t.Errorf("backend start %v, shutdown %v, connect %v; want 30s, 5s, 0", c.BackendStart, c.Shutdown, c.Connect)
	}
	if c.FenceMode != bridge.FenceCollect || c.LogLevel != zerolog.InfoLevel {
		t.Errorf("fence mode %v, log level %v", c.FenceMode, c.LogLevel)
	}
	wantJob := plugin.Job{
		Nspace: "job-1", Size: 4, UniverseSize: 4,
		Nodes: []plugin.Node{{ID: 0, Name: "n0", Ranks: []int32{0, 1}}, {ID: 1, Name: "n1", Ranks: []int32{2, 3}}},
		Apps:  []plugin.App{{FirstRank: 0, Size: 4}},
	}
	if diff := cmp.Diff(wantJob, c.Job); diff != "" {
		t.Errorf("job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Task{{0, "rank0"}, {1, "rank1"}}, c.Tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	if c.Backend.BinaryName() != "gopmi-rm-local" {
		t.Errorf("backend %q", c.Backend.BinaryName())
	}
}

func TestNewConfigExplicit(t *testing.T) {
	b := validBootstrap()
	b.Limits = &shimv1.Limits{KvsnameMax: 100, KeyMax: 32, ValMax: 4096, LineMax: 8192, KvsMax: 1 << 20}
	b.Timeouts = &shimv1.Timeouts{
		Fence:        durationpb.New(10 * time.Second),
		Lookup:       durationpb.New(3 * time.Second),
		BackendStart: durationpb.New(time.Second),
		Connect:      durationpb.New(2 * time.Second),
		Shutdown:     durationpb.New(time.Second),
	}
	b.FenceMode = shimv1.FenceMode_FENCE_MODE_MODEX
	b.LogLevel = "debug"
	b.PmiDebug = true
	b.Job.UniverseSize = 8
	b.Job.Apps = []*shimv1.App{{FirstRank: 0, Size: 3, Cmd: "a"}, {FirstRank: 3, Size: 1, Cmd: "b"}}
	b.Job.Preput = []*shimv1.KeyValue{{Key: "k", Value: "v"}}
	b.Job.Attrs = []*shimv1.KeyValue{{Key: "PMI_hwloc_xmlfile", Value: "/x.xml"}}
	b.Backend = &shimv1.BackendConfig{Path: "/opt/rm", Config: `{"a":1}`, Args: []string{"-v"}}
	c, err := NewConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bridge.Limits{KvsnameMax: 100, KeyMax: 32, ValMax: 4096, LineMax: 8192, KVSMax: 1 << 20}, c.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	wantT := bridge.Timeouts{Fence: 10 * time.Second, Get: 10 * time.Second, Lookup: 3 * time.Second,
		NodeAttr: 10 * time.Second, Spawn: 120 * time.Second}
	if diff := cmp.Diff(wantT, c.Timeouts); diff != "" {
		t.Errorf("timeouts (-want +got):\n%s", diff)
	}
	if c.BackendStart != time.Second || c.Connect != 2*time.Second || c.Shutdown != time.Second {
		t.Errorf("backend start %v connect %v shutdown %v", c.BackendStart, c.Connect, c.Shutdown)
	}
	if c.FenceMode != bridge.FenceModex || c.LogLevel != zerolog.DebugLevel || !c.PMIDebug {
		t.Errorf("fence mode %v log level %v pmi debug %v", c.FenceMode, c.LogLevel, c.PMIDebug)
	}
	if c.Job.UniverseSize != 8 || len(c.Job.Apps) != 2 || !cmp.Equal(c.Job.Apps[1], plugin.App{FirstRank: 3, Size: 1, Cmd: "b"}) {
		t.Errorf("job %+v", c.Job)
	}
	if diff := cmp.Diff([]plugin.Info{{Key: "k", Value: "v"}}, c.Preput); diff != "" {
		t.Errorf("preput (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]plugin.Info{{Key: "PMI_hwloc_xmlfile", Value: "/x.xml"}}, c.Attrs); diff != "" {
		t.Errorf("attrs (-want +got):\n%s", diff)
	}
	if c.Backend.Path != "/opt/rm" || string(c.Backend.Config) != `{"a":1}` || !cmp.Equal(c.Backend.Args, []string{"-v"}) {
		t.Errorf("backend %+v", c.Backend)
	}
}

func TestNewConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(b *shimv1.Bootstrap)
		field string
		msg   string // a part of the message
	}{
		{"version 0", func(b *shimv1.Bootstrap) { b.Version = 0 }, "version", "got 0"},
		{"rendezvous without pmix", func(b *shimv1.Bootstrap) { b.PmixRendezvousFd = "pmix-rendezvous" }, "pmix_rendezvous_fd", "without pmix"},
		{"rendezvous name", func(b *shimv1.Bootstrap) {
			b.Pmix, b.PmixRendezvousFd = true, "a:b"
			for _, t := range b.Tasks {
				t.FdName = ""
			}
		}, "pmix_rendezvous_fd", "LISTEN_FDNAMES separator"},
		{"version 2", func(b *shimv1.Bootstrap) { b.Version = 2 }, "version", "speaks 1"},
		{"no job", func(b *shimv1.Bootstrap) { b.Job = nil }, "job", "missing"},
		{"no nspace", func(b *shimv1.Bootstrap) { b.Job.Nspace = "" }, "job.nspace", "empty"},
		{"nspace space", func(b *shimv1.Bootstrap) { b.Job.Nspace = "a b" }, "job.nspace", "cannot carry"},
		{"nspace too long", func(b *shimv1.Bootstrap) { b.Job.Nspace = strings.Repeat("x", 256) }, "job.nspace", "kvsname_max 256"},
		{"size 0", func(b *shimv1.Bootstrap) { b.Job.Size = 0 }, "job.size", "positive"},
		{"universe small", func(b *shimv1.Bootstrap) { b.Job.UniverseSize = 2 }, "job.universe_size", "less than job.size 4"},
		{"no nodes", func(b *shimv1.Bootstrap) { b.Job.Nodes = nil }, "job.nodes", "empty"},
		{"dup node id", func(b *shimv1.Bootstrap) { b.Job.Nodes[1].Id = 0 }, "job.nodes[1].id", "already used by job.nodes[0]"},
		{"node no ranks", func(b *shimv1.Bootstrap) { b.Job.Nodes[1].Ranks = nil }, "job.nodes[1].ranks", "empty"},
		{"rank out of range", func(b *shimv1.Bootstrap) { b.Job.Nodes[1].Ranks = []int32{2, 4} }, "job.nodes[1].ranks", "rank 4 outside 0..3"},
		{"rank twice", func(b *shimv1.Bootstrap) { b.Job.Nodes[1].Ranks = []int32{1, 2, 3} }, "job.nodes[1].ranks", "rank 1 already on job.nodes[0]"},
		{"rank on no node", func(b *shimv1.Bootstrap) { b.Job.Nodes[1].Ranks = []int32{2} }, "job.nodes", "rank 3 is on no node"},
		{"app gap", func(b *shimv1.Bootstrap) {
			b.Job.Apps = []*shimv1.App{{FirstRank: 0, Size: 1}, {FirstRank: 2, Size: 2}}
		}, "job.apps[1].first_rank", "expected 1"},
		{"app size", func(b *shimv1.Bootstrap) { b.Job.Apps = []*shimv1.App{{FirstRank: 0, Size: 0}} }, "job.apps[0].size", "positive"},
		{"app too big", func(b *shimv1.Bootstrap) { b.Job.Apps = []*shimv1.App{{FirstRank: 0, Size: 5}} }, "job.apps[0].size", "exceed job.size 4"},
		{"apps short", func(b *shimv1.Bootstrap) { b.Job.Apps = []*shimv1.App{{FirstRank: 0, Size: 3}} }, "job.apps", "cover ranks 0..2"},
		{"preput empty key", func(b *shimv1.Bootstrap) { b.Job.Preput = []*shimv1.KeyValue{{Value: "v"}} }, "job.preput[0].key", "empty"},
		{"preput dup", func(b *shimv1.Bootstrap) {
			b.Job.Preput = []*shimv1.KeyValue{{Key: "a"}, {Key: "a"}}
		}, "job.preput[1].key", "already set by job.preput[0]"},
		{"preput long key", func(b *shimv1.Bootstrap) {
			b.Job.Preput = []*shimv1.KeyValue{{Key: strings.Repeat("k", 65)}}
		}, "job.preput[0].key", "key_max 64"},
		{"preput long value", func(b *shimv1.Bootstrap) {
			b.Job.Preput = []*shimv1.KeyValue{{Key: "k", Value: strings.Repeat("v", 1025)}}
		}, "job.preput[0].value", "val_max 1024"},
		{"attr newline", func(b *shimv1.Bootstrap) {
			b.Job.Attrs = []*shimv1.KeyValue{{Key: "k", Value: "a\nb"}}
		}, "job.attrs[0].value", "newline"},
		{"attr bad key", func(b *shimv1.Bootstrap) { b.Job.Attrs = []*shimv1.KeyValue{{Key: "a=b"}} }, "job.attrs[0].key", "cannot carry"},
		{"node id unknown", func(b *shimv1.Bootstrap) { b.NodeId = 7 }, "node_id", "7 is not in job.nodes (ids 0, 1)"},
		{"no tasks", func(b *shimv1.Bootstrap) { b.Tasks = nil }, "tasks", "empty; node 0 hosts ranks 0-1"},
		{"task rank elsewhere", func(b *shimv1.Bootstrap) { b.Tasks[1].Rank = 2 }, "tasks[1].rank", "rank 2 is not on node 0 (which hosts ranks 0-1)"},
		{"task rank twice", func(b *shimv1.Bootstrap) { b.Tasks[1].Rank = 0 }, "tasks[1].rank", "already used by tasks[0]"},
		{"task missing", func(b *shimv1.Bootstrap) { b.Tasks = b.Tasks[:1] }, "tasks", "rank 1 of node 0 has no task"},
		{"fd name dup", func(b *shimv1.Bootstrap) { b.Tasks[1].FdName = "rank0" }, "tasks[1].fd_name", `"rank0" already used by tasks[0]`},
		{"fd name empty", func(b *shimv1.Bootstrap) { b.Tasks[1].FdName = "" }, "tasks[1].fd_name", "pmi_port_fd is not set"},
		{"fd name colon", func(b *shimv1.Bootstrap) { b.Tasks[1].FdName = "a:b" }, "tasks[1].fd_name", "separator"},
		{"fd name is port", func(b *shimv1.Bootstrap) { b.PmiPortFd = "rank1" }, "tasks[1].fd_name", "pmi_port_fd listener"},
		{"port colon", func(b *shimv1.Bootstrap) { b.PmiPortFd = "p:q" }, "pmi_port_fd", "separator"},
		{"no backend", func(b *shimv1.Bootstrap) { b.Backend = nil }, "backend", "missing"},
		{"backend unnamed", func(b *shimv1.Bootstrap) { b.Backend.Name = "" }, "backend.name", "backend.path is not set"},
		{"backend slash", func(b *shimv1.Bootstrap) { b.Backend.Name = "../x" }, "backend.name", "use backend.path"},
		{"limit negative", func(b *shimv1.Bootstrap) { b.Limits = &shimv1.Limits{KeyMax: -1} }, "limits.key_max", "negative"},
		{"limit tiny", func(b *shimv1.Bootstrap) { b.Limits = &shimv1.Limits{ValMax: 10} }, "limits.val_max", "below the minimum 64"},
		{"line small", func(b *shimv1.Bootstrap) { b.Limits = &shimv1.Limits{LineMax: 100} }, "limits.line_max", "below the minimum 1024"},
		{"kvs small", func(b *shimv1.Bootstrap) { b.Limits = &shimv1.Limits{KvsMax: 1000} }, "limits.kvs_max", "below the minimum 65536"},
		{"line huge", func(b *shimv1.Bootstrap) { b.Limits = &shimv1.Limits{LineMax: 1 << 30} }, "limits.line_max", "above the maximum"},
		{"value over the PMI-2 body", func(b *shimv1.Bootstrap) {
			b.Limits = &shimv1.Limits{LineMax: 4 << 20, ValMax: 1 << 20}
		}, "limits.val_max", "above the maximum 995903"},
		{"line cannot hold put", func(b *shimv1.Bootstrap) {
			b.Limits = &shimv1.Limits{LineMax: 2048, ValMax: 1000}
		}, "limits.line_max", "cannot hold a put"},
		{"timeout negative", func(b *shimv1.Bootstrap) {
			b.Timeouts = &shimv1.Timeouts{Fence: durationpb.New(-time.Second)}
		}, "timeouts.fence", "negative"},
		{"timeout huge", func(b *shimv1.Bootstrap) {
			b.Timeouts = &shimv1.Timeouts{Shutdown: durationpb.New(30 * 24 * time.Hour)}
		}, "timeouts.shutdown", "over the maximum"},
		{"timeout invalid", func(b *shimv1.Bootstrap) {
			b.Timeouts = &shimv1.Timeouts{Lookup: &durationpb.Duration{Seconds: 1, Nanos: -1}}
		}, "timeouts.lookup", ""},
		{"fence mode", func(b *shimv1.Bootstrap) { b.FenceMode = 9 }, "fence_mode", "unknown value 9"},
		{"log level", func(b *shimv1.Bootstrap) { b.LogLevel = "loud" }, "log_level", `"loud" is not one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := validBootstrap()
			tt.edit(b)
			_, err := NewConfig(b)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("field %q, want %q (error: %v)", fe.Field, tt.field, err)
			}
			if !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", fe.Msg, tt.msg)
			}
			if !errors.Is(err, ErrUsage) || ExitCode(err) != ExitUsage {
				t.Errorf("errors.Is(ErrUsage) false or exit code %d", ExitCode(err))
			}
			if !strings.HasPrefix(err.Error(), "bad bootstrap: "+tt.field+": ") {
				t.Errorf("message %q does not start with the field", err)
			}
		})
	}
}

// No backend call gives up before the backend may have come up.
func TestBridgeTimeoutsCoverBackendStart(t *testing.T) {
	b := validBootstrap()
	b.Timeouts = &shimv1.Timeouts{BackendStart: durationpb.New(90 * time.Second)}
	c, err := NewConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.bridgeTimeouts().Backend; got != 90*time.Second {
		t.Fatalf("bridge backend time-out %v, want 90s", got)
	}
}

// A PMIx face's READY carries its tasks' environment one variable a line,
// which the step daemon reads back as it was; a variable READY cannot
// carry is refused.
func TestPMIxReady(t *testing.T) {
	env := []string{"PMIX_NAMESPACE=slurm.1.0", "PMIX_SERVER_URI41=pmix-server.1;tcp4://127.0.0.1:4000", "EMPTY=", "EQ=a=b"}
	msg, err := PMIxReady(2, env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg, "READY=1\nSTATUS=serving 2 PMIx tasks\n") {
		t.Errorf("READY message %q", msg)
	}
	if got := ParsePMIxEnv(msg); !slices.Equal(got, env) {
		t.Errorf("ParsePMIxEnv = %q, want %q", got, env)
	}
	// A step daemon older than PMIxVar finds the JSON array it knows.
	if !strings.Contains(msg, "\n"+PMIxEnv+`=["PMIX_NAMESPACE=slurm.1.0",`) {
		t.Errorf("READY lacks the deprecated %s array: %q", PMIxEnv, msg)
	}
	for _, bad := range []string{"A=b\nc", "A=\x00", "NOEQUALS", "BIG=" + strings.Repeat("x", 40<<10)} {
		if _, err := PMIxReady(1, []string{bad}); err == nil {
			t.Errorf("PMIxReady took %q", bad)
		}
	}
}
