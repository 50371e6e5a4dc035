package pmi1

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

// frameOrErr is one result of splitting: a frame, or an error kind.
type frameOrErr struct {
	Frame string
	Err   string // "toolong", "malformed", other error text
}

func errKind(err error) string {
	switch {
	case errors.Is(err, wire.ErrTooLong):
		return "toolong"
	case errors.Is(err, wire.ErrMalformed):
		return "malformed"
	}
	return err.Error()
}

// feed drives split the way a read loop does: bytes arrive in chunks, the
// unconsumed tail is kept, and split is called until it asks for more. At
// the end it is called with atEOF until it stops. It fails the test on a
// contract violation (advance out of range, no progress).
func feed(t testing.TB, split func([]byte, bool) (int, []byte, error), chunks [][]byte) []frameOrErr {
	t.Helper()
	var out []frameOrErr
	var buf []byte
	step := func(atEOF bool) bool {
		adv, tok, err := split(buf, atEOF)
		if adv < 0 || adv > len(buf) {
			t.Fatalf("split advanced %d of %d bytes", adv, len(buf))
		}
		if err != nil && adv == 0 && len(buf) > 0 {
			t.Fatalf("split returned %v without progress on %d bytes", err, len(buf))
		}
		if tok != nil && adv == 0 {
			t.Fatalf("split returned a token without progress")
		}
		if tok != nil {
			out = append(out, frameOrErr{Frame: string(tok)})
		}
		if err != nil {
			out = append(out, frameOrErr{Err: errKind(err)})
		}
		buf = buf[adv:]
		return adv > 0 || tok != nil || err != nil
	}
	for _, c := range chunks {
		buf = append(buf, c...)
		for step(false) {
		}
	}
	for i := 0; step(true); i++ {
		if i > len(buf)+10 {
			t.Fatalf("split does not stop at EOF")
		}
	}
	if len(buf) != 0 {
		t.Fatalf("split left %d bytes at EOF", len(buf))
	}
	return out
}

// chunkings returns data whole, byte by byte, and in a few fixed sizes.
func chunkings(data []byte) map[string][][]byte {
	m := map[string][][]byte{"whole": {data}}
	for _, n := range []int{1, 2, 3, 7, 64} {
		var cs [][]byte
		for i := 0; i < len(data); i += n {
			cs = append(cs, data[i:min(i+n, len(data))])
		}
		m[fmt.Sprintf("by%d", n)] = cs
	}
	return m
}

func frames(fs ...string) []frameOrErr {
	out := make([]frameOrErr, len(fs))
	for i, f := range fs {
		if strings.HasPrefix(f, "!") {
			out[i] = frameOrErr{Err: f[1:]}
		} else {
			out[i] = frameOrErr{Frame: f}
		}
	}
	return out
}

