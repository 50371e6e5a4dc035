package bridge

import (
	"fmt"

	"github.com/gopmi/gopmi/bridge/wire"
)

// checked finds m's command in its protocol's table and checks the
// request against it, so the table is the one statement of what a
// request carries: a command the table lacks, a legacy one, or a request
// without a required attribute is answered here with an error. A missing
// key= is INVALID_KEY and a missing value= INVALID_VAL, as PMI defines
// them; anything else missing is INVALID_ARG. The handlers then read
// attributes through the spec, whose defaults say what an absent one
// means.
func checked(r *request, m *wire.Message, t wire.Table) (*wire.CommandSpec, bool) {
	spec, ok := t.Lookup(m.Cmd)
	switch {
	case !ok:
		r.fail(r.c.unknownRC(), fmt.Errorf("unknown PMI-%d command %q", r.c.version(), m.Cmd))
		return nil, false
	}
	if miss := spec.MissingRequired(m); len(miss) > 0 {
		rc := wire.RcInvalidArg
		switch miss[0] {
		case "key":
			rc = wire.RcInvalidKey
		case "value":
			rc = wire.RcInvalidVal
		}
		r.failKV(rc, fmt.Errorf("%s: missing %s=", m.Cmd, miss[0]), failKV(r)...)
		return nil, false
	}
	return spec, true
}

// failKV is what a failed reply to r carries besides rc and the message,
// for the clients that read it instead of rc: Slurm's PMI-1 name service
// reads info=fail, and a PMI-2 lookup or node attribute answers
// found=FALSE.
func failKV(r *request) []string {
	switch r.cmd {
	case "publish_name", "unpublish_name", "name-publish", "name-unpublish":
		return r.c.nsFail()
	case "lookup_name", "name-lookup":
		return r.c.lookupFail()
	case "info-getnodeattr":
		return []string{"found", "FALSE"}
	}
	return nil
}

// exitCode reads an abort's status from exitcode= (MPICH) or exit_code=
// (Flux's spelling); without a readable one the job still fails, with
// exitcode's default.
func exitCode(spec *wire.CommandSpec, m *wire.Message) int {
	for _, k := range []string{"exitcode", "exit_code"} {
		if m.Has(k) {
			if n, err := spec.Int(m, k); err == nil {
				return n
			}
		}
	}
	n, _ := spec.Int(&wire.Message{}, "exitcode")
	return n
}

// firstOf returns the first of keys that m carries.
func firstOf(m *wire.Message, keys ...string) string {
	for _, k := range keys {
		if v, ok := m.Get(k); ok {
			return v
		}
	}
	return ""
}
