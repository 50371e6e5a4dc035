//go:build pmix

package pmix

import (
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/gopmi/gopmi/plugin"
)

// A client's later commits are asked for (lateCommits) until it enters a
// fence that carries them to the other nodes: one that collects nothing
// (the server hands its newer data over), or one that collects its whole
// job's. A collecting fence of some ranks only, or a client that never
// committed, leaves the asking as it was.
func TestFencedClientsAreAskedNoMore(t *testing.T) {
	const ns = "late.job"
	p := func(r int32) plugin.Proc { return plugin.Proc{Nspace: ns, Rank: r} }
	s := &Server{}
	s.dmodex.sent = map[plugin.Proc][sha256.Size]byte{p(0): {}, p(1): {}}
	all := []plugin.Proc{p(0), p(1), p(2)}
	check := func(when string, want ...plugin.Proc) {
		t.Helper()
		if got := s.unfenced(all); !slices.Equal(got, want) {
			t.Errorf("%s: still asked for %v, want %v", when, got, want)
		}
	}
	s.markFenced(&plugin.FenceRequest{Collect: true, Procs: []plugin.Proc{p(0), p(1)}, LocalProcs: []plugin.Proc{p(0), p(1)}})
	check("after a collecting fence of ranks 0 and 1 only", all...)
	s.markFenced(&plugin.FenceRequest{Procs: []plugin.Proc{p(0), p(2)}, LocalProcs: []plugin.Proc{p(0), p(2)}})
	check("after a fence of ranks 0 and 2 that collects nothing", p(1), p(2))
	s.markFenced(&plugin.FenceRequest{Collect: true, Procs: []plugin.Proc{{Nspace: ns, Rank: plugin.RankWildcard}}, LocalProcs: all})
	check("after a collecting fence of the whole job", p(2))
	if len(all) != 3 || all[0] != p(0) {
		t.Errorf("unfenced changed its argument: %v", all)
	}
}
