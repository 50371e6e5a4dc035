package plugin_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/plugin"
)

func TestJobValidate(t *testing.T) {
	good := func() plugin.Job {
		return plugin.Job{Nspace: "j", Size: 4, Nodes: []plugin.Node{{ID: 7, Name: "a", Ranks: []int32{0, 2}}, {ID: 3, Name: "b", Ranks: []int32{1, 3}}},
			Apps: []plugin.App{{FirstRank: 0, Size: 3}, {FirstRank: 3, Size: 1}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("a good layout: %v", err)
	}
	if got := good().RankNodes(); !slices.Equal(got, []int32{0, 1, 0, 1}) {
		t.Errorf("RankNodes = %v", got)
	}
	if good().NodeIndex(3) != 1 || good().NodeIndex(9) != -1 {
		t.Error("NodeIndex")
	}
	for _, c := range []struct {
		edit func(j *plugin.Job)
		want string
	}{
		{func(j *plugin.Job) { j.Nspace = "" }, "job.nspace: empty"},
		{func(j *plugin.Job) { j.Size = 0 }, "job.size: 0, must be positive"},
		{func(j *plugin.Job) { j.UniverseSize = 2 }, "job.universe_size: 2 is less than job.size 4"},
		{func(j *plugin.Job) { j.Nodes = nil }, "job.nodes: empty"},
		{func(j *plugin.Job) { j.Nodes[1].ID = 7 }, "job.nodes[1].id: 7 already used by job.nodes[0]"},
		{func(j *plugin.Job) { j.Nodes[1].Ranks = nil }, "job.nodes[1].ranks: empty"},
		{func(j *plugin.Job) { j.Nodes[1].Ranks = []int32{1, 4} }, "job.nodes[1].ranks: rank 4 outside 0..3"},
		{func(j *plugin.Job) { j.Nodes[1].Ranks = []int32{1, 2} }, "job.nodes[1].ranks: rank 2 already on job.nodes[0]"},
		{func(j *plugin.Job) { j.Nodes[1].Ranks = []int32{1} }, "job.nodes: rank 3 is on no node"},
		{func(j *plugin.Job) { j.Apps[1].FirstRank = 2 }, "job.apps[1].first_rank: 2, expected 3 (apps hold consecutive ranks in order)"},
		{func(j *plugin.Job) { j.Apps[1].Size = 2 }, "job.apps[1].size: ranks up to 4 exceed job.size 4"},
		{func(j *plugin.Job) { j.Apps = j.Apps[:1] }, "job.apps: cover ranks 0..2, job.size is 4"},
	} {
		j := good()
		c.edit(&j)
		err := j.Validate()
		var le *plugin.LayoutError
		if err == nil || err.Error() != c.want || !errors.As(err, &le) || !errors.Is(err, plugin.ErrInvalidArgument) {
			t.Errorf("Validate: %v, want %q", err, c.want)
		}
	}
}

// Apps may list their ranks (srun --multi-prog): every rank in exactly one
// app, and AppRanks gives each rank its app's index.
func TestJobAppSets(t *testing.T) {
	good := func() plugin.Job {
		return plugin.Job{Nspace: "j", Size: 4, Nodes: []plugin.Node{{ID: 0, Name: "a", Ranks: []int32{0, 1, 2, 3}}},
			Apps: []plugin.App{{FirstRank: 0, Size: 2, Ranks: []int32{2, 0}}, {FirstRank: 1, Size: 2, Ranks: []int32{1, 3}}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("a good layout: %v", err)
	}
	if got := good().AppRanks(); !slices.Equal(got, []int32{0, 1, 0, 1}) {
		t.Errorf("AppRanks = %v, want [0 1 0 1]", got)
	}
	mixed := good()
	mixed.Apps = []plugin.App{{FirstRank: 0, Size: 2, Ranks: []int32{0, 3}}, {FirstRank: 1, Size: 2}}
	if err := mixed.Validate(); err != nil {
		t.Fatalf("a listed app beside a range: %v", err)
	}
	if got := mixed.AppRanks(); !slices.Equal(got, []int32{0, 1, 1, 0}) {
		t.Errorf("AppRanks = %v, want [0 1 1 0]", got)
	}
	if got := (plugin.Job{Size: 3}).AppRanks(); !slices.Equal(got, []int32{0, 0, 0}) {
		t.Errorf("AppRanks without apps = %v", got)
	}
	for _, c := range []struct {
		edit func(j *plugin.Job)
		want string
	}{
		{func(j *plugin.Job) { j.Apps[0].Size = 3 }, "job.apps[0].size: 3, but 2 ranks are listed"},
		{func(j *plugin.Job) { j.Apps[1].FirstRank = 3 }, "job.apps[1].first_rank: 3, but the app's lowest rank is 1"},
		{func(j *plugin.Job) { j.Apps[1].Ranks = []int32{1, 4} }, "job.apps[1].ranks: rank 4 outside 0..3"},
		{func(j *plugin.Job) { j.Apps[1].Ranks = []int32{1, 2} }, "job.apps[1].ranks: rank 2 already in job.apps[0]"},
		{func(j *plugin.Job) { j.Apps[1] = plugin.App{FirstRank: 1, Size: 1, Ranks: []int32{1}} }, "job.apps: rank 3 is in no app"},
	} {
		j := good()
		c.edit(&j)
		if err := j.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate: %v, want %q", err, c.want)
		}
	}
}

// A layout that lies about its size is refused before anything is sized
// by it, and an app's range cannot overflow into a panic.
func TestJobValidateHostileSizes(t *testing.T) {
	huge := plugin.Job{Nspace: "x", Size: 1<<31 - 1, Nodes: []plugin.Node{{ID: 0, Ranks: []int32{0, 1}}}}
	if err := huge.Validate(); err == nil || err.Error() != "job.nodes: rank 2 is on no node" {
		t.Errorf("a huge size: %v", err)
	}
	overflow := plugin.Job{Nspace: "x", Size: 2, Nodes: []plugin.Node{{ID: 0, Ranks: []int32{0, 1}}},
		Apps: []plugin.App{{FirstRank: 0, Size: 1, Ranks: []int32{0}}, {FirstRank: 1, Size: 1<<31 - 1}}}
	if err := overflow.Validate(); err == nil || !strings.Contains(err.Error(), "exceed job.size 2") {
		t.Errorf("an app range that overflows: %v", err)
	}
}
