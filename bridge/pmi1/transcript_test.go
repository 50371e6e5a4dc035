package pmi1

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

// txLine is one C> or S< line of a capture, decoded to bytes.
type txLine struct {
	dir       byte // 'C' client wrote, 'S' client read
	data      []byte
	truncated bool // the capture cut the write short; total is its size
	total     int
	where     string
}

type txSession struct {
	name  string
	lines []txLine
}

var truncRe = regexp.MustCompile(`\.\.\.\((\d+) bytes\)$`)

// decodeTx turns a capture line into bytes: `\n` is a newline, `@` a NUL,
// and other characters are single Latin-1 bytes.
func decodeTx(s string) (data []byte, truncated bool, total int) {
	if m := truncRe.FindStringSubmatch(s); m != nil {
		total, _ = strconv.Atoi(m[1])
		truncated = true
		s = s[:len(s)-len(m[0])]
	}
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], `\n`) {
			data = append(data, '\n')
			i += 2
			continue
		}
		r, n := rune(s[i]), 1
		if s[i] >= 0x80 {
			r, n = []rune(s[i:])[0], len(string([]rune(s[i:])[0]))
		}
		switch {
		case r == '@':
			data = append(data, 0)
		default:
			data = append(data, byte(r))
		}
		i += n
	}
	return data, truncated, total
}

