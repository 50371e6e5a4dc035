package bridge

import (
	"context"
	"fmt"

	"github.com/gopmi/gopmi/bridge/wire"
	"github.com/gopmi/gopmi/plugin"
)

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
