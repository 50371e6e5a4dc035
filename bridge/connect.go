package bridge

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

// jobConnect maps PMI-2 job-connect to the backend's Connect.
func (s *Session) jobConnect(r *request, m *wire.Message) {
	s.connectCall(r, m, "job-connect", func(ctx context.Context, j *Job, procs []plugin.Proc) error {
		_, err := j.be.Connect(ctx, &plugin.ConnectRequest{Procs: procs, Timeout: j.cfg.Timeouts.Fence})
		return err
	}, "kvscopy", "FALSE") // foreign gets go through the backend: no KVS copy
}

// jobDisconnect maps PMI-2 job-disconnect to the backend's Disconnect.
func (s *Session) jobDisconnect(r *request, m *wire.Message) {
	s.connectCall(r, m, "job-disconnect", func(ctx context.Context, j *Job, procs []plugin.Proc) error {
		return j.be.Disconnect(ctx, &plugin.DisconnectRequest{Procs: procs, Timeout: j.cfg.Timeouts.Fence})
	})
}

// connectCall is job-connect and job-disconnect: the parties are this job
// and jobid, whole; call asks the backend, and the answer carries ok's
// pairs.
func (s *Session) connectCall(r *request, m *wire.Message, verb string, call func(context.Context, *Job, []plugin.Proc) error, ok ...string) {
	jobid := m.Value("jobid")
	if jobid == "" {
		r.fail(wire.RcInvalidArg, fmt.Errorf("%s: empty jobid=", verb))
		return
	}
	j := s.j
	procs := []plugin.Proc{
		{Nspace: j.cfg.Job.Nspace, Rank: plugin.RankWildcard},
		{Nspace: jobid, Rank: plugin.RankWildcard},
	}
	s.asyncCap(r, plugin.CapConnect, verb, toBackend, func(ctx context.Context) {
		if err := call(ctx, j, procs); err != nil {
			r.fail(wire.RcFail, inStep(verb+" "+jobid, err))
			return
		}
		r.ok(ok...)
	})
}
