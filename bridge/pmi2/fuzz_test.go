package pmi2

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gopmi/gopmi/bridge/wire"
)

// The seed corpora in testdata/fuzz/<FuzzName> hold every PMI-2 frame of
// the captures, junk included, plus edge cases; go test runs them every
// time.

// FuzzParse: Parse never panics, reads what parseByByte reads, and a
// message it accepts is one Validate accepts and survives Encode, Split
// and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte("cmd=kvs-fence;\x00;valu"))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
		ref, refErr := parseByByte(body)
		if (err == nil) != (refErr == nil) || (err == nil && !cmp.Equal(m, ref, cmpopts.EquateEmpty())) {
			t.Fatalf("Parse(%q) = %+v, %v; the byte-by-byte reading gives %+v, %v", body, m, err, ref, refErr)
		}
		if err != nil {
			return
		}
		if len(body) <= MaxBody {
			if err := Validate(m); err != nil {
				t.Fatalf("Parse(%q) = %+v, which Validate refuses: %v", body, m, err)
			}
		}
		if diff := cmp.Diff(m, roundTrip(t, m)); diff != "" {
			t.Fatalf("Parse(%q) round trip (-first +second):\n%s", body, diff)
		}
	})
}

// FuzzSplit feeds data in chunks chosen by cuts and checks the Split
// contract and that frames and errors do not depend on the chunking.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("14    cmd=kvs-fence;    13cmd=finalize;"), []byte{1, 5, 2}, uint8(0))
	f.Fuzz(func(t *testing.T, data, cuts []byte, max uint8) {
		whole := feed(t, (&Splitter{Max: int(max)}).Split, [][]byte{data})
		var chunks [][]byte
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := 1
			if len(cuts) > 0 {
				n = int(cuts[i%len(cuts)])%13 + 1
			}
			n = min(n, len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		got := feed(t, (&Splitter{Max: int(max)}).Split, chunks)
		if diff := cmp.Diff(whole, got); diff != "" {
			t.Fatalf("chunked split differs from whole (-whole +chunked):\n%s", diff)
		}
	})
}

// FuzzRoundTrip builds messages from the fuzzer's strings; every message
// Validate accepts comes back from Encode, Split and Parse unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add("kvs-put", "key", "a;b", "value", ";;")
	f.Fuzz(func(t *testing.T, cmd, k1, v1, k2, v2 string) {
		m := &wire.Message{Cmd: cmd, Args: []wire.Arg{{Key: k1, Value: v1}, {Key: k2, Value: v2}}}
		if Validate(m) != nil {
			return
		}
		if diff := cmp.Diff(m, roundTrip(t, m)); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

// parseByByte is the plainest reading of a body, one byte at a time, that
// Parse must agree with: segments end at a ';' that is not doubled, ";;"
// is one ';', a segment's first '=' splits key from value, the first
// pair is cmd=, an unterminated tail and keyless pairs are dropped.
func parseByByte(body []byte) (*wire.Message, error) {
	b := body
	if n := len(b); n > junkLen && b[n-1] != ';' && b[n-1-junkLen] == ';' {
		b = b[:n-junkLen]
	}
	var m *wire.Message
	var seg []byte
	for i := 0; i < len(b); i++ {
		if b[i] != ';' {
			seg = append(seg, b[i])
			continue
		}
		if i+1 < len(b) && b[i+1] == ';' {
			seg = append(seg, ';')
			i++
			continue
		}
		key, val, ok := bytes.Cut(seg, []byte("="))
		seg = nil
		switch {
		case m == nil && (!ok || string(key) != "cmd" || len(val) == 0):
			return nil, errors.New("no cmd")
		case m == nil:
			m = &wire.Message{Cmd: string(val)}
		case ok && len(key) > 0:
			m.Args = append(m.Args, wire.Arg{Key: string(key), Value: string(val)})
		}
	}
	if m == nil {
		return nil, errors.New("no cmd")
	}
	return m, nil
}
