package shim

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// richBootstrap sets every field.
func richBootstrap() *shimv1.Bootstrap {
	b := oneNode(2)
	b.NodeId = 0
	b.Job.UniverseSize = 8
	b.Job.Parent = "parent.0"
	b.Job.Apps = []*shimv1.App{{FirstRank: 0, Size: 1, Cmd: "a", Ranks: []int32{0}}, {FirstRank: 1, Size: 1, Cmd: "b c"}}
	b.Job.Preput = []*shimv1.KeyValue{{Key: "PARENT_ROOT_PORT_NAME", Value: "tag#0$description#x$"}}
	b.Job.Attrs = []*shimv1.KeyValue{{Key: "PMI_hwloc_xmlfile", Value: "/tmp/topo é.xml"}}
	b.Backend.Config = `{"universe":"unix:///tmp/gopmi-1/universe.sock"}`
	b.Backend.StartAtOnce = true
	b.Limits = &shimv1.Limits{KvsnameMax: 100, KeyMax: 32, ValMax: 4096, LineMax: 1 << 20, KvsMax: 3 << 30}
	b.Timeouts = &shimv1.Timeouts{
		Fence: durationpb.New(120 * time.Second), Get: durationpb.New(1500 * time.Millisecond),
		Lookup: durationpb.New(time.Nanosecond), Nodeattr: durationpb.New(0), Spawn: durationpb.New(time.Hour),
		BackendStart: durationpb.New(30 * time.Second), Connect: durationpb.New(250 * time.Millisecond),
		Shutdown: durationpb.New(2 * time.Second),
	}
	b.FenceMode = shimv1.FenceMode_FENCE_MODE_MODEX
	b.PmiPortFd = ""
	b.LogLevel = "debug"
	b.PmiDebug = true
	b.PmiPortSecret = "0123abcd"
	return b
}

// What protojson writes (gopmi run's form) and the proto-name form a C
// step daemon may write both take the fast path, to the same message.
func TestDecodeFastPlainForms(t *testing.T) {
	b := richBootstrap()
	camel, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	snake, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true}.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"json names": camel, "proto names": snake} {
		got, ok := decodeFast(data)
		if !ok {
			t.Errorf("%s: not decoded on the fast path:\n%s", name, data)
			continue
		}
		if !proto.Equal(b, got) {
			t.Errorf("%s: decoded\n%v\nwant\n%v", name, got, b)
		}
	}
}

// Forms protojson alone decides: decodeFast leaves them.
func TestDecodeFastLeavesTheRest(t *testing.T) {
	for _, in := range []string{
		`{"version":1,"nodeId":0,"node_id":0}`,       // one field twice
		`{"version":"1"}`,                            // a number as a string
		`{"version":1.0}`,                            // not an integer literal
		`{"version":-0}`,                             //
		`{"version":null}`,                           // null
		`{"fenceMode":2}`,                            // an enum by number
		`{"fenceMode":"LAZY"}`,                       // not a name
		`{"timeouts":{"fence":"-1s"}}`,               // negative
		`{"timeouts":{"fence":"1.s"}}`,               //
		`{"timeouts":{"fence":"1.0000000001s"}}`,     // ten digits
		`{"timeouts":{"fence":"1m"}}`,                //
		`{"jobb":{}}`,                                // unknown field
		`{"Version":1}`,                              // not a name protojson knows
		`{"version":1} {}`,                           // trailing value
		`{"version":1} x`,                            // trailing garbage
		`[]`,                                         //
		`{"logLevel":"\ud800"}`,                      // a lone surrogate
		"{\"logLevel\":\"\xff\"}",                    // invalid UTF-8
		`{"version":4294967296}`,                     // out of range
		`{"job":{"nodes":[{"ranks":[2147483648]}]}}`, //
		`{"job":{"nodes":[null]}}`,                   //
		`{"job":{"preput":[{"key":"k","value":"v","x":1}]}}`, //
	} {
		if b, ok := decodeFast([]byte(in)); ok {
			t.Errorf("decodeFast(%s) took it: %v", in, b)
		}
	}
}

// FuzzDecodeFast holds decodeFast to protojson: whatever it accepts,
// protojson accepts to the same message.
func FuzzDecodeFast(f *testing.F) {
	b := richBootstrap()
	for _, o := range []protojson.MarshalOptions{{}, {UseProtoNames: true}, {Multiline: true}} {
		data, err := o.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"job":{"nspace":"j","size":1,"nodes":[{"id":0,"ranks":[0]}]},"tasks":[{"rank":0,"fd_name":"r"}],"backend":{"name":"local"},"timeouts":{"fence":"2.5s"}}`))
	f.Add([]byte(`{"timeouts":{"fence":"315576000000.999999999s"}}`))
	f.Add([]byte(`{"job":{"nspace":"a\u00e9\n"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeFast(data)
		if !ok {
			return
		}
		want := &shimv1.Bootstrap{}
		if err := protojson.Unmarshal(data, want); err != nil {
			t.Fatalf("decodeFast accepted what protojson refuses (%v):\n%q", err, data)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("decodeFast and protojson differ on\n%q\nfast: %v\nprotojson: %v", data, got, want)
		}
	})
}
