package bridge

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/wire"
)

// dispatch1 serves one PMI-1 request.
func (s *Session) dispatch1(r *request, m *wire.Message) {
	j := s.j
	if m.Block {
		// A spawn block, as every request but the handshake's, needs a
		// rank: a PMI_PORT connection that has not claimed one (or could
		// not) may not start programs as the job's user.
		if s.rank < 0 {
			r.cmd = "spawn"
			r.fail(wire.RcFail, errors.New("spawn: this connection has no rank yet: send \"cmd=initack pmiid=<PMI_ID>\" first"))
			return
		}
		s.spawnBlock(r, m)
		return
	}
	spec, ok := checked(r, m, pmi1.Commands)
	if !ok {
		return
	}
	switch m.Cmd {
	case "init":
		s.init(r, spec, m)
		return
	case "initack":
		s.initack(r, spec, m)
		return
	case "singinit":
		s.singinit(r, spec, m)
		return
	}
	if s.rank < 0 {
		r.fail(wire.RcFail, fmt.Errorf("%s: this connection has no rank yet: send \"cmd=initack pmiid=<PMI_ID>\" first", m.Cmd))
		return
	}
	switch m.Cmd {
	case "get_maxes":
		l := j.cfg.Limits
		r.ok("kvsname_max", strconv.Itoa(l.KvsnameMax), "keylen_max", strconv.Itoa(l.KeyMax), "vallen_max", strconv.Itoa(l.ValMax))
	case "get_appnum":
		r.ok("appnum", strconv.Itoa(int(j.lay.appnumOf(s.rank))))
	case "get_universe_size":
		r.ok("size", strconv.Itoa(int(j.universeSize())))
	case "get_my_kvsname":
		r.ok("kvsname", j.cfg.Job.Nspace)
	case "put":
		if prefix, ok := s.space(r, m); ok {
			s.put(r, prefix, m.Value("key"), m.Value("value"))
		}
	case "get":
		if prefix, ok := s.space(r, m); ok {
			s.get(r, j.cfg.Job.Nspace, -1, prefix+m.Value("key"), true)
		}
	case "getbyidx":
		s.getByIdx(r, spec, m)
	case "create_kvs":
		s.createSpace(r)
	case "destroy_kvs":
		s.destroySpace(r, m)
	case "barrier_in":
		s.barrier1(r, m)
	case "finalize":
		s.finalize(r)
	case "abort":
		s.abort(r, exitCode(spec, m), firstOf(m, "message", "error_msg"), true)
	case "publish_name":
		s.publish(r, m.Value("service"), m.Value("port"), nil)
	case "unpublish_name":
		s.unpublish(r, m.Value("service"), nil)
	case "lookup_name":
		s.lookup(r, m.Value("service"), nil)
	default:
		r.fail(wire.RcErrOther, fmt.Errorf("gopmi bug: PMI-1 command %q is in the command table but not served", m.Cmd))
	}
}

// init answers the first line of both protocols.
func (s *Session) init(r *request, spec *wire.CommandSpec, m *wire.Message) {
	if s.c != nil {
		r.fail(wire.RcFail, fmt.Errorf("init: already initialized with PMI-%d", s.c.version()))
		return
	}
	ver, err1 := spec.Int(m, "pmi_version")
	sub, err2 := spec.Int(m, "pmi_subversion")
	if err1 != nil || err2 != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("init: bad version fields: %v", firstErr(err1, err2)))
		return
	}
	switch {
	case ver == 1 && sub >= 0 && sub <= 2:
		s.c = codec1
		s.j.clientInit(s, r.rank)
		r.ok("pmi_version", "1", "pmi_subversion", strconv.Itoa(sub))
	case ver == 2 && sub == 0:
		// The reply is still a PMI-1 line; PMI-2 framing starts after it.
		r.ok("pmi_version", "2", "pmi_subversion", "0")
		s.c = codec2
	default:
		r.fail(wire.RcFail, fmt.Errorf("init: PMI version %d.%d is not supported (gopmi serves 1.0, 1.1, 1.2 and 2.0)", ver, sub))
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// initack binds a PMI_PORT connection to its rank (Hydra's handshake).
func (s *Session) initack(r *request, spec *wire.CommandSpec, m *wire.Message) {
	id, err := spec.Int(m, "pmiid")
	if err != nil || id < 0 {
		r.fail(wire.RcInvalidArg, fmt.Errorf("initack: missing or bad pmiid= (%q)", m.Value("pmiid")))
		return
	}
	if s.port != nil && !s.port.Owner {
		s.refuse(r, fmt.Errorf("initack: pmiid %d refused: this PMI_PORT connection comes from %s, not from a process of the job's user "+
			"(PMI-1 cannot authenticate; a PMI-2 client can, with authtype=%s)", id, s.port, AuthChallengeSHA256))
		return
	}
	if s.rank >= 0 && int32(id) != s.rank {
		r.fail(wire.RcInvalidArg, fmt.Errorf("initack: pmiid %d does not match this connection's rank %d", id, s.rank))
		return
	}
	if err := s.j.bind(s, int32(id)); err != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("initack: %w", err))
		return
	}
	r.rank = s.rank
	debug := 0
	if s.j.cfg.PMIDebug {
		debug = 1
	}
	r.sendRaw(pmi1.AppendInitack(nil, int(s.rank), int(s.j.cfg.Job.Size), debug))
}

// singinit answers a singleton's half of MPICH's singleton upgrade: the
// process manager it started (gopmi mpiexec -pmi_args) connected and sent
// cmd=singinit first; the singleton answers with its own, and is then
// rank 0 of a job of one: its cmd=init comes next (MPICH 4.0). Stdio stays
// the singleton's own.
func (s *Session) singinit(r *request, spec *wire.CommandSpec, m *wire.Message) {
	ver, err1 := spec.Int(m, "pmi_version")
	_, err2 := spec.Int(m, "pmi_subversion")
	switch {
	case err1 != nil || err2 != nil:
		r.fail(wire.RcInvalidArg, fmt.Errorf("singinit: bad version fields: %v", firstErr(err1, err2)))
		return
	case s.rank < 0 || s.c != nil:
		r.fail(wire.RcFail, errors.New("singinit: only a singleton's first request, on the connection its process manager made"))
		return
	case m.Value("authtype") != "" && m.Value("authtype") != "none":
		r.fail(wire.RcFail, fmt.Errorf("singinit: authtype %q is not offered (none is)", m.Value("authtype")))
		return
	case ver != 1:
		r.ok("versionok", "no", "stdio", "no", "kvsname", s.j.cfg.Job.Nspace)
		return
	}
	r.ok("versionok", "yes", "stdio", "no", "kvsname", s.j.cfg.Job.Nspace)
}

// barrier1 enters a PMI-1 barrier; PMI 1.2's group= names a subset and
// its tag, which barrier_out echoes.
func (s *Session) barrier1(r *request, m *wire.Message) {
	spec, grouped := m.Get("group")
	pg, err := pmi1.ParseGroup(spec)
	if err != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("barrier_in: %w", err))
		return
	}
	g, err := s.j.group(pg, s.rank)
	if err != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("barrier_in group=%s: %w", spec, err))
		return
	}
	var extra []string
	if grouped {
		extra = []string{"tag", strconv.Itoa(pg.Tag)}
	}
	s.j.enterFence(r, g, false, extra)
}
