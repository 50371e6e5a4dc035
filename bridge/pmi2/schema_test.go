package pmi2

import (
	"strings"
	"testing"

	"github.com/gopmi/gopmi/bridge/wire"
)

func TestCommandsTable(t *testing.T) {
	want := []string{"fullinit", "job-getid", "job-connect", "job-disconnect", "kvs-put", "kvs-get", "kvs-fence",
		"info-putnodeattr", "info-getnodeattr", "info-getjobattr", "name-publish", "name-unpublish", "name-lookup",
		"spawn", "abort", "finalize", "ring", "auth-response-complete"}
	if len(Commands) != len(want) {
		t.Errorf("Commands has %d entries, want %d", len(Commands), len(want))
	}
	for _, name := range want {
		c, ok := Lookup(name)
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		wantReply := name + "-response"
		switch name {
		case "abort":
			wantReply = ""
		case "auth-response-complete":
			wantReply = "fullinit-response" // the handshake ends fullinit
		}
		if c.Reply != wantReply {
			t.Errorf("%s: Reply = %q, want %q", name, c.Reply, wantReply)
		}
		if c.Block || c.Since != "2.0" {
			t.Errorf("%s: Block=%v Since=%q", name, c.Block, c.Since)
		}
		for _, list := range [][]string{keysOf(c.Request), keysOf(c.Response), keysOf(c.SectionAttrs)} {
			seen := map[string]bool{}
			for _, k := range list {
				if seen[k] {
					t.Errorf("%s: key %s listed twice", name, k)
				}
				seen[k] = true
			}
		}
		for _, a := range append(c.Request, c.SectionAttrs...) {
			if strings.Contains(a.Key, "#") {
				if _, ok := c.RequestAttr(a.Count); !ok {
					t.Errorf("%s: family %s counts with unknown %q", name, a.Key, a.Count)
				}
			}
		}
	}
	for cmd, key := range map[string]string{"kvs-get": "srcid", "info-getnodeattr": "wait", "fullinit": "threaded", "abort": "isworld"} {
		c, _ := Lookup(cmd)
		a, ok := c.RequestAttr(key)
		if !ok || a.Required || a.Default == "" {
			t.Errorf("%s %s: want an optional attribute with a default, got %+v", cmd, key, a)
		}
	}
	sp, _ := Lookup("spawn")
	if sp.Section != "subcmd" {
		t.Errorf("spawn Section = %q", sp.Section)
	}
	for _, k := range []string{"ppkey0", "argv3", "infoval1", "maxprocs", "subcmd"} {
		if _, ok := sp.RequestAttr(k); !ok {
			t.Errorf("spawn: RequestAttr(%q) not found", k)
		}
	}
}

func TestReplyName(t *testing.T) {
	for in, want := range map[string]string{"kvs-get": "kvs-get-response", "bogus": "bogus-response", "ring": "ring-response"} {
		if got := ReplyName(in); got != want {
			t.Errorf("ReplyName(%q) = %q, want %q", in, got, want)
		}
	}
}

func keysOf(list []wire.AttrSpec) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Key
	}
	return out
}
