package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// asyncCap is async for a request that needs a backend capability: the
// request is refused, naming what is missing, when the backend lacks it.
func (s *Session) asyncCap(r *request, capName, what string, d timeoutKind, call func(ctx context.Context)) {
	s.async(r, d, func(ctx context.Context) {
		if err := s.j.capabilities(ctx); err != nil {
			r.fail(wire.RcFail, fmt.Errorf("%s: %w", r.cmd, err))
			return
		}
		if !s.j.be.Has(capName) {
			r.fail(wire.RcFail, fmt.Errorf("%s: %s does not provide %s (capability %q)", r.cmd, s.j.be.Name(), what, capName))
			return
		}
		call(ctx)
	})
}

// async parks r, runs call against the backend with a deadline and
// unparks r afterwards; call answers r.
func (s *Session) async(r *request, d timeoutKind, call func(ctx context.Context)) {
	j := s.j
	j.mu.Lock()
	if j.ended {
		err := j.result.Err
		j.mu.Unlock()
		r.fail(wire.RcFail, fmt.Errorf("%s: job has ended: %w", r.cmd, err))
		return
	}
	r.park()
	j.mu.Unlock()
	j.goBackend(j.timeout(d)+grace, func(ctx context.Context) {
		call(ctx)
		j.mu.Lock()
		r.unpark()
		j.mu.Unlock()
	})
}

type timeoutKind int

const (
	toBackend timeoutKind = iota
	toLookup
	toSpawn
	toGet
)

func (j *Job) timeout(k timeoutKind) time.Duration {
	switch k {
	case toLookup:
		return j.cfg.Timeouts.Lookup
	case toSpawn:
		return j.cfg.Timeouts.Spawn
	case toGet:
		return j.cfg.Timeouts.Get
	}
	return j.cfg.Timeouts.Backend
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
		r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: missing service name", r.cmd), nsFailKV(r)...)
		return
	}
	req := &plugin.PublishRequest{Proc: s.j.proc(s.rank), Data: []plugin.Info{{Key: name, Value: port}}, Info: toInfo(info)}
	s.asyncCap(r, plugin.CapPublish, "a name service", toBackend, func(ctx context.Context) {
		if err := s.j.be.Publish(ctx, req); err != nil {
			r.failKV(rcOf(err), inStep("publish "+name, err), nsFailKV(r)...)
			return
		}
		r.ok(nsOKKV(r)...)
	})
}

func (s *Session) unpublish(r *request, name string, info []wire.Arg) {
	if name == "" {
		r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: missing service name", r.cmd), nsFailKV(r)...)
		return
	}
	req := &plugin.UnpublishRequest{Proc: s.j.proc(s.rank), Keys: []string{name}, Info: toInfo(info)}
	s.asyncCap(r, plugin.CapPublish, "a name service", toBackend, func(ctx context.Context) {
		if err := s.j.be.Unpublish(ctx, req); err != nil {
			r.failKV(rcOf(err), inStep("unpublish "+name, err), nsFailKV(r)...)
			return
		}
		r.ok(nsOKKV(r)...)
	})
}

func (s *Session) lookup(r *request, name string, info []wire.Arg) {
	if name == "" {
		r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: missing service name", r.cmd), lookupFailKV(r)...)
		return
	}
	req := &plugin.LookupRequest{Proc: s.j.proc(s.rank), Keys: []string{name}, Info: toInfo(info), Timeout: s.j.cfg.Timeouts.Lookup}
	s.asyncCap(r, plugin.CapPublish, "a name service", toLookup, func(ctx context.Context) {
		resp, err := s.j.be.Lookup(ctx, req)
		if err == nil && (resp == nil || len(resp.Data) == 0) {
			err = plugin.ErrNotFound
		}
		if err != nil {
			r.failKV(rcOf(err), inStep("lookup "+name, err), lookupFailKV(r)...)
			return
		}
		port := resp.Data[0].Value
		if r.v == 2 {
			// MPICH reads port=, Slurm's libpmi2 reads value=: send both.
			r.ok("found", "TRUE", "port", port, "value", port)
			return
		}
		r.ok("info", "ok", "port", port)
	})
}

// PMI-1 name-service replies also carry info=ok|fail, which Slurm-era
// clients read instead of rc.
func nsOKKV(r *request) []string {
	if r.v == 1 {
		return []string{"info", "ok"}
	}
	return nil
}

func nsFailKV(r *request) []string {
	if r.v == 1 {
		return []string{"info", "fail"}
	}
	return nil
}

func lookupFailKV(r *request) []string {
	if r.v == 1 {
		return []string{"info", "fail"}
	}
	return []string{"found", "FALSE"}
}

// jobConnect maps PMI-2 job-connect to the backend's Connect.
func (s *Session) jobConnect(r *request, m *wire.Message) {
	jobid := m.Value("jobid")
	if jobid == "" {
		r.fail(wire.RcInvalidArg, fmt.Errorf("job-connect: empty jobid="))
		return
	}
	j := s.j
	req := &plugin.ConnectRequest{Procs: j.connectProcs(jobid), Timeout: j.cfg.Timeouts.Fence}
	s.asyncCap(r, plugin.CapConnect, "job-connect", toBackend, func(ctx context.Context) {
		if _, err := j.be.Connect(ctx, req); err != nil {
			r.fail(wire.RcFail, inStep("job-connect "+jobid, err))
			return
		}
		// Foreign gets go through the backend, so no KVS copy is made.
		r.ok("kvscopy", "FALSE")
	})
}

// connectProcs are the parties of a job-connect or job-disconnect: this
// job and jobid, whole.
func (j *Job) connectProcs(jobid string) []plugin.Proc {
	return []plugin.Proc{
		{Nspace: j.cfg.Job.Nspace, Rank: plugin.RankWildcard},
		{Nspace: jobid, Rank: plugin.RankWildcard},
	}
}

func (s *Session) jobDisconnect(r *request, m *wire.Message) {
	jobid := m.Value("jobid")
	if jobid == "" {
		r.fail(wire.RcInvalidArg, fmt.Errorf("job-disconnect: empty jobid="))
		return
	}
	j := s.j
	req := &plugin.DisconnectRequest{Procs: j.connectProcs(jobid), Timeout: j.cfg.Timeouts.Fence}
	s.asyncCap(r, plugin.CapConnect, "job-disconnect", toBackend, func(ctx context.Context) {
		if err := j.be.Disconnect(ctx, req); err != nil {
			r.fail(wire.RcFail, fmt.Errorf("job-disconnect %s: %w", jobid, err))
			return
		}
		r.ok()
	})
}
