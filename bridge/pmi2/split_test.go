package pmi2

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

type frameOrErr struct {
	Frame string
	Err   string
}

func errKind(err error) string {
	switch {
	case errors.Is(err, wire.ErrTooLong):
		return "toolong"
	case errors.Is(err, wire.ErrBadLength):
		return "badlength"
	case errors.Is(err, wire.ErrMalformed):
		return "malformed"
	}
	return err.Error()
}

// feed drives split like a read loop; it stops at the first ErrBadLength,
// after which a caller must close the connection.
func feed(t testing.TB, split func([]byte, bool) (int, []byte, error), chunks [][]byte) []frameOrErr {
	t.Helper()
	var out []frameOrErr
	var buf []byte
	broken := false
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
			if errors.Is(err, wire.ErrBadLength) {
				broken = true
				return false
			}
		}
		buf = buf[adv:]
		return adv > 0 || tok != nil || err != nil
	}
	for _, c := range chunks {
		if broken {
			return out
		}
		buf = append(buf, c...)
		for step(false) {
		}
	}
	for i := 0; !broken && step(true); i++ {
		if i > len(buf)+10 {
			t.Fatalf("split does not stop at EOF")
		}
	}
	if !broken && len(buf) != 0 {
		t.Fatalf("split left %d bytes at EOF", len(buf))
	}
	return out
}

func chunkings(data []byte) map[string][][]byte {
	m := map[string][][]byte{"whole": {data}}
	for _, n := range []int{1, 2, 5, 6, 7, 64} {
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
	long := strings.Repeat("V", 70*1024)
	longFrame := fmt.Sprintf("%-6d", len("cmd=kvs-put;key=k;value=;")+len(long)) + "cmd=kvs-put;key=k;value=" + long + ";"
	tests := []struct {
		name string
		max  int
		in   string
		want []frameOrErr
	}{
		{"left aligned", 0, "14    cmd=kvs-fence;", frames("cmd=kvs-fence;")},
		{"right aligned", 0, "    14cmd=kvs-fence;", frames("cmd=kvs-fence;")},
		{"no padding", 0, "000014cmd=kvs-fence;", frames("cmd=kvs-fence;")},
		{"centred", 0, "  14  cmd=kvs-fence;", frames("cmd=kvs-fence;")},
		{"pipelined", 0, "14    cmd=kvs-fence;    13cmd=finalize;", frames("cmd=kvs-fence;", "cmd=finalize;")},
		{"mpich 4.0 junk stays in the body", 0, "20    cmd=kvs-fence;\x00;valu13    cmd=finalize;",
			frames("cmd=kvs-fence;\x00;valu", "cmd=finalize;")},
		{"zero length", 0, "0     14    cmd=kvs-fence;", frames("", "cmd=kvs-fence;")},
		{"long body", 0, longFrame, frames(longFrame[6:])},
		{"empty stream", 0, "", nil},
		{"eof in prefix", 0, "14  ", frames("!malformed")},
		{"eof in body", 0, "14    cmd=kvs", frames("!malformed")},
		{"too long then resync", 10, "20    cmd=kvs-fence;\x00\x00\x00\x00\x00\x0013    cmd=finalize;",
			frames("!toolong", "!toolong")},
		{"too long then a short one", 16, "20    cmd=kvs-fence;\x00\x00\x00\x00\x00\x005     abcde", frames("!toolong", "abcde")},
		{"too long at eof", 4, "20    cmd=kvs", frames("!toolong")},
		{"bad length", 0, "cmd=init pmi_version=2\n", frames("!badlength")},
		{"bad length is sticky", 0, "1x    cmd=kvs-fence;14    cmd=kvs-fence;", frames("!badlength")},
		{"negative length", 0, "-5    abcde", frames("!badlength")},
		{"blank prefix", 0, "      ", frames("!badlength")},
		{"inner space", 0, "1 4   cmd=kvs-fence;", frames("!badlength")},
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

// An oversized frame is discarded exactly, however it arrives.
func TestSplitSkipsExactly(t *testing.T) {
	body := strings.Repeat("x", 1000)
	in := []byte(fmt.Sprintf("%-6d%s13    cmd=finalize;", len(body), body))
	s := &Splitter{Max: 100}
	var buf []byte
	var got []string
	var errs int
	for i := 0; i < len(in); i += 9 {
		buf = append(buf, in[i:min(i+9, len(in))]...)
		for {
			adv, tok, err := s.Split(buf, false)
			buf = buf[adv:]
			if err != nil {
				errs++
			}
			if tok != nil {
				got = append(got, string(tok))
			}
			if adv == 0 {
				break
			}
		}
		if len(buf) > 32 {
			t.Fatalf("buffer grew to %d bytes while skipping", len(buf))
		}
	}
	if errs != 1 || len(got) != 1 || got[0] != "cmd=finalize;" {
		t.Errorf("errors=%d frames=%q; want 1 error and [cmd=finalize;]", errs, got)
	}
}

func TestParseLength(t *testing.T) {
	for in, want := range map[string]int{"38    ": 38, "   113": 113, "999999": 999999, "0     ": 0, " 7    ": 7} {
		n, err := ParseLength([]byte(in))
		if err != nil || n != want {
			t.Errorf("ParseLength(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	_, err := ParseLength([]byte("cmd=in"))
	if !errors.Is(err, wire.ErrBadLength) || !strings.Contains(err.Error(), "PMI-1 line on a PMI-2 connection") {
		t.Errorf("ParseLength(cmd=in) = %v", err)
	}
	for _, in := range []string{"      ", "+12   ", "1_000 ", "\t12   ", "12\x00\x00\x00\x00"} {
		if _, err := ParseLength([]byte(in)); !errors.Is(err, wire.ErrBadLength) {
			t.Errorf("ParseLength(%q) = %v, want ErrBadLength", in, err)
		}
	}
}

func TestSplitReset(t *testing.T) {
	s := &Splitter{Max: 3}
	if _, _, err := s.Split([]byte("xx    "), false); !errors.Is(err, wire.ErrBadLength) {
		t.Fatalf("err = %v", err)
	}
	s.Reset()
	adv, tok, err := s.Split([]byte("3     abc"), false)
	if err != nil || adv != 9 || string(tok) != "abc" || s.Max != 3 {
		t.Errorf("after Reset: %d %q %v max=%d", adv, tok, err, s.Max)
	}
}
