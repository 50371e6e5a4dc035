package pmi1

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

func TestParseGroup(t *testing.T) {
	tests := []struct {
		in   string
		want Group
		str  string
	}{
		{"", Group{Kind: GroupWorld}, "WORLD:0"},
		{"WORLD:0", Group{Kind: GroupWorld}, "WORLD:0"},
		{"WORLD:1234567", Group{Kind: GroupWorld, Tag: 1234567}, "WORLD:1234567"},
		{"NODE:5", Group{Kind: GroupNode, Tag: 5}, "NODE:5"},
		{"0,2,5:77", Group{Kind: GroupRanks, Ranks: []int{0, 2, 5}, Tag: 77}, "0,2,5:77"},
		{"3", Group{Kind: GroupRanks, Ranks: []int{3}}, "3:0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g, err := ParseGroup(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if g.String() != tt.str {
				t.Errorf("String() = %q, want %q", g.String(), tt.str)
			}
		})
	}
	for _, bad := range []string{"WORLD:x", "WORLD:-1", "a,b:1", "1,,2:3", "1,1:0", "-1:0", ":5"} {
		if _, err := ParseGroup(bad); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("ParseGroup(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}
