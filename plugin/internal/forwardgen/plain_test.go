package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

func TestPlainNames(t *testing.T) {
	for in, want := range map[protoreflect.Name]string{"node_id": "NodeId", "pmix_rendezvous_fd": "PmixRendezvousFd", "kvsname_max": "KvsnameMax", "pmix": "Pmix"} {
		if got := goName(in); got != want {
			t.Errorf("goName(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{"BackendConfig": "BACKEND_CONFIG", "Job": "JOB", "KeyValue": "KEY_VALUE"} {
		if got := upper(in); got != want {
			t.Errorf("upper(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestRefusesWhatThePlainFormCannotCarry: a field of a kind without a
// rule, or one the generator would name wrongly, stops it, naming the
// field; so do a nested type and an enum without a common prefix.
func TestRefusesWhatThePlainFormCannotCarry(t *testing.T) {
	fdp := protodesc.ToFileDescriptorProto(shimv1.File_gopmi_shim_v1_bootstrap_proto)
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	field := func(name string, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: ptr(name), Number: ptr[int32](99), Type: typ.Enum(), Label: optional, JsonName: ptr(name)}
	}
	for _, tc := range []struct {
		name   string
		change func(*descriptorpb.FileDescriptorProto)
		want   string
	}{
		{"a double", func(f *descriptorpb.FileDescriptorProto) {
			f.MessageType[0].Field = append(f.MessageType[0].Field, field("ratio", descriptorpb.FieldDescriptorProto_TYPE_DOUBLE))
		}, "gopmi.shim.v1.Bootstrap.ratio"},
		{"a list of enums", func(f *descriptorpb.FileDescriptorProto) {
			fd := field("modes", descriptorpb.FieldDescriptorProto_TYPE_ENUM)
			fd.TypeName, fd.Label = ptr(".gopmi.shim.v1.FenceMode"), descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
			f.MessageType[0].Field = append(f.MessageType[0].Field, fd)
		}, "gopmi.shim.v1.Bootstrap.modes"},
		{"an optional scalar", func(f *descriptorpb.FileDescriptorProto) {
			fd := field("depth", descriptorpb.FieldDescriptorProto_TYPE_INT32)
			fd.Proto3Optional, fd.OneofIndex = ptr(true), ptr[int32](int32(len(f.MessageType[0].OneofDecl)))
			f.MessageType[0].OneofDecl = append(f.MessageType[0].OneofDecl, &descriptorpb.OneofDescriptorProto{Name: ptr("_depth")})
			f.MessageType[0].Field = append(f.MessageType[0].Field, fd)
		}, "gopmi.shim.v1.Bootstrap.depth"},
		{"a field Go spells otherwise", func(f *descriptorpb.FileDescriptorProto) {
			f.MessageType[0].Field = append(f.MessageType[0].Field, field("ipv4addr", descriptorpb.FieldDescriptorProto_TYPE_INT32))
		}, "gopmi.shim.v1.Bootstrap.ipv4addr"},
		{"a nested message", func(f *descriptorpb.FileDescriptorProto) {
			f.MessageType[0].NestedType = append(f.MessageType[0].NestedType, &descriptorpb.DescriptorProto{Name: ptr("Inner")})
		}, "gopmi.shim.v1.Bootstrap: a type nested"},
		{"an enum without its prefix", func(f *descriptorpb.FileDescriptorProto) {
			f.EnumType[0].Value[2].Name = ptr("LAZY")
		}, "LAZY does not begin with FENCE_MODE_"},
	} {
		f := proto.Clone(fdp).(*descriptorpb.FileDescriptorProto)
		tc.change(f)
		file, err := protodesc.NewFile(f, protoregistry.GlobalFiles)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := checkFile(file); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	if err := checkFile(shimv1.File_gopmi_shim_v1_bootstrap_proto); err != nil {
		t.Errorf("the bootstrap itself: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
