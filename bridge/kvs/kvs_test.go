package kvs

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBlobRoundTrip(t *testing.T) {
	recs := []Record{
		{Rank: 0, Key: "k0", Value: "v0"},
		{Rank: -1, Key: "PARENT_ROOT_PORT_NAME", Value: "tag#0$port#1$"},
		{Rank: 1023, Key: "long", Value: string(make([]byte, 70000))},
		{Rank: 5, Key: "", Value: ""},
	}
	var a, b []byte
	for i, r := range recs {
		if i < 2 {
			a = AppendRecord(a, r)
		} else {
			b = AppendRecord(b, r)
		}
	}
	// The concatenation of two nodes' blobs is a blob.
	var got []Record
	if err := Decode(append(a, b...), func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(recs, got); d != "" {
		t.Fatalf("records differ (-want +got):\n%s", d)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	good := AppendRecord(nil, Record{Rank: 3, Key: "key", Value: "value"})
	for i := 1; i < len(good); i++ {
		err := Decode(good[:i], func(Record) error { return nil })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated at %d: err = %v, want ErrCorrupt", i, err)
		}
	}
}

func TestStoreCommitLastWins(t *testing.T) {
	s := NewStore()
	var blob []byte
	blob = AppendRecord(blob, Record{Rank: 0, Key: "k", Value: "old"})
	blob = AppendRecord(blob, Record{Rank: 1, Key: "k", Value: "new"})
	n, err := s.Commit(blob)
	if err != nil || n != 2 {
		t.Fatalf("Commit = %d, %v", n, err)
	}
	v, r, ok := s.Get("k")
	if !ok || v != "new" || r != 1 {
		t.Fatalf("Get = %q, %d, %v", v, r, ok)
	}
	if _, _, ok := s.Get("missing"); ok {
		t.Fatal("missing key found")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(AppendRecord(nil, Record{Rank: 1, Key: "a", Value: "b"}))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, blob []byte) {
		var recs, fromString []Record
		err := Decode(blob, func(r Record) error { recs = append(recs, r); return nil })
		// The store's decoder (over one string, no copy per record) reads
		// exactly what Decode reads, and fails where it fails.
		serr := decodeString(string(blob), func(r Record) error { fromString = append(fromString, r); return nil })
		if (err == nil) != (serr == nil) || !slices.Equal(recs, fromString) {
			t.Fatalf("Decode: %d records, %v; decodeString: %d records, %v", len(recs), err, len(fromString), serr)
		}
		if err != nil {
			return
		}
		var again []byte
		for _, r := range recs {
			again = AppendRecord(again, r)
		}
		var recs2 []Record
		if err := Decode(again, func(r Record) error { recs2 = append(recs2, r); return nil }); err != nil {
			t.Fatalf("re-encoded blob does not decode: %v", err)
		}
		if d := cmp.Diff(recs, recs2); d != "" {
			t.Fatal(d)
		}
	})
}

func TestStoreAppendAll(t *testing.T) {
	s := NewStore()
	if got := s.AppendAll(nil); len(got) != 0 {
		t.Fatalf("empty store: %q", got)
	}
	want := map[string]Record{
		"a":     {Rank: 0, Key: "a", Value: "1"},
		"b":     {Rank: 3, Key: "b", Value: "x;y=z"},
		"pre":   {Rank: -1, Key: "pre", Value: ""},
		"again": {Rank: 1, Key: "again", Value: "new"},
	}
	s.Put(Record{Rank: 1, Key: "again", Value: "old"})
	for _, r := range want {
		s.Put(r)
	}
	got := map[string]Record{}
	if err := Decode(s.AppendAll([]byte(nil)), func(r Record) error {
		if _, dup := got[r.Key]; dup {
			t.Errorf("key %q twice", r.Key)
		}
		got[r.Key] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, r := range want {
		if got[k] != r {
			t.Errorf("%s: got %+v, want %+v", k, got[k], r)
		}
	}
}

func TestStoreKeys(t *testing.T) {
	s := NewStore()
	for _, k := range []string{"b", "\x00s\x00y", "a", "\x00s\x00x", "\x00t\x00x"} {
		s.Put(Record{Key: k, Value: "v" + k})
	}
	if got := strings.Join(s.Keys("\x00s\x00"), ","); got != "\x00s\x00x,\x00s\x00y" {
		t.Errorf("Keys(s) = %q", got)
	}
	if got := len(s.Keys("")); got != 5 {
		t.Errorf("Keys() has %d keys", got)
	}
	s.Put(Record{Key: "0", Value: "new"})
	if got := s.Keys(""); got[len(got)-3] != "0" {
		t.Errorf("a new key is not in order: %q", got)
	}
	s.Delete("\x00s\x00")
	if got := strings.Join(s.Keys(""), ","); got != "\x00t\x00x,0,a,b" {
		t.Errorf("after Delete: %q", got)
	}
	if _, _, ok := s.Get("\x00s\x00x"); ok {
		t.Error("a deleted key is still there")
	}
}

// TestBuffer: records appended in chunks read back as the one blob
// AppendRecord would have made, each chunk is whole records, and a store
// commits the chunks without copying them.
func TestBuffer(t *testing.T) {
	var b, moved Buffer
	var want []byte
	for i := 0; i < 3000; i++ {
		r := Record{Rank: int32(i%7) - 1, Key: fmt.Sprintf("k%d", i), Value: strings.Repeat("v", i%300)}
		if RecordSize(r) != len(AppendRecord(nil, r)) {
			t.Fatalf("RecordSize(%+v) = %d", r, RecordSize(r))
		}
		if i%2 == 0 {
			b.Append(r)
		} else {
			b.AppendBlob(AppendRecord(nil, r))
		}
		want = AppendRecord(want, r)
	}
	moved.Move(&b)
	if b.Len() != 0 || moved.Len() != len(want) || !bytes.Equal(moved.Bytes(), want) {
		t.Fatalf("buffer holds %d bytes, want %d", moved.Len(), len(want))
	}
	for i, c := range moved.chunks {
		if err := Decode(c, func(Record) error { return nil }); err != nil {
			t.Fatalf("chunk %d of %d is not whole records: %v", i, len(moved.chunks), err)
		}
		if cap(c) > maxChunk {
			t.Fatalf("chunk %d of %d bytes", i, cap(c))
		}
	}
	s := NewStore()
	n, err := s.CommitOwned(&moved)
	if err != nil || n != 3000 || moved.Len() != 0 {
		t.Fatalf("CommitOwned = %d, %v", n, err)
	}
	if v, rank, ok := s.Get("k2999"); !ok || rank != 2999%7-1 || len(v) != 2999%300 {
		t.Errorf("k2999 = %q, %d, %v", v, rank, ok)
	}
	if _, rank, _ := s.Get("k0"); rank != -1 {
		t.Errorf("k0 put by rank %d, want -1", rank)
	}
	bad := AppendRecord(nil, Record{Key: "x", Value: "y"})
	if _, err := NewStore().Commit(bad[:len(bad)-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a cut blob commits: %v", err)
	}
}
