package plugin

import "testing"

func TestProcSet(t *testing.T) {
	a := []Proc{{"b", 1}, {"a", RankWildcard}, {"b", 0}, {"b", 1}}
	b := []Proc{{"b", 0}, {"a", RankWildcard}, {"b", 1}}
	pa, ta := ProcSet(a)
	_, tb := ProcSet(b)
	if ta != tb || ta != "a:*;b:0;b:1;" || len(pa) != 3 {
		t.Errorf("ProcSet: %q %v and %q", ta, pa, tb)
	}
	if a[0] != (Proc{"b", 1}) {
		t.Errorf("ProcSet changed its argument: %v", a)
	}
}
