package shim

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/bridge"
	"github.com/gopmi/gopmi/plugin"
	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// richBootstrap sets every field.
func richBootstrap() *shimv1.Bootstrap {
	b := oneNode(2)
	b.NodeId = 0
	b.Job.Nodes[0].Addr = "10.1.2.3"
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

// FuzzBootstrap feeds the shim's stdin: whatever it reads and validates
// must make a PMI engine that serves the job (bridge.NewJob accepts it)
// within the limits the config promises, and nothing may panic.
func FuzzBootstrap(f *testing.F) {
	for _, o := range []protojson.MarshalOptions{{}, {UseProtoNames: true}} {
		b := richBootstrap()
		b.FenceMode = shimv1.FenceMode_FENCE_MODE_COLLECT
		data, err := o.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"job":{"nspace":"j","size":1,"nodes":[{"id":0,"ranks":[0]}]},"tasks":[{"rank":0,"fd_name":"r"}],"backend":{"name":"local"},"limits":{"kvsMax":"70000"}}`))
	f.Add([]byte(`{"version":1,"job":{"nspace":"j","size":2,"nodes":[{"id":0,"ranks":[0]},{"id":1,"ranks":[1]}],"apps":[{"size":2,"cmd":"a","ranks":[1,0]}]},"tasks":[{"rank":0}],"pmiPortFd":"p","pmiPortSecret":"x","backend":{"name":"local"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := parseBootstrap(bytes.NewReader(data))
		if err != nil {
			return
		}
		l := c.Limits
		if l.KeyMax <= 0 || l.ValMax <= 0 || l.LineMax < l.KeyMax+l.ValMax || l.KVSMax <= 0 || len(c.Tasks) == 0 {
			t.Fatalf("accepted limits %+v, %d tasks", l, len(c.Tasks))
		}
		job, err := bridge.NewJob(context.Background(), bridge.Config{
			Job: c.Job, NodeID: c.NodeID, Preput: c.Preput, Attrs: c.Attrs, Limits: c.Limits,
			FenceMode: c.FenceMode, PortSecret: c.PortSecret, Logger: zerolog.Nop(),
			Backend: bridge.ReadyBackend(plugin.Complete(fuzzBackend{}), &plugin.BackendInfo{Name: "fuzz"}, nil),
		})
		if err != nil {
			t.Fatalf("a validated bootstrap makes no engine: %v\n%q", err, data)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := job.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// fuzzBackend is a backend that implements nothing.
type fuzzBackend struct{ plugin.Unimplemented }

func (fuzzBackend) GetInfo(context.Context) (*plugin.BackendInfo, error) {
	return &plugin.BackendInfo{Name: "fuzz"}, nil
}

func (fuzzBackend) Configure(context.Context, *plugin.ConfigureRequest) (*plugin.ConfigureResponse, error) {
	return &plugin.ConfigureResponse{}, nil
}

// Every field of the bootstrap, set by walking the message's descriptor,
// takes the fast path in both name forms: a field added to the proto
// without an entry in the fast decoder's tables fails here, instead of
// sending every bootstrap that uses it to protojson unseen. The tables
// are hand-written on purpose (see plugin/internal/forwardgen's doc);
// this test is what keeps them complete.
func TestDecodeFastCoversEveryField(t *testing.T) {
	b := &shimv1.Bootstrap{}
	fillEvery(b.ProtoReflect())
	for _, opts := range []protojson.MarshalOptions{{}, {UseProtoNames: true}} {
		data, err := opts.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodeFast(data)
		if !ok {
			t.Errorf("not decoded on the fast path (a field the tables miss?):\n%s", data)
			continue
		}
		if !proto.Equal(b, got) {
			t.Errorf("decoded\n%v\nwant\n%v", got, b)
		}
	}
}

// fillEvery sets every field of m, and of the messages in it, to a value
// that is not the zero value; a repeated field gets one element.
func fillEvery(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			panic(fmt.Sprintf("%s: the bootstrap has no maps; teach fillEvery", fd.FullName()))
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			fillEvery(m.Mutable(fd).List().AppendMutable().Message())
		case fd.IsList():
			m.Mutable(fd).List().Append(someValue(fd))
		case fd.Kind() == protoreflect.MessageKind:
			fillEvery(m.Mutable(fd).Message())
		default:
			m.Set(fd, someValue(fd))
		}
	}
}

// someValue is a non-zero value of a scalar field's kind.
func someValue(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("s")
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	}
	panic(fmt.Sprintf("%s: kind %v; teach someValue", fd.FullName(), fd.Kind()))
}
