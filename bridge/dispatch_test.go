package bridge

import (
	"strings"
	"testing"

	"github.com/gopmi/gopmi/bridge/pmi1"
	"github.com/gopmi/gopmi/bridge/pmi2"
	"github.com/gopmi/gopmi/bridge/wire"
)

// wellFormed builds a request of spec that carries every required attribute
// (and, for a sectioned command, one section): what the table says a
// client must send.
func wellFormed(spec *wire.CommandSpec, v int) string {
	var kv []string
	add := func(attrs []wire.AttrSpec) {
		for _, a := range attrs {
			if !a.Required || strings.Contains(a.Key, "#") {
				continue
			}
			val := "x"
			switch a.Kind {
			case wire.KindInt:
				val = "1"
			case wire.KindBool:
				val = "TRUE"
			}
			kv = append(kv, a.Key+"="+val)
		}
	}
	add(spec.Request)
	add(spec.SectionAttrs)
	if v == 2 {
		return "cmd=" + spec.Name + ";" + strings.Join(kv, ";") + ";"
	}
	return strings.TrimSpace("cmd=" + spec.Name + " " + strings.Join(kv, " "))
}

// TestTableDrivesDispatch: every command of both tables is served (a
// legacy one refused as such), and a request without one of its required
// attributes is refused naming it. The table is the one statement of
// what a request carries.
func TestTableDrivesDispatch(t *testing.T) {
	for _, v := range []int{1, 2} {
		table := pmi1.Commands
		if v == 2 {
			table = pmi2.Commands
		}
		for i := range table {
			spec := &table[i]
			if spec.Block || (spec.Reply == "" && spec.Name == "abort") {
				continue // a block is a part of a spawn; abort has no reply
			}
			w := newWorld(t, 1, 1)
			k := w.task(0)
			if v == 1 {
				k.init1()
			} else {
				k.init2()
			}
			line := wellFormed(spec, v)
			k.send(line)
			m := k.reply()
			if m == nil {
				t.Fatalf("PMI-%d %q: no reply", v, line)
			}
			msg := text(m)
			switch {
			case strings.Contains(msg, "not served") || strings.Contains(msg, "unknown"):
				t.Errorf("PMI-%d %q: %s", v, line, msg)
			}
			// Each required attribute, left out, is named.
			for _, a := range spec.Request {
				if !a.Required || strings.Contains(a.Key, "#") {
					continue
				}
				without := strings.Replace(line, a.Key+"=", "gopmi-dropped=", 1)
				k.send(without)
				m := k.reply()
				if m == nil {
					t.Fatalf("PMI-%d %q: no reply", v, without)
				}
				if msg := text(m); m.Value("rc") == "0" || !strings.Contains(msg, text(wire.New("", "msg", "missing "+a.Key+"="))) {
					t.Errorf("PMI-%d %q: %+v; want an error naming %s=", v, without, m.Args, a.Key)
				}
			}
		}
	}
}

// text is a reply's message; a PMI-1 msg= has its spaces as underscores.
func text(m *wire.Message) string {
	return strings.ReplaceAll(m.Value("msg"), "_", " ") + m.Value("errmsg")
}
