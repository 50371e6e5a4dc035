package convert

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gopmi/gopmi/plugin"
	rmv1 "github.com/gopmi/gopmi/proto/gopmi/rm/v1"
)

// The helpers below convert the building blocks shared by many messages.

func toDuration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func fromDuration(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

func toProc(p plugin.Proc) *rmv1.Proc {
	return &rmv1.Proc{Nspace: p.Nspace, Rank: p.Rank}
}

func fromProc(p *rmv1.Proc) plugin.Proc {
	return plugin.Proc{Nspace: p.GetNspace(), Rank: p.GetRank()}
}

func toProcs(ps []plugin.Proc) []*rmv1.Proc {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*rmv1.Proc, len(ps))
	for i, p := range ps {
		out[i] = toProc(p)
	}
	return out
}

func fromProcs(ps []*rmv1.Proc) []plugin.Proc {
	if len(ps) == 0 {
		return nil
	}
	out := make([]plugin.Proc, len(ps))
	for i, p := range ps {
		out[i] = fromProc(p)
	}
	return out
}

func toInfos(is []plugin.Info) []*rmv1.Info {
	if len(is) == 0 {
		return nil
	}
	out := make([]*rmv1.Info, len(is))
	for i, in := range is {
		out[i] = &rmv1.Info{Key: in.Key, Value: in.Value}
	}
	return out
}

func fromInfos(is []*rmv1.Info) []plugin.Info {
	if len(is) == 0 {
		return nil
	}
	out := make([]plugin.Info, len(is))
	for i, in := range is {
		out[i] = plugin.Info{Key: in.GetKey(), Value: in.GetValue()}
	}
	return out
}

func copyStrings(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	return append([]string(nil), ss...)
}

func copyInt32s(xs []int32) []int32 {
	if len(xs) == 0 {
		return nil
	}
	return append([]int32(nil), xs...)
}

// The enums share their numbering with the Go constants (the .proto's
// *_UNSPECIFIED = 0 is the Go *Default), so a cast converts them; values
// neither side knows pass through unchanged for the backend to refuse.

func toRange(r plugin.Range) rmv1.Range                   { return rmv1.Range(r) }
func fromRange(r rmv1.Range) plugin.Range                 { return plugin.Range(r) }
func toPersistence(p plugin.Persistence) rmv1.Persistence { return rmv1.Persistence(p) }
func fromPersistence(p rmv1.Persistence) plugin.Persistence {
	return plugin.Persistence(p)
}

func toJob(j plugin.Job) *rmv1.Job {
	out := &rmv1.Job{
		Nspace:       j.Nspace,
		Size:         j.Size,
		UniverseSize: j.UniverseSize,
		Parent:       j.Parent,
	}
	for _, n := range j.Nodes {
		out.Nodes = append(out.Nodes, &rmv1.Node{Id: n.ID, Name: n.Name, Ranks: copyInt32s(n.Ranks)})
	}
	for _, a := range j.Apps {
		out.Apps = append(out.Apps, &rmv1.App{FirstRank: a.FirstRank, Size: a.Size, Cmd: a.Cmd})
	}
	return out
}

func fromJob(j *rmv1.Job) plugin.Job {
	out := plugin.Job{
		Nspace:       j.GetNspace(),
		Size:         j.GetSize(),
		UniverseSize: j.GetUniverseSize(),
		Parent:       j.GetParent(),
	}
	for _, n := range j.GetNodes() {
		out.Nodes = append(out.Nodes, plugin.Node{ID: n.GetId(), Name: n.GetName(), Ranks: copyInt32s(n.GetRanks())})
	}
	for _, a := range j.GetApps() {
		out.Apps = append(out.Apps, plugin.App{FirstRank: a.GetFirstRank(), Size: a.GetSize(), Cmd: a.GetCmd()})
	}
	return out
}