// readTranscripts loads every capture in testdata/transcripts.
func readTranscripts(t *testing.T) []txSession {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "transcripts", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata/transcripts: %v", err)
	}
	var out []txSession
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "x") {
			// Written by hand for the bridge's failure paths (see the
			// transcripts' README): the codecs are held to real captures.
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		n := 0
		for sc.Scan() {
			n++
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "== "):
				out = append(out, txSession{name: filepath.Base(f) + ":" + strings.TrimPrefix(line, "== ")})
			case strings.HasPrefix(line, "C> "), strings.HasPrefix(line, "S< "):
				if len(out) == 0 {
					t.Fatalf("%s:%d: line before the first session header", f, n)
				}
				d, tr, total := decodeTx(line[3:])
				s := &out[len(out)-1]
				s.lines = append(s.lines, txLine{dir: line[0], data: d, truncated: tr, total: total, where: filepath.Base(f) + ":" + strconv.Itoa(n)})
			case strings.TrimSpace(line) == "":
			default:
				t.Fatalf("%s:%d: unexpected line %q", f, n, line)
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// pmi1Part returns the lines of a session up to and including the PMI-1
// reply to a PMI-2 init line; the rest is PMI-2 and belongs to package pmi2.
func pmi1Part(s txSession) []txLine {
	for i, l := range s.lines {
		if l.dir == 'C' && strings.HasPrefix(string(l.data), "cmd=init pmi_version=2") {
			for j := i + 1; j < len(s.lines); j++ {
				if s.lines[j].dir == 'S' {
					return s.lines[:j+1]
				}
			}
			return s.lines[:i+1]
		}
	}
	return s.lines
}

// restore rebuilds a write the capture cut short: the visible prefix padded
// with '0' (the cut values are hex) to its recorded size, newline last.
func restore(t *testing.T, l txLine) []byte {
	t.Helper()
	if !l.truncated {
		return l.data
	}
	if l.total <= len(l.data) {
		t.Fatalf("%s: truncated line longer than its size %d", l.where, l.total)
	}
	b := append([]byte(nil), l.data...)
	for len(b) < l.total-1 {
		b = append(b, '0')
	}
	return append(b, '\n')
}

var cmdRe = regexp.MustCompile(`^m?cmd=([A-Za-z_-]+)`)

// checkKnown fails when m has a key the schema does not list.
func checkKnown(t *testing.T, where string, m *wire.Message, reply bool, spec *wire.CommandSpec) {
	t.Helper()
	for _, a := range m.Args {
		var ok bool
		if reply {
			_, ok = spec.ResponseAttr(a.Key)
			ok = ok || a.Key == "rc" || a.Key == "msg"
		} else {
			_, ok = spec.RequestAttr(a.Key)
		}
		if !ok {
			t.Errorf("%s: cmd=%s: key %s is not in the schema", where, m.Cmd, a.Key)
		}
	}
}

// TestTranscripts replays every PMI-1 write of the captures, chunked as
// the client wrote it, through a Splitter and Parse, and checks each
// command against the schema; then it parses the server's replies as a
// client would and checks each names the reply to its request. Writes the
// capture cut short ("...(N bytes)": long hex puts and get replies) are
// restored to their size with '0' padding, so they also exercise long
// lines.
func TestTranscripts(t *testing.T) {
	var spawns int
	for _, s := range readTranscripts(t) {
		t.Run(s.name, func(t *testing.T) {
			lines := pmi1Part(s)
			var cChunks, sChunks [][]byte
			var wantReq []string
			for _, l := range lines {
				if l.dir == 'C' {
					cChunks = append(cChunks, restore(t, l))
					if m := cmdRe.FindSubmatch(l.data); m != nil {
						wantReq = append(wantReq, string(m[1]))
					}
				} else {
					sChunks = append(sChunks, restore(t, l))
				}
			}
			sp := &Splitter{}
			var gotReq, wantRep []string
			var blocks []*SpawnBlock
			for _, f := range feed(t, sp.Split, cChunks) {
				if f.Err != "" {
					t.Fatalf("client stream: split error %s", f.Err)
				}
				m, err := Parse([]byte(f.Frame))
				if err != nil {
					t.Fatalf("Parse(%q): %v", f.Frame, err)
				}
				gotReq = append(gotReq, m.Cmd)
				spec, ok := Lookup(m.Cmd)
				if !ok {
					t.Errorf("cmd=%s is not in Commands", m.Cmd)
					continue
				}
				if miss := spec.MissingRequired(m); len(miss) > 0 {
					t.Errorf("cmd=%s lacks required %v", m.Cmd, miss)
				}
				checkKnown(t, s.name, m, false, spec)
				switch {
				case m.Cmd == "initack":
					wantRep = append(wantRep, "initack", "set", "set", "set")
				case spec.Reply != "":
					wantRep = append(wantRep, ReplyName(m.Cmd))
				}
				if m.Block {
					b, err := ParseSpawnBlock(m)
					if err != nil {
						t.Fatalf("ParseSpawnBlock: %v", err)
					}
					blocks = append(blocks, b)
				}
			}
			if diff := cmp.Diff(wantReq, gotReq); diff != "" {
				t.Errorf("request commands (-want +got):\n%s", diff)
			}
			if len(blocks) > 0 {
				spawns++
				sp, err := CollectSpawn(blocks)
				if err != nil {
					t.Fatalf("CollectSpawn: %v", err)
				}
				want := &wire.Spawn{
					Cmds:   []wire.SpawnCmd{{Cmd: "./bin/stw", Args: []string{"./bin/spawn_p1"}, MaxProcs: 2, Info: []wire.Arg{}}},
					Preput: []wire.Arg{{Key: "PARENT_ROOT_PORT_NAME", Value: "tag#0$description#vm$port#49423$ifname#127.0.0.1$"}},
				}
				if diff := cmp.Diff(want, sp); diff != "" {
					t.Errorf("spawn (-want +got):\n%s", diff)
				}
			}

			rs := &Splitter{}
			var gotRep []string
			for _, f := range feed(t, rs.Split, sChunks) {
				if f.Err != "" {
					t.Fatalf("server stream: split error %s", f.Err)
				}
				m, err := Parse([]byte(f.Frame))
				if err != nil {
					t.Fatalf("Parse(%q): %v", f.Frame, err)
				}
				gotRep = append(gotRep, m.Cmd)
				if len(gotRep) <= len(gotReq) && m.Cmd != "set" {
					if spec, ok := Lookup(gotReq[indexOfReply(gotRep)]); ok {
						checkKnown(t, s.name, m, true, spec)
					}
				}
			}
			if diff := cmp.Diff(wantRep, gotRep); diff != "" {
				t.Errorf("reply commands (-want +got):\n%s", diff)
			}
		})
	}
	if spawns != 1 {
		t.Errorf("replayed %d PMI-1 spawns, want the 1 in h1spawn", spawns)
	}
}

// indexOfReply maps the reply just appended to its request's index,
// skipping the set lines that follow initack.
func indexOfReply(replies []string) int {
	n := 0
	for _, r := range replies {
		if r != "set" {
			n++
		}
	}
	return n - 1
}

// Truncated lines are also checked as the capture shows them: the visible
// prefix of a cut line must parse with the right command.
func TestTranscriptTruncatedPrefixes(t *testing.T) {
	n := 0
	for _, s := range readTranscripts(t) {
		for _, l := range pmi1Part(s) {
			if !l.truncated {
				continue
			}
			n++
			m, err := Parse(l.data)
			if err != nil {
				t.Errorf("%s: Parse(prefix): %v", l.where, err)
				continue
			}
			want := string(cmdRe.FindSubmatch(l.data)[1])
			if m.Cmd != want || m.Value("value") == "" {
				t.Errorf("%s: got cmd=%s value=%.10q, want cmd=%s with a value", l.where, m.Cmd, m.Value("value"), want)
			}
		}
	}
	if n == 0 {
		t.Errorf("no truncated PMI-1 lines found; the captures changed?")
	}
}
