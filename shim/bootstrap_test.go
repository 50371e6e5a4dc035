package shim

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
	"github.com/gopmi/gopmi/shim/serve"
)

func TestReadBootstrap(t *testing.T) {
	good, err := protojson.Marshal(oneNode(2))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		msg  string // "" means success
	}{
		{"protojson", string(good), ""},
		{"proto field names", `{"version":1,"job":{"nspace":"j","size":1,"nodes":[{"id":0,"ranks":[0]}]},
			"node_id":0,"tasks":[{"rank":0,"fd_name":"rank0"}],"backend":{"name":"local"},
			"timeouts":{"fence":"2.5s"},"fence_mode":"FENCE_MODE_LAZY"}`, ""},
		{"empty", "", "stdin: empty"},
		{"blank", " \n", "stdin: empty"},
		{"not json", "version: 1", "parse protojson"},
		{"unknown field", `{"version":1,"jobb":{}}`, `unknown field "jobb"`},
		{"unknown nested field", `{"version":1,"job":{"nspace":"j","sizes":1}}`, `unknown field "sizes"`},
		{"wrong type", `{"version":"one"}`, "version"},
		{"invalid", `{"version":1,"job":{"nspace":"j","size":0}}`, "job.size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseBootstrap(strings.NewReader(tt.in))
			if tt.msg == "" {
				if err != nil || c == nil {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want an error containing %q", err, tt.msg)
			}
			if serve.ExitCode(err) != serve.ExitUsage {
				t.Errorf("exit code %d, want %d", serve.ExitCode(err), serve.ExitUsage)
			}
		})
	}
}

func TestReadBootstrapTooLong(t *testing.T) {
	_, err := readBootstrap(strings.NewReader(strings.Repeat(" ", maxBootstrap+1)))
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v", err)
	}
}

// The fixture round-trips: what a C step daemon prints parses the same.
func TestBootstrapRoundTrip(t *testing.T) {
	b := oneNode(2)
	b.Timeouts = &shimv1.Timeouts{Fence: durationpb.New(1500 * time.Millisecond)}
	data, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readBootstrap(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(b, got) {
		t.Errorf("round trip changed the message:\n%v\n%v", b, got)
	}
}
