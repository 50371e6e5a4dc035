package pmi2

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

// The seed corpora in testdata/fuzz/<FuzzName> hold every PMI-2 frame of
// the captures, junk included, plus edge cases; go test runs them every
// time.

// FuzzParse: Parse never panics, and a message it accepts is one Validate
// accepts and survives Encode, Split and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte("cmd=kvs-fence;\x00;valu"))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
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
