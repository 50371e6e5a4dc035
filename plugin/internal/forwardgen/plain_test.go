package main

import (
	"bytes"
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
// rule stops the generator, naming it.
func TestRefusesWhatThePlainFormCannotCarry(t *testing.T) {
	fdp := protodesc.ToFileDescriptorProto(shimv1.File_gopmi_shim_v1_bootstrap_proto)
	for _, add := range []*descriptorpb.FieldDescriptorProto{
		{Name: ptr("ratio"), Number: ptr[int32](99), Type: descriptorpb.FieldDescriptorProto_TYPE_DOUBLE.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: ptr("ratio")},
		{Name: ptr("modes"), Number: ptr[int32](99), Type: descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum(), TypeName: ptr(".gopmi.shim.v1.FenceMode"), Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(), JsonName: ptr("modes")},
	} {
		f := proto.Clone(fdp).(*descriptorpb.FileDescriptorProto)
		f.MessageType[0].Field = append(f.MessageType[0].Field, add)
		file, err := protodesc.NewFile(f, protoregistry.GlobalFiles)
		if err != nil {
			t.Fatal(err)
		}
		err = checkKinds(file.Messages().Get(0))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("gopmi.shim.v1.Bootstrap."+add.GetName())) {
			t.Errorf("field %s: %v, want a refusal naming it", add.GetName(), err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
