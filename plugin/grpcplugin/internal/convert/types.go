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

// fromDuration reads an unset timeout as 0: AsDuration is nil-safe.
func fromDuration(d *durationpb.Duration) time.Duration { return d.AsDuration() }

// mapSlice converts each element of in with f. An empty slice becomes nil,
// which is what protobuf decodes an empty repeated field to, so a round
// trip keeps the value equal.
func mapSlice[A, B any](in []A, f func(A) B) []B {
	if len(in) == 0 {
		return nil
	}
	out := make([]B, len(in))
	for i, a := range in {
		out[i] = f(a)
	}
	return out
}

// clone copies a slice of plain values (strings, ranks) the way mapSlice
// converts one.
func clone[T any](in []T) []T {
	return mapSlice(in, func(v T) T { return v })
}

func toProc(p plugin.Proc) *rmv1.Proc {
	return &rmv1.Proc{Nspace: p.Nspace, Rank: p.Rank}
}

func fromProc(p *rmv1.Proc) plugin.Proc {
	return plugin.Proc{Nspace: p.GetNspace(), Rank: p.GetRank()}
}

func toInfo(in plugin.Info) *rmv1.Info {
	return &rmv1.Info{Key: in.Key, Value: in.Value}
}

func fromInfo(in *rmv1.Info) plugin.Info {
	return plugin.Info{Key: in.GetKey(), Value: in.GetValue()}
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
	return &rmv1.Job{
		Nspace:       j.Nspace,
		Size:         j.Size,
		UniverseSize: j.UniverseSize,
		Nodes: mapSlice(j.Nodes, func(n plugin.Node) *rmv1.Node {
			return &rmv1.Node{Id: n.ID, Name: n.Name, Ranks: clone(n.Ranks), Addr: n.Addr}
		}),
		Apps: mapSlice(j.Apps, func(a plugin.App) *rmv1.App {
			return &rmv1.App{FirstRank: a.FirstRank, Size: a.Size, Cmd: a.Cmd, Ranks: clone(a.Ranks)}
		}),
		Parent: j.Parent,
	}
}

func fromJob(j *rmv1.Job) plugin.Job {
	return plugin.Job{
		Nspace:       j.GetNspace(),
		Size:         j.GetSize(),
		UniverseSize: j.GetUniverseSize(),
		Nodes: mapSlice(j.GetNodes(), func(n *rmv1.Node) plugin.Node {
			return plugin.Node{ID: n.GetId(), Name: n.GetName(), Ranks: clone(n.GetRanks()), Addr: n.GetAddr()}
		}),
		Apps: mapSlice(j.GetApps(), func(a *rmv1.App) plugin.App {
			return plugin.App{FirstRank: a.GetFirstRank(), Size: a.GetSize(), Cmd: a.GetCmd(), Ranks: clone(a.GetRanks())}
		}),
		Parent: j.GetParent(),
	}
}
