package plugintest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/plugin"
)

// testQueryVocabulary: a Querier that speaks contract 1.1 answers the
// query vocabulary about the case's job, in its formats and by its 1.0
// names too. A backend that lists only 1.0 is told what it lacks.
func testQueryVocabulary(t *testing.T, e *env) {
	if !e.has(plugin.CapQuery) {
		t.Skipf("backend does not advertise %q", plugin.CapQuery)
	}
	if !slices.Contains(e.info.APIVersions, plugin.APIVersion11) {
		t.Skipf("backend speaks contract %s only: it lacks 1.1's query vocabulary (plugin.QueryNamespaces, QueryJobStatus, QueryProcTable as JSON rows of plugin.ProcInfo, QueryLocalPeers, QueryNodeList); answer those keys and list %q in GetInfo's APIVersions",
			strings.Join(e.info.APIVersions, ","), plugin.APIVersion11)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	ns := plugin.Info{Key: plugin.QualNspace, Value: e.job.Nspace}
	ask := func(node int, key string, quals ...plugin.Info) string {
		t.Helper()
		resp, err := e.nodes[node].Query(ctx, &plugin.QueryRequest{Proc: e.proc(int32(2 * node)), Queries: []plugin.Query{{Keys: []string{key}, Qualifiers: quals}}})
		if err != nil {
			t.Fatalf("Query(%s) on node %d: %v", key, node, err)
		}
		for _, r := range resp.Results {
			if r.Key == key {
				return r.Value
			}
		}
		t.Fatalf("Query(%s) on node %d: answered %+v, not the key asked", key, node, resp.Results)
		return ""
	}
	if got := strings.Split(ask(0, plugin.QueryNamespaces), ","); !slices.Contains(got, e.job.Nspace) {
		t.Errorf("%s = %q; want a comma-separated list that holds %s", plugin.QueryNamespaces, got, e.job.Nspace)
	}
	if got := ask(1, plugin.QueryJobStatus, ns); !strings.HasPrefix(got, string(plugin.JobRunning)) {
		t.Errorf("%s of a running job = %q; want %q", plugin.QueryJobStatus, got, plugin.JobRunning)
	}
	procs, err := plugin.DecodeProcTable(ask(1, plugin.QueryProcTable, ns))
	if err != nil {
		t.Fatalf("%s: %v; want a JSON array of plugin.ProcInfo", plugin.QueryProcTable, err)
	}
	var ranks []int32
	for _, p := range procs {
		ranks = append(ranks, p.Rank)
		want := e.job.Nodes[p.Rank/2].Name
		if p.Node != want || p.State == "" {
			t.Errorf("%s row %+v: want node %s and a state", plugin.QueryProcTable, p, want)
		}
	}
	if !slices.Equal(ranks, []int32{0, 1, 2, 3}) {
		t.Errorf("%s ranks %v; want one row per rank, by rank", plugin.QueryProcTable, ranks)
	}
	if got := ask(0, plugin.QueryLocalPeers, ns, plugin.Info{Key: plugin.QualNodeID, Value: "1"}); got != "2,3" {
		t.Errorf("%s of node 1 = %q; want \"2,3\"", plugin.QueryLocalPeers, got)
	}
	if got := ask(0, plugin.QueryLocalPeers, ns, plugin.Info{Key: plugin.QualHostname, Value: "n1"}); got != "2,3" {
		t.Errorf("%s of node n1 = %q; want \"2,3\"", plugin.QueryLocalPeers, got)
	}
	if got := ask(0, "local-peers", plugin.Info{Key: "nspace", Value: e.job.Nspace}, plugin.Info{Key: "nodeid", Value: "0"}); got != "0,1" {
		t.Errorf("local-peers (the 1.0 name) of node 0 = %q; want \"0,1\"", got)
	}
	if got := ask(1, plugin.QueryNodeList, ns); got != "n0,n1" {
		t.Errorf("%s = %q; want \"n0,n1\"", plugin.QueryNodeList, got)
	}
	if _, err := e.nodes[0].Query(ctx, &plugin.QueryRequest{Proc: e.proc(0), Queries: []plugin.Query{{Keys: []string{"gopmi.conformance.no-such-key"}}}}); !errors.Is(err, plugin.ErrNotFound) {
		t.Errorf("Query of a key no backend knows: %v; want an error wrapping plugin.ErrNotFound", err)
	}
}
