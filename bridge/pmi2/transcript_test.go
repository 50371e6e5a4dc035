package pmi2

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

// The captures live in bridge/testdata/transcripts (its README.md
// explains the notation); the bridge and both codecs replay them.
var transcriptDir = filepath.Join("..", "testdata", "transcripts")

type txLine struct {
	dir       byte
	data      []byte
	truncated bool
	total     int
	where     string
}

type txSession struct {
	name  string
	lines []txLine
}

var truncRe = regexp.MustCompile(`\.\.\.\((\d+) bytes\)$`)

func decodeTx(s string) (data []byte, truncated bool, total int) {
	if m := truncRe.FindStringSubmatch(s); m != nil {
		total, _ = strconv.Atoi(m[1])
		truncated = true
		s = s[:len(s)-len(m[0])]
	}
	for _, r := range s {
		switch {
		case r == '@':
			data = append(data, 0)
		case r < 0x100:
			data = append(data, byte(r))
		default:
			data = append(data, string(r)...)
		}
	}
	return bytes.ReplaceAll(data, []byte(`\n`), []byte("\n")), truncated, total
}

func readTranscripts(t *testing.T) []txSession {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(transcriptDir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s: %v", transcriptDir, err)
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
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "== "):
				out = append(out, txSession{name: filepath.Base(f) + ":" + line[3:]})
			case strings.HasPrefix(line, "C> "), strings.HasPrefix(line, "S< "):
				if len(out) == 0 {
					t.Fatalf("%s:%d: line before the first session header", f, n)
				}
				d, tr, total := decodeTx(line[3:])
				s := &out[len(out)-1]
				s.lines = append(s.lines, txLine{dir: line[0], data: d, truncated: tr, total: total, where: filepath.Base(f) + ":" + strconv.Itoa(n)})
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// pmi2Part returns the lines after the PMI-1 reply to a PMI-2 init line,
// or nil for a PMI-1 session.
func pmi2Part(s txSession) []txLine {
	for i, l := range s.lines {
		if l.dir == 'C' && bytes.HasPrefix(l.data, []byte("cmd=init pmi_version=2")) {
			for j := i + 1; j < len(s.lines); j++ {
				if s.lines[j].dir == 'S' {
					return s.lines[j+1:]
				}
			}
		}
	}
	return nil
}

var cmdRe = regexp.MustCompile(`cmd=([A-Za-z_-]+)`)

// restore rebuilds a write for the stream replay. A write the capture cut
// ("...(N bytes)", N counting the prefix for C> lines and the body for S<
// body lines) is padded with 'x' to its size and closed with ';'. A client
// write shorter than its prefix says lost trailing junk bytes in the
// capture (h2spawn shows 4 of MPICH 4.0's 6); it is padded with NULs.
func restore(t *testing.T, l txLine) []byte {
	t.Helper()
	b := append([]byte(nil), l.data...)
	if l.truncated {
		for len(b) < l.total-1 {
			b = append(b, 'x')
		}
		return append(b, ';')
	}
	if l.dir == 'C' && len(b) > HeaderLen {
		if n, err := ParseLength(b[:HeaderLen]); err == nil {
			for len(b) < HeaderLen+n {
				b = append(b, 0)
			}
		}
	}
	return b
}

func checkKnown(t *testing.T, where string, m *wire.Message, reply bool, spec *wire.CommandSpec) {
	t.Helper()
	for _, a := range m.Args {
		var ok bool
		if reply {
			_, ok = spec.ResponseAttr(a.Key)
			ok = ok || a.Key == "rc" || a.Key == "errmsg"
		} else {
			_, ok = spec.RequestAttr(a.Key)
		}
		ok = ok || a.Key == "thrid"
		if !ok {
			t.Errorf("%s: cmd=%s: key %s is not in the schema", where, m.Cmd, a.Key)
		}
	}
}

// TestTranscripts replays every PMI-2 write of the captures (MPICH 4.0's
// junk included), chunked as written, through a Splitter and Parse, checks
// each command against the schema and each spawn with ParseSpawn, then
// reads the server side (Hydra's right-aligned and Slurm's left-aligned
// prefixes) as a client and checks every reply names its request.
func TestTranscripts(t *testing.T) {
	var sessions, spawns int
	for _, s := range readTranscripts(t) {
		lines := pmi2Part(s)
		if lines == nil {
			continue
		}
		sessions++
		t.Run(s.name, func(t *testing.T) {
			var cChunks, sChunks [][]byte
			var wantReq []string
			for _, l := range lines {
				if l.dir == 'C' {
					cChunks = append(cChunks, restore(t, l))
					wantReq = append(wantReq, string(cmdRe.FindSubmatch(l.data)[1]))
				} else {
					sChunks = append(sChunks, restore(t, l))
				}
			}
			var gotReq, wantRep []string
			for _, f := range feed(t, (&Splitter{}).Split, cChunks) {
				if f.Err != "" {
					t.Fatalf("client stream: %s", f.Err)
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
				if spec.Reply != "" {
					wantRep = append(wantRep, ReplyName(m.Cmd))
				}
				if m.Cmd == "spawn" && !strings.Contains(f.Frame, "xxx;") {
					spawns++
					sp, err := ParseSpawn(m)
					if err != nil {
						t.Fatalf("ParseSpawn(%q): %v", f.Frame, err)
					}
					if len(sp.Cmds) != 1 || sp.Cmds[0].MaxProcs != 2 || len(sp.Preput) != 1 {
						t.Errorf("spawn = %+v", sp)
					}
					continue
				}
				if miss := spec.MissingRequired(m); len(miss) > 0 {
					t.Errorf("cmd=%s lacks required %v", m.Cmd, miss)
				}
				checkKnown(t, s.name, m, false, spec)
			}
			if diff := cmp.Diff(wantReq, gotReq); diff != "" {
				t.Errorf("request commands (-want +got):\n%s", diff)
			}
			var gotRep []string
			for _, f := range feed(t, (&Splitter{}).Split, sChunks) {
				if f.Err != "" {
					t.Fatalf("server stream: %s", f.Err)
				}
				m, err := Parse([]byte(f.Frame))
				if err != nil {
					t.Fatalf("Parse(%q): %v", f.Frame, err)
				}
				if spec, ok := Lookup(strings.TrimSuffix(m.Cmd, "-response")); ok {
					checkKnown(t, s.name, m, true, spec)
				}
				gotRep = append(gotRep, m.Cmd)
			}
			if diff := cmp.Diff(wantRep, gotRep); diff != "" {
				t.Errorf("reply commands (-want +got):\n%s", diff)
			}
		})
	}
	if sessions < 15 || spawns < 2 {
		t.Errorf("replayed %d PMI-2 sessions and %d complete spawns; the captures changed?", sessions, spawns)
	}
}

// TestTranscriptJunk checks MPICH 4.0's junk lines as captured: every
// client write with bytes past its last ';' parses to the same message as
// the write without them.
func TestTranscriptJunk(t *testing.T) {
	n := 0
	for _, s := range readTranscripts(t) {
		for _, l := range pmi2Part(s) {
			if l.dir != 'C' || l.truncated {
				continue
			}
			body := restore(t, l)[HeaderLen:]
			end := bytes.LastIndexByte(body[:len(body)-HeaderLen], ';')
			if body[len(body)-1] == ';' || end < 0 {
				continue
			}
			n++
			got, err := Parse(body)
			if err != nil {
				t.Fatalf("%s: Parse(%q): %v", l.where, body, err)
			}
			want, err := Parse(body[:end+1])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: junk changed the message (-clean +junk):\n%s", l.where, diff)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d junk lines found; the captures changed?", n)
	}
}

// Cut lines are also checked as captured: the visible part of the body,
// up to its last ';', parses with the right command.
func TestTranscriptTruncatedPrefixes(t *testing.T) {
	n := 0
	for _, s := range readTranscripts(t) {
		for _, l := range pmi2Part(s) {
			if !l.truncated {
				continue
			}
			n++
			body := l.data
			if l.dir == 'C' {
				body = body[HeaderLen:]
			}
			body = body[:bytes.LastIndexByte(body, ';')+1]
			m, err := Parse(body)
			if err != nil {
				t.Errorf("%s: Parse(prefix): %v", l.where, err)
				continue
			}
			if want := string(cmdRe.FindSubmatch(l.data)[1]); m.Cmd != want {
				t.Errorf("%s: cmd=%s, want %s", l.where, m.Cmd, want)
			}
		}
	}
	if n == 0 {
		t.Errorf("no truncated PMI-2 lines; the captures changed?")
	}
}
