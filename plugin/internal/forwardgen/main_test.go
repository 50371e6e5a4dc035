package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// TestGeneratedIsCurrent: the committed files are what the contract's
// interfaces make now (make generate writes them).
func TestGeneratedIsCurrent(t *testing.T) {
	files, err := generate("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 {
		t.Errorf("%d files generated, want 8", len(files))
	}
	for path, want := range files {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v: run make generate", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not current: run make generate", filepath.Clean(path))
		}
	}
}

// TestReadContract: every method of plugin.Full is found with its names,
// request, response and capability.
func TestReadContract(t *testing.T) {
	c, err := read("../..")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range c.Methods {
		names = append(names, m.Name)
	}
	want := []string{"GetInfo", "Configure", "ClientConnected", "ClientFinalized", "Abort", "Fence", "DirectModex",
		"Publish", "Lookup", "Unpublish", "Spawn", "Connect", "Disconnect", "Query", "Log", "NotifyEvent", "AwaitEvents", "Depart"}
	if !slices.Equal(names, want) {
		t.Errorf("methods %v\nwant %v", names, want)
	}
	i := slices.IndexFunc(c.Methods, func(m method) bool { return m.Name == "DirectModex" })
	if m := c.Methods[i]; m.Call != "direct modex" || m.Wire != "direct-modex" || m.Req != "ModexRequest" || m.Resp != "ModexResponse" || m.Cap != "" {
		t.Errorf("DirectModex: %+v", m)
	}
	i = slices.IndexFunc(c.Methods, func(m method) bool { return m.Name == "Unpublish" })
	if m := c.Methods[i]; m.Resp != "" || m.Cap != "CapPublish" || m.Iface != "Publisher" || m.Hand {
		t.Errorf("Unpublish: %+v", m)
	}
	if c.Methods[0].Req != "" || !c.Methods[1].Hand {
		t.Errorf("GetInfo %+v, Configure %+v", c.Methods[0], c.Methods[1])
	}
	var caps []string
	for _, cp := range c.Caps {
		caps = append(caps, cp.Const+"="+cp.Iface)
	}
	if got := strings.Join(caps, " "); got != "CapPublish=Publisher CapSpawn=Spawner CapConnect=Connector CapQuery=Querier CapLog=Logger CapNotify=EventNotifier CapEvents=EventWatcher CapDepart=Departer" {
		t.Errorf("capabilities %s", got)
	}
}

// TestServiceMatchesContract: the gRPC service has one RPC per method of
// the contract, by the same name, so the generated adapters cover every
// RPC: one the contract lacks would be answered by the embedded
// UnimplementedResourceManagerServiceServer, silently.
func TestServiceMatchesContract(t *testing.T) {
	c, err := read("../..")
	if err != nil {
		t.Fatal(err)
	}
	var contract, rpcs []string
	for _, m := range c.Methods {
		contract = append(contract, m.Name)
	}
	for _, m := range rmv1.ResourceManagerService_ServiceDesc.Methods {
		rpcs = append(rpcs, m.MethodName)
	}
	slices.Sort(contract)
	slices.Sort(rpcs)
	if !slices.Equal(contract, rpcs) {
		t.Errorf("the contract's methods %v\nthe service's RPCs %v", contract, rpcs)
	}
	if n := len(rmv1.ResourceManagerService_ServiceDesc.Streams); n != 0 {
		t.Errorf("the service has %d streams; the adapters know unary calls only", n)
	}
}

// TestReadRefuses: a contract the templates cannot render is an error
// naming the method, not wrong code.
func TestReadRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"no context":  "type Backend interface{ Fence(req *FenceRequest) error }\ntype Full interface{ Backend }",
		"by value":    "type Backend interface{ Fence(ctx context.Context, req FenceRequest) error }\ntype Full interface{ Backend }",
		"no Cap":      "type Backend interface{}\ntype Extra interface{ X(ctx context.Context) error }\ntype Full interface{ Backend; Extra }",
		"no Full":     "type Backend interface{}",
		"two results": "type Backend interface{ F(ctx context.Context) (int, int) }\ntype Full interface{ Backend }",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte("package plugin\nimport \"context\"\nvar _ context.Context\n"+src+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := read(dir); err == nil {
			t.Errorf("%s: read accepted it", name)
		}
	}
}

func TestSplitCamel(t *testing.T) {
	for in, want := range map[string]string{"GetInfo": "get info", "DirectModex": "direct modex", "Log": "log", "NotifyEvent": "notify event"} {
		if got := strings.Join(splitCamel(in), " "); got != want {
			t.Errorf("%s: %q", in, got)
		}
	}
}
