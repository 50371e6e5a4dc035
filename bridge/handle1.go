package bridge

import (
	"fmt"
	"strconv"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/wire"
)

// dispatch1 serves one PMI-1 request.
func (s *Session) dispatch1(r *request, m *wire.Message) {
	j := s.j
	if m.Block {
		s.spawnBlock(r, m)
		return
	}
	switch m.Cmd {
	case "init":
		s.init(r, m)
		return
	case "initack":
		s.initack(r, m)
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
		if !s.checkKVSName(r, m) {
			return
		}
		if key, val, ok := needKeyValue(r, m); ok {
			s.put(r, key, val)
		}
	case "get":
		if !s.checkKVSName(r, m) {
			return
		}
		if key, ok := needKey(r, m); ok {
			s.get(r, j.cfg.Job.Nspace, -1, key, true)
		}
	case "barrier_in":
		s.barrier1(r, m)
	case "finalize":
		s.finalize(r)
	case "abort":
		s.abort(r, exitCode(m), firstOf(m, "message", "msg", "error_msg"), true)
	case "publish_name":
		s.publish(r, m.Value("service"), m.Value("port"), m.Has("port"), nil)
	case "unpublish_name":
		s.unpublish(r, m.Value("service"), nil)
	case "lookup_name":
		s.lookup(r, m.Value("service"), nil)
	case "getbyidx", "create_kvs", "destroy_kvs":
		r.fail(wire.RcFail, fmt.Errorf("%s is not supported by gopmi (PMI-1 KVS iteration and extra KVS spaces were dropped from MPICH long ago)", m.Cmd))
	default:
		r.fail(wire.RcFail, fmt.Errorf("unknown PMI-1 command %q", m.Cmd))
	}
}

// exitCode reads an abort's status from exitcode= (MPICH) or exit_code=
// (Flux's spelling); without either the job still fails, with status 1.
func exitCode(m *wire.Message) int {
	for _, k := range []string{"exitcode", "exit_code"} {
		if v, ok := m.Get(k); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 1
}

func firstOf(m *wire.Message, keys ...string) string {
	for _, k := range keys {
		if v, ok := m.Get(k); ok {
			return v
		}
	}
	return ""
}

// needKey returns the request's key=, or answers it with INVALID_KEY.
func needKey(r *request, m *wire.Message) (string, bool) {
	key, ok := m.Get("key")
	if !ok {
		r.fail(wire.RcInvalidKey, fmt.Errorf("%s: missing key=", m.Cmd))
	}
	return key, ok
}

// needKeyValue returns the request's key= and value=, or answers it with
// INVALID_KEY or INVALID_VAL.
func needKeyValue(r *request, m *wire.Message) (key, val string, ok bool) {
	if key, ok = needKey(r, m); !ok {
		return "", "", false
	}
	if val, ok = m.Get("value"); !ok {
		r.fail(wire.RcInvalidVal, fmt.Errorf("%s %s: missing value=", m.Cmd, key))
	}
	return key, val, ok
}

// checkKVSName refuses a put or get that names another job's KVS: PMI-1
// has no cross-job KVS, and silently using our own would hide a bug.
func (s *Session) checkKVSName(r *request, m *wire.Message) bool {
	name, ok := m.Get("kvsname")
	if !ok || name == s.j.cfg.Job.Nspace {
		return true
	}
	r.fail(wire.RcInvalidArg, fmt.Errorf("%s: kvsname %q is not this job's KVS (%s)", m.Cmd, name, s.j.cfg.Job.Nspace))
	return false
}

// init answers the first line of both protocols.
func (s *Session) init(r *request, m *wire.Message) {
	if s.version != 0 {
		r.fail(wire.RcFail, fmt.Errorf("init: already initialized with PMI-%d", s.version))
		return
	}
	ver, err1 := m.Int("pmi_version", 1)
	sub, err2 := m.Int("pmi_subversion", 1)
	if err1 != nil || err2 != nil {
		r.fail(wire.RcInvalidArg, fmt.Errorf("init: bad version fields: %v", firstErr(err1, err2)))
		return
	}
	switch {
	case ver == 1 && sub >= 0 && sub <= 2:
		s.version = 1
		s.j.clientInit(s, r.rank)
		r.ok("pmi_version", "1", "pmi_subversion", strconv.Itoa(sub))
	case ver == 2 && sub == 0:
		// The reply is still a PMI-1 line; PMI-2 framing starts after it.
		r.ok("pmi_version", "2", "pmi_subversion", "0")
		s.version = 2
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
func (s *Session) initack(r *request, m *wire.Message) {
	id, err := m.Int("pmiid", -1)
	if err != nil || id < 0 {
		r.fail(wire.RcInvalidArg, fmt.Errorf("initack: missing or bad pmiid= (%q)", m.Value("pmiid")))
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
