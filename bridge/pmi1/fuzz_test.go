package pmi1

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

// The seed corpora in testdata/fuzz/<FuzzName> hold every PMI-1 frame of
// the captures plus edge cases (see testdata/gencorpus); go test runs them
// every time.

// FuzzParse: Parse never panics, and a message it accepts survives
// Encode, Split and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte("cmd=put kvsname=k key=a value=b c"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		if err := Validate(m); err != nil {
			t.Fatalf("Parse(%q) = %+v, which Validate refuses: %v", data, m, err)
		}
		if diff := cmp.Diff(m, roundTrip(t, m)); diff != "" {
			t.Fatalf("Parse(%q) round trip (-first +second):\n%s", data, diff)
		}
	})
}

// FuzzSplit feeds data in chunks chosen by cuts and checks the Split
// contract (feed fails on advance out of range or no progress) and that
// the frames and errors do not depend on the chunking.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("cmd=a\nmcmd=spawn\nx=1\nendcmd\n"), []byte{1, 2, 3}, uint8(0))
	f.Fuzz(func(t *testing.T, data, cuts []byte, max uint8) {
		whole := feed(t, (&Splitter{Max: int(max)}).Split, [][]byte{data})
		var chunks [][]byte
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := 1
			if len(cuts) > 0 {
				n = int(cuts[i%len(cuts)])%17 + 1
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
// Validate accepts must come back from Encode, Split and Parse unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add("put", "key", "a", "value", "b c", false)
	f.Add("spawn", "arg1", "x y", "info_val_0", "z", true)
	f.Add("get_result", "msg", "not found", "value", "v", false)
	f.Fuzz(func(t *testing.T, cmd, k1, v1, k2, v2 string, block bool) {
		m := &wire.Message{Cmd: cmd, Block: block, Args: []wire.Arg{{Key: k1, Value: v1}, {Key: k2, Value: v2}}}
		if Validate(m) != nil {
			return
		}
		if diff := cmp.Diff(m, roundTrip(t, m)); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