func TestSplit(t *testing.T) {
	long := strings.Repeat("A", 70*1024)
	tests := []struct {
		name string
		max  int
		in   string
		want []frameOrErr
	}{
		{"one line", 0, "cmd=get_maxes\n", frames("cmd=get_maxes")},
		{"pipelined", 0, "cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\ncmd=get_appnum\n",
			frames("cmd=init pmi_version=1 pmi_subversion=1", "cmd=get_maxes", "cmd=get_appnum")},
		{"crlf", 0, "cmd=barrier_in\r\ncmd=finalize\r\r\n", frames("cmd=barrier_in", "cmd=finalize")},
		{"blank lines skipped", 0, "\n\n  \r\ncmd=a\n\n\t\ncmd=b\n  \n", frames("cmd=a", "cmd=b")},
		{"only blanks", 0, "\n \n", nil},
		{"blank partial at eof", 0, "cmd=a\n  ", frames("cmd=a")},
		{"empty", 0, "", nil},
		{"eof mid line", 0, "cmd=a\ncmd=put key=x val", frames("cmd=a", "!malformed")},
		{"spawn block", 0, "mcmd=spawn\nnprocs=2\nexecname=./x\nendcmd\ncmd=finalize\n",
			frames("mcmd=spawn\nnprocs=2\nexecname=./x\nendcmd", "cmd=finalize")},
		{"two spawn blocks", 0, "mcmd=spawn\na=1\nendcmd\nmcmd=spawn\nb=2\nendcmd\n",
			frames("mcmd=spawn\na=1\nendcmd", "mcmd=spawn\nb=2\nendcmd")},
		{"block with blank and crlf lines", 0, "mcmd=spawn\r\n\r\na=1\r\n endcmd \r\n",
			frames("mcmd=spawn\r\n\r\na=1\r\n endcmd \r")},
		{"eof mid block", 0, "mcmd=spawn\nnprocs=2\n", frames("!malformed")},
		{"eof in endcmd line", 0, "mcmd=spawn\nendc", frames("!malformed")},
		{"long value", 0, "cmd=put key=k value=" + long + "\ncmd=get key=k\n",
			frames("cmd=put key=k value="+long, "cmd=get key=k")},
		{"too long then resync", 32, "cmd=put key=k value=" + strings.Repeat("v", 100) + "\ncmd=barrier_in\n",
			frames("!toolong", "cmd=barrier_in")},
		{"exactly max", 10, "cmd=abcdef\ncmd=abcdefg\ncmd=x\n", frames("cmd=abcdef", "!toolong", "cmd=x")},
		{"too long at eof", 8, "cmd=" + strings.Repeat("x", 20), frames("!toolong")},
		{"too long block then resync", 40,
			"mcmd=spawn\nnprocs=2\n" + strings.Repeat("arg1=xxxxxxxxxx\n", 10) + "endcmd\ncmd=finalize\n",
			frames("!toolong", "cmd=finalize")},
		{"too long block long lines", 40,
			"mcmd=spawn\narg1=" + strings.Repeat("y", 200) + "endcmd\nendcmd\ncmd=finalize\n",
			frames("!toolong", "cmd=finalize")},
		{"too long first block line", 16, "mcmd=spawn" + strings.Repeat(" ", 30) + "\nendcmd\ncmd=x\n",
			frames("!toolong", "cmd=x")},
		{"mcmd inside a line is not a block", 0, "cmd=put value=xmcmd=spawn\n", frames("cmd=put value=xmcmd=spawn")},
	}
	for _, tt := range tests {
		for cname, chunks := range chunkings([]byte(tt.in)) {
			t.Run(tt.name+"/"+cname, func(t *testing.T) {
				s := &Splitter{Max: tt.max}
				got := feed(t, s.Split, chunks)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("frames (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// The transcript's spawn arrives in two write() calls that split the
// block in the middle; the frame must not come out before endcmd.
func TestSplitSpawnAcrossWrites(t *testing.T) {
	w1 := "mcmd=spawn\nnprocs=2\nexecname=./bin/stw\ntotspawns=1\nspawnssofar=1\narg1=./bin/spawn_p1\n"
	w2 := "argcnt=1\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=tag#0$description#vm$port#49423$ifname#127.0.0.1$\ninfo_num=0\nendcmd\n"
	s := &Splitter{}
	adv, tok, err := s.Split([]byte(w1), false)
	if adv != 0 || tok != nil || err != nil {
		t.Fatalf("first write: Split = %d, %q, %v; want 0, nil, nil", adv, tok, err)
	}
	data := []byte(w1 + w2)
	adv, tok, err = s.Split(data, false)
	if err != nil || adv != len(data) {
		t.Fatalf("second write: Split = %d, %v; want %d, nil", adv, err, len(data))
	}
	m, err := Parse(tok)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !m.Block || m.Cmd != "spawn" || len(m.Args) != 10 {
		t.Errorf("got %+v", m)
	}
}

// A caller that keeps calling after the too-long error is back in step at
// the next line, even when the long line arrives over many calls.
func TestSplitResyncAfterTooLong(t *testing.T) {
	s := &Splitter{Max: 16}
	var buf []byte
	var errs, toks int
	var got []string
	in := []byte(strings.Repeat("z", 1000) + "\ncmd=ok\n")
	for i := 0; i < len(in); i += 5 {
		buf = append(buf, in[i:min(i+5, len(in))]...)
		for {
			adv, tok, err := s.Split(buf, false)
			buf = buf[adv:]
			if err != nil {
				errs++
				if !errors.Is(err, wire.ErrTooLong) {
					t.Fatalf("error %v does not wrap ErrTooLong", err)
				}
				if adv == 0 {
					t.Fatalf("error without progress")
				}
			}
			if tok != nil {
				toks++
				got = append(got, string(tok))
			}
			if adv == 0 {
				break
			}
		}
		if len(buf) > 64 {
			t.Fatalf("buffer grew to %d bytes while skipping", len(buf))
		}
	}
	if errs != 1 || toks != 1 || got[0] != "cmd=ok" {
		t.Errorf("errors=%d tokens=%v; want 1 error and [cmd=ok]", errs, got)
	}
}

func TestSplitReset(t *testing.T) {
	s := &Splitter{Max: 8}
	if _, _, err := s.Split([]byte("cmd=aaaaaaaaaaaa"), false); !errors.Is(err, wire.ErrTooLong) {
		t.Fatalf("Split = %v, want ErrTooLong", err)
	}
	s.Reset()
	adv, tok, err := s.Split([]byte("cmd=x\n"), false)
	if err != nil || adv != 6 || string(tok) != "cmd=x" {
		t.Errorf("after Reset: %d %q %v", adv, tok, err)
	}
	if s.Max != 8 {
		t.Errorf("Reset lost Max")
	}
}

func TestSplitErrorMessages(t *testing.T) {
	s := &Splitter{}
	_, _, err := s.Split([]byte("cmd=put key=a"), true)
	if err == nil || !strings.Contains(err.Error(), "connection closed mid-message") {
		t.Errorf("EOF error = %v", err)
	}
	_, _, err = (&Splitter{Max: 4}).Split(bytes.Repeat([]byte("x"), 10), false)
	if err == nil || !strings.Contains(err.Error(), "longer than 4 bytes") {
		t.Errorf("too long error = %v", err)
	}
}
