package launcher

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// What bootstrapJSON writes is protojson of the same message.
func TestBootstrapJSON(t *testing.T) {
	rich := &shimv1.Bootstrap{
		Version: 1,
		Job: &shimv1.Job{Nspace: "gopmi.1.0", Size: 3, UniverseSize: 8, Parent: "gopmi.1.0",
			Nodes:  []*shimv1.Node{{Id: 0, Name: "vm-0", Ranks: []int32{0, 1}}, {Id: 1, Name: "vm-1", Ranks: []int32{2}}},
			Apps:   []*shimv1.App{{FirstRank: 0, Size: 2, Cmd: "/bin/a"}, {FirstRank: 2, Size: 1, Cmd: "b \"c\""}},
			Preput: []*shimv1.KeyValue{{Key: "k", Value: "v é\n"}}, Attrs: []*shimv1.KeyValue{{Key: "a", Value: ""}}},
		NodeId:  1,
		Tasks:   []*shimv1.Task{{Rank: 2, FdName: "rank2"}},
		Backend: &shimv1.BackendConfig{Name: "local", Path: "/x/gopmi-rm-local", Config: `{"universe":"unix:///u"}`, Args: []string{"-universe", "unix:///u"}, StartAtOnce: true},
		Limits:  &shimv1.Limits{KvsnameMax: 100, KeyMax: 32, ValMax: 4096, LineMax: 1 << 20, KvsMax: 3 << 30},
		Timeouts: &shimv1.Timeouts{Fence: durationpb.New(120 * time.Second), Get: durationpb.New(1500 * time.Millisecond),
			Lookup: durationpb.New(time.Nanosecond), Nodeattr: durationpb.New(0), Spawn: durationpb.New(90 * time.Minute),
			BackendStart: durationpb.New(10 * time.Millisecond), Connect: durationpb.New(123456 * time.Microsecond),
			Shutdown: durationpb.New(2 * time.Second)},
		FenceMode:     shimv1.FenceMode_FENCE_MODE_LAZY,
		PmiPortFd:     "pmi-port",
		LogLevel:      "warn",
		PmiDebug:      true,
		PmiPortSecret: "0123abcd",
	}
	for name, b := range map[string]*shimv1.Bootstrap{"rich": rich, "empty": {}, "version only": {Version: 1}} {
		data, err := bootstrapJSON(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := &shimv1.Bootstrap{}
		if err := protojson.Unmarshal(data, got); err != nil {
			t.Fatalf("%s: protojson refuses %s: %v", name, data, err)
		}
		if !proto.Equal(b, got) {
			t.Errorf("%s: %s reads back as\n%v\nwant\n%v", name, data, got, b)
		}
	}
}

// A string that is not UTF-8 is refused, as protojson refuses it, not
// changed on the way.
func TestBootstrapJSONRefusesBadUTF8(t *testing.T) {
	b := &shimv1.Bootstrap{Version: 1, Job: &shimv1.Job{Apps: []*shimv1.App{{Cmd: "/tmp/caf\xe9/prog"}}}}
	if _, err := bootstrapJSON(b); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("bootstrapJSON: %v", err)
	}
	if _, err := protojson.Marshal(b); err == nil {
		t.Fatal("protojson took it")
	}
}

// Every field of the bootstrap, set by walking the message's descriptor,
// reaches the shim: a field added to the proto that bootstrapJSON does not
// write fails here.
func TestBootstrapJSONWritesEveryField(t *testing.T) {
	b := &shimv1.Bootstrap{}
	fillEvery(b.ProtoReflect())
	data, err := bootstrapJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	got := &shimv1.Bootstrap{}
	if err := protojson.Unmarshal(data, got); err != nil {
		t.Fatalf("protojson refuses %s: %v", data, err)
	}
	if !proto.Equal(b, got) {
		t.Errorf("%s reads back as\n%v\nwant\n%v", data, got, b)
	}
}

// fillEvery sets every field of m, and of the messages in it, to a value
// that is not the zero value; a repeated field gets one element. (The
// shim's fast decoder has the same helper in its tests: neither package
// may import the other.)
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
