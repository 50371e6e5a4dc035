package shim

import (
	"bytes"
	"os"
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
			c, _, err := parseBootstrap(strings.NewReader(tt.in))
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
	_, _, err := readBootstrap(strings.NewReader(strings.Repeat(" ", maxBootstrap+1)))
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
	got, _, err := readBootstrap(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(b, got) {
		t.Errorf("round trip changed the message:\n%v\n%v", b, got)
	}
}

// The example in proto/README.md and proto/gopmi/shim/v1/example.json is
// a bootstrap the shim takes, and the README shows it whole.
func TestExampleBootstrap(t *testing.T) {
	data, err := os.ReadFile("../proto/gopmi/shim/v1/example.json")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := parseBootstrap(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the example bootstrap: %v", err)
	}
	if c.NodeID != 1 || len(c.Tasks) != 2 || c.Backend.BinaryName() != "gopmi-rm-slurm" || c.Timeouts.Fence != 120*time.Second {
		t.Errorf("the example bootstrap reads as %+v", c)
	}
	if _, ok := decodeFast(data); !ok {
		t.Error("the example bootstrap is not in the plain form the shim decodes fast")
	}
	readme, err := os.ReadFile("../proto/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, bytes.TrimSpace(data)) {
		t.Error("proto/README.md does not show example.json as it is")
	}
}

// go doc shim shows the example too.
func TestExampleBootstrapInDoc(t *testing.T) {
	data, err := os.ReadFile("../proto/gopmi/shim/v1/example.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(doc), "\n") {
		if rest, ok := strings.CutPrefix(l, "//\t"); ok {
			lines = append(lines, rest)
		}
	}
	if !strings.Contains(strings.Join(lines, "\n"), strings.TrimSpace(string(data))) {
		t.Error("shim/doc.go does not show example.json as it is")
	}
}
