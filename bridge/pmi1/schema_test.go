package pmi1

import (
	"strings"
	"testing"

	"github.com/gopmi/gopmi/bridge/wire"
)

func TestCommandsTable(t *testing.T) {
	want := map[string]string{
		"init": "response_to_init", "get_maxes": "maxes", "get_appnum": "appnum",
		"get_universe_size": "universe_size", "get_my_kvsname": "my_kvsname", "put": "put_result",
		"get": "get_result", "barrier_in": "barrier_out", "finalize": "finalize_ack", "abort": "",
		"publish_name": "publish_result", "unpublish_name": "unpublish_result", "lookup_name": "lookup_result",
		"spawn": "spawn_result", "initack": "initack", "getbyidx": "getbyidx_results",
		"create_kvs": "newkvs", "destroy_kvs": "kvs_destroyed", "singinit": "singinit_info",
	}
	if len(Commands) != len(want) {
		t.Errorf("Commands has %d entries, want %d", len(Commands), len(want))
	}
	for _, c := range Commands {
		r, ok := want[c.Name]
		if !ok {
			t.Errorf("unexpected command %s", c.Name)
			continue
		}
		if c.Reply != r {
			t.Errorf("%s: Reply = %q, want %q", c.Name, c.Reply, r)
		}
		if c.Block != (c.Name == "spawn") {
			t.Errorf("%s: Block = %v", c.Name, c.Block)
		}
		switch c.Since {
		case "1.1", "1.2", "legacy":
		default:
			t.Errorf("%s: Since = %q", c.Name, c.Since)
		}
		for _, list := range [][]string{keys(c.Request), keys(c.Response)} {
			seen := map[string]bool{}
			for _, k := range list {
				if seen[k] {
					t.Errorf("%s: key %s listed twice", c.Name, k)
				}
				seen[k] = true
			}
		}
		for _, a := range c.Request {
			if strings.Contains(a.Key, "#") {
				if a.Count == "" {
					t.Errorf("%s: family %s has no Count", c.Name, a.Key)
				} else if _, ok := c.RequestAttr(a.Count); !ok {
					t.Errorf("%s: family %s counts with unknown %s", c.Name, a.Key, a.Count)
				}
			}
			if a.Required && a.Default != "" {
				t.Errorf("%s: required %s has a default", c.Name, a.Key)
			}
		}
	}
}

func keys(list []wire.AttrSpec) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Key
	}
	return out
}

func TestReplyName(t *testing.T) {
	tests := map[string]string{
		"get":      "get_result",
		"init":     "response_to_init",
		"initack":  "initack",
		"abort":    "abort_result",
		"frobnich": "frobnich_result",
	}
	for in, want := range tests {
		if got := ReplyName(in); got != want {
			t.Errorf("ReplyName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookupFamilies(t *testing.T) {
	c, ok := Lookup("spawn")
	if !ok {
		t.Fatal("no spawn")
	}
	for _, k := range []string{"arg1", "arg12", "preput_key_0", "info_val_3", "nprocs"} {
		if _, ok := c.RequestAttr(k); !ok {
			t.Errorf("RequestAttr(%q) not found", k)
		}
	}
	for _, k := range []string{"arg", "argx", "info_key_", "bogus"} {
		if _, ok := c.RequestAttr(k); ok {
			t.Errorf("RequestAttr(%q) found", k)
		}
	}
	g, _ := Lookup("get")
	if a, ok := g.ResponseAttr("found"); !ok || a.Default != "TRUE" {
		t.Errorf("get found= default = %+v", a)
	}
	if _, ok := Lookup("nope"); ok {
		t.Errorf("Lookup(nope) found")
	}
}
