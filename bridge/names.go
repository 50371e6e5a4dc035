package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// asyncCap is async for a request that needs a backend capability: the
// request is refused, naming what is missing, when the backend lacks it.
func (s *Session) asyncCap(r *request, capName, what string, d timeoutKind, call func(ctx context.Context)) {
	s.async(r, capName, what, d, nil, call)
}

func toInfo(args []wire.Arg) []plugin.Info {
	if len(args) == 0 {
		return nil
	}
	out := make([]plugin.Info, len(args))
	for i, a := range args {
		out[i] = plugin.Info{Key: a.Key, Value: a.Value}
	}
	return out
}

// rcOf picks the PMI code for a backend error: 1 for "not found" and
// "already exists", as Hydra answers, -1 otherwise.
func rcOf(err error) int {
	if errors.Is(err, plugin.ErrNotFound) || errors.Is(err, plugin.ErrAlreadyExists) {
		return 1
	}
	return wire.RcFail
}

func (s *Session) publish(r *request, name, port string, info []wire.Arg) {
	if name == "" {
		r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: missing service name", r.cmd), r.c.nsFail()...)
		return
	}
	req := &plugin.PublishRequest{Proc: s.j.proc(s.rank), Data: []plugin.Info{{Key: name, Value: port}}, Info: toInfo(info)}
	s.asyncCap(r, plugin.CapPublish, "a name service", toBackend, func(ctx context.Context) {
		if err := s.j.be.Publish(ctx, req); err != nil {
			r.failKV(rcOf(err), inStep("publish "+name, err), r.c.nsFail()...)
			return
		}
		r.ok(r.c.nsOK()...)
	})
}

func (s *Session) unpublish(r *request, name string, info []wire.Arg) {
	if name == "" {
		r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: missing service name", r.cmd), r.c.nsFail()...)
		return
	}
	req := &plugin.UnpublishRequest{Proc: s.j.proc(s.rank), Keys: []string{name}, Info: toInfo(info)}
	s.asyncCap(r, plugin.CapPublish, "a name service", toBackend, func(ctx context.Context) {
		if err := s.j.be.Unpublish(ctx, req); err != nil {
			r.failKV(rcOf(err), inStep("unpublish "+name, err), r.c.nsFail()...)
			return
		}
		r.ok(r.c.nsOK()...)
	})
}

func (s *Session) lookup(r *request, name string, info []wire.Arg) {
	if name == "" {
		r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: missing service name", r.cmd), r.c.lookupFail()...)
		return
	}
	req := &plugin.LookupRequest{Proc: s.j.proc(s.rank), Keys: []string{name}, Info: toInfo(info), Timeout: s.j.cfg.Timeouts.Lookup}
	s.asyncCap(r, plugin.CapPublish, "a name service", toLookup, func(ctx context.Context) {
		resp, err := s.j.be.Lookup(ctx, req)
		if err == nil && (resp == nil || len(resp.Data) == 0) {
			err = plugin.ErrNotFound
		}
		if err != nil {
			r.failKV(rcOf(err), inStep("lookup "+name, err), r.c.lookupFail()...)
			return
		}
		r.c.lookupOK(r, resp.Data[0].Value)
	})
}
