package bridge

import (
	"fmt"
	"strconv"

	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// dispatch2 serves one PMI-2 request.
func (s *Session) dispatch2(r *request, m *wire.Message) {
	j := s.j
	spec, ok := checked(r, m, pmi2.Commands)
	if !ok {
		return
	}
	switch m.Cmd {
	case "fullinit":
		if s.authenticate(r, m) {
			s.fullinit(r, m)
		}
		return
	case "auth-response-complete":
		s.authComplete(r, m)
		return
	}
	if s.rank < 0 {
		r.fail(wire.RcFail, fmt.Errorf("%s: this connection has no rank yet: send fullinit with pmirank= first", m.Cmd))
		return
	}
	switch m.Cmd {
	case "job-getid":
		r.ok("jobid", j.cfg.Job.Nspace)
	case "kvs-put":
		s.put(r, "", m.Value("key"), m.Value("value"))
	case "kvs-get":
		key := m.Value("key")
		src, err := spec.Int(m, "srcid")
		if err != nil {
			r.fail(wire.RcInvalidArg, fmt.Errorf("kvs-get %s: %w", key, err))
			return
		}
		jobid := m.Value("jobid")
		if jobid == "" {
			jobid = j.cfg.Job.Nspace
		}
		s.get(r, jobid, int32(src), key, false)
	case "kvs-fence":
		s.j.enterFence(r, j.worldGroup(), j.cfg.FenceMode == FenceLazy, nil)
	case "info-putnodeattr":
		s.putNodeAttr(r, m.Value("key"), m.Value("value"))
	case "info-getnodeattr":
		key := m.Value("key")
		wait, err := spec.Bool(m, "wait")
		if err != nil {
			r.fail(wire.RcInvalidArg, fmt.Errorf("info-getnodeattr %s: %w", key, err))
			return
		}
		s.getNodeAttr(r, key, wait)
	case "info-getjobattr":
		s.getJobAttr(r, m.Value("key"))
	case "name-publish", "name-unpublish", "name-lookup":
		info, err := infoList(spec, m)
		if err != nil {
			r.failKV(wire.RcInvalidArg, fmt.Errorf("%s: %w", m.Cmd, err), failKV(r)...)
			return
		}
		switch m.Cmd {
		case "name-publish":
			s.publish(r, m.Value("name"), m.Value("port"), info)
		case "name-unpublish":
			s.unpublish(r, m.Value("name"), info)
		default:
			s.lookup(r, m.Value("name"), info)
		}
	case "spawn":
		s.spawn2(r, m)
	case "job-connect":
		s.jobConnect(r, m)
	case "job-disconnect":
		s.jobDisconnect(r, m)
	case "abort":
		// MPICH >= 4.1 sends no isworld: that is a world abort (the
		// table's default), and so is one whose isworld= does not read.
		world, err := spec.Bool(m, "isworld")
		if err != nil {
			world = true
		}
		s.abort(r, exitCode(spec, m), firstOf(m, "message", "msg"), world)
	case "ring":
		s.ring(r, m)
	case "finalize":
		s.finalize(r)
	default:
		r.fail(wire.RcErrOther, fmt.Errorf("gopmi bug: PMI-2 command %q is in the command table but not served", m.Cmd))
	}
}

// fullinit binds or checks the rank and answers with the superset of
// fields Slurm's libpmi2 and MPICH's client each require.
func (s *Session) fullinit(r *request, m *wire.Message) {
	j := s.j
	rank := int64(-1)
	for _, k := range []string{"pmirank", "srcid"} {
		if v, ok := m.Get(k); ok {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				r.fail(wire.RcInvalidArg, fmt.Errorf("fullinit: bad %s=%q", k, v))
				return
			}
			rank = n
			break
		}
	}
	switch {
	case s.rank < 0 && rank < 0:
		r.fail(wire.RcInvalidArg, fmt.Errorf("fullinit: a PMI_PORT connection must name its rank with pmirank="))
		return
	case s.rank < 0:
		if err := j.bind(s, int32(rank)); err != nil {
			r.fail(wire.RcInvalidArg, fmt.Errorf("fullinit: %w", err))
			return
		}
		r.rank = s.rank
	case rank >= 0 && int32(rank) != s.rank:
		r.fail(wire.RcInvalidArg, fmt.Errorf("fullinit: pmirank %d does not match this connection's rank %d (PMI_RANK)", rank, s.rank))
		return
	}
	if id, ok := m.Get("pmijobid"); ok && id != "" && id != j.cfg.Job.Nspace {
		// Slurm's libpmi2 echoes PMI_JOBID; a different one means the
		// task runs with another launcher's environment.
		j.log.Warn().Str("pmijobid", id).Int32("rank", s.rank).Msg("fullinit names another job id; serving this job")
	}
	j.clientInit(s, s.rank)
	kv := []string{
		"pmi-version", "2",
		"pmi-subversion", "0",
		"rank", strconv.Itoa(int(s.rank)),
		"size", strconv.Itoa(int(j.cfg.Job.Size)),
		"appnum", strconv.Itoa(int(j.lay.appnumOf(s.rank))),
		"debugged", "FALSE",
		"pmiverbose", wire.FormatBool(j.cfg.PMIDebug),
	}
	if p := j.cfg.Job.Parent; p != "" {
		kv = append(kv, "spawner-jobid", p)
	}
	r.ok(kv...)
}

// infoList reads infokeycount/infokeyN/infovalN.
func infoList(spec *wire.CommandSpec, m *wire.Message) ([]wire.Arg, error) {
	n, err := spec.Int(m, "infokeycount")
	if err != nil {
		return nil, err
	}
	if n < 0 || n > 1024 {
		return nil, fmt.Errorf("infokeycount %d out of range", n)
	}
	out := make([]wire.Arg, 0, n)
	for i := 0; i < n; i++ {
		k, ok1 := m.Get("infokey" + strconv.Itoa(i))
		v, ok2 := m.Get("infoval" + strconv.Itoa(i))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("infokeycount=%d but infokey%d/infoval%d is missing", n, i, i)
		}
		out = append(out, wire.Arg{Key: k, Value: v})
	}
	return out, nil
}
