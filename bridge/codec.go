package bridge

import (
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// codec is one PMI version's wire as the engine sees it: how a request is
// cut from the stream and parsed, which table dispatches it, how a reply
// is written, and the shapes a reply takes where the two versions answer
// the same thing differently. A session has PMI-1's until its init names
// PMI-2; every place an answer differs by version asks the request's
// codec, and nothing else in the package tests a version. (A concrete
// type, not an interface: a reply's pairs then stay on the caller's
// stack.)
type codec struct {
	v int // 1 or 2
}

// The versions a session may speak.
var (
	codec1 = &codec{v: 1}
	codec2 = &codec{v: 2}
)

// Extra pairs of name-service replies: PMI-1's carry info=ok|fail, which
// Slurm-era clients read instead of rc; a PMI-2 lookup that fails says
// found=FALSE.
var (
	infoOK     = []string{"info", "ok"}
	infoFail   = []string{"info", "fail"}
	foundFalse = []string{"found", "FALSE"}
)

// version is 1 or 2, for messages.
func (c *codec) version() int { return c.v }

func (c *codec) split(s *Session, in []byte) (int, []byte, error) {
	if c.v == 2 {
		return s.split2.Split(in, false)
	}
	return s.split1.Split(in, false)
}

func (c *codec) parse(frame []byte) (*wire.Message, error) {
	if c.v == 2 {
		return pmi2.Parse(frame)
	}
	return pmi1.Parse(frame)
}

// thread is a request's thread id, which its reply echoes (PMI-2).
func (c *codec) thread(m *wire.Message) string {
	if c.v == 2 {
		return m.Value("thrid")
	}
	return ""
}

func (c *codec) dispatch(s *Session, r *request, m *wire.Message) {
	if c.v == 2 {
		s.dispatch2(r, m)
		return
	}
	s.dispatch1(r, m)
}

// reply is the reply to cmd: rc, then (PMI-2) the thread id and the
// error's text as errmsg, the pairs of kv, then (PMI-1) the error's text
// as msg.
func (c *codec) reply(cmd, thrid string, rc int, err error, kv []string) []byte {
	// Room for rc, thrid, errmsg or msg, and kv: one allocation.
	args := make([]wire.Arg, 0, 3+len(kv)/2)
	if c.v == 2 {
		m := &wire.Message{Cmd: pmi2.ReplyName(cmd), Args: args}
		m.AddInt("rc", rc)
		if thrid != "" {
			m.Add("thrid", thrid)
		}
		if err != nil {
			m.Add("errmsg", err.Error())
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Add(kv[i], kv[i+1])
		}
		return pmi2.Append(nil, m)
	}
	m := &wire.Message{Cmd: pmi1.ReplyName(cmd), Args: args}
	m.AddInt("rc", rc)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Add(kv[i], kv[i+1])
	}
	if err != nil {
		// MPICH's PMI-1 parser splits on spaces, so a message with
		// spaces would break its reply; Hydra writes key_x_not_found.
		m.Add("msg", strings.ReplaceAll(err.Error(), " ", "_"))
	}
	return pmi1.Append(nil, m)
}

// unknownRC is the rc of an answer to a command the table lacks.
func (c *codec) unknownRC() int {
	if c.v == 2 {
		return wire.RcErrOther
	}
	return wire.RcFail
}

// emptyPutOK: a put of nothing is answered (MPICH's PMI-1 singleton
// pushes the put it cached before it had a process manager, an empty one
// when it cached nothing).
func (c *codec) emptyPutOK() bool { return c.v == 1 }

// attrsInGet: a get of a key no task put finds a job attribute (PMI-2).
func (c *codec) attrsInGet() bool { return c.v == 2 }

// found answers a successful get.
func (c *codec) found(r *request, v string) {
	if c.v == 2 {
		r.ok("found", "TRUE", "value", v)
		return
	}
	r.ok("value", v)
}

// notFound answers a get of a missing key: PMI-2 clients expect rc=0 and
// found=FALSE (MPICH's "-NONEXIST-KEY" barrier), PMI-1 ones an error.
func (c *codec) notFound(r *request, key string) {
	if c.v == 2 {
		r.ok(foundFalse...)
		return
	}
	r.fail(wire.RcFail, fmt.Errorf("key %s not found", displayKey(key)))
}

// nsOK and nsFail are the extra pairs of a name-service reply.
func (c *codec) nsOK() []string {
	if c.v == 1 {
		return infoOK
	}
	return nil
}

func (c *codec) nsFail() []string {
	if c.v == 1 {
		return infoFail
	}
	return nil
}

// lookupFail is the extra pairs of a failed lookup.
func (c *codec) lookupFail() []string {
	if c.v == 1 {
		return infoFail
	}
	return foundFalse
}

// lookupOK answers a lookup that found port: MPICH reads port=, Slurm's
// libpmi2 reads value=, so PMI-2 sends both.
func (c *codec) lookupOK(r *request, port string) {
	if c.v == 2 {
		r.ok("found", "TRUE", "port", port, "value", port)
		return
	}
	r.ok("info", "ok", "port", port)
}

// spawnOK answers a spawn that started job jobid.
func (c *codec) spawnOK(r *request, jobid string) {
	if c.v == 2 {
		r.ok("jobid", jobid, "nerrs", "0")
		return
	}
	r.ok("jobid", jobid)
}
