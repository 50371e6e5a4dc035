package engine

import (
	"bytes"
	"errors"
	"testing"
)

func TestFrames(t *testing.T) {
	var node1, node2 []byte
	node1 = appendFrame(node1, frameFence, "", 0, []byte("blob-1"))
	node1 = appendFrame(node1, frameDmodex, "job.1", 0, []byte("r0-first"))
	node1 = appendFrame(node1, frameDmodex, "job.1", 1, []byte("r1"))
	node2 = appendFrame(node2, frameFence, "", 0, []byte("blob-2"))
	node2 = appendFrame(node2, frameDmodex, "job.1", 2, nil)
	// A later fence of node 1: its rank 0 committed more.
	later := appendFrame(nil, frameDmodex, "job.1", 0, []byte("r0-second"))
	// Versioned frames: the highest version is the newest, wherever the
	// backend put it.
	versioned := appendDmodex(nil, "job.1", 4, 7, []byte("r4-v7"))
	versioned = appendDmodex(versioned, "job.1", 4, 5, []byte("r4-v5"))
	versioned = appendDmodex(versioned, "job.1", 5, 0, nil)
	all := append(append(append(append([]byte(nil), node1...), node2...), later...), versioned...)
	frames, err := parseFrames(all)
	if err != nil {
		t.Fatal(err)
	}
	if got := FenceBlobs(frames, func(n int) []byte { return make([]byte, n) }); string(got) != "blob-1blob-2" {
		t.Errorf("fence blobs %q", got)
	}
	if got := FenceBlobs(frames[2:3], func(int) []byte { panic("no fence blob, no buffer") }); got != nil {
		t.Errorf("fence blobs of no fence frame %q", got)
	}
	if n, want := len(appendFrame(nil, frameFence, "job.1", 0, []byte("abc"))), frameSize("job.1", 3); n != want {
		t.Errorf("a frame of 3 bytes is %d long, frameSize says %d", n, want)
	}
	for _, c := range []struct {
		ns   string
		rank uint32
		want []byte
	}{{"job.1", 0, []byte("r0-second")}, {"job.1", 1, []byte("r1")}, {"job.1", 2, []byte{}}, {"job.1", 3, nil}, {"job.2", 0, nil},
		{"job.1", 4, []byte("r4-v7")}, {"job.1", 5, []byte{}}} {
		got := dmodexOf(frames, c.ns, c.rank)
		if !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("dmodex of %s:%d = %q, want %q", c.ns, c.rank, got, c.want)
		}
	}
	if frames, err := parseFrames(nil); err != nil || len(frames) != 0 {
		t.Errorf("no data: %v %v", frames, err)
	}
	for name, bad := range map[string][]byte{
		"not framed":    []byte("a libpmix blob"),
		"cut header":    node1[:7],
		"cut payload":   node1[:len(appendFrame(nil, frameFence, "", 0, []byte("blob-1")))-1],
		"unknown kind":  append([]byte("gPX1X\x00"), make([]byte, 8)...),
		"huge length":   append([]byte("gPX1F\x00\x00\x00\x00\x00\xff\xff\xff\xff"), 'x'),
		"trailing junk": append(append([]byte(nil), node2...), 'x'),
		"short version": []byte("gPX1V\x00\x00\x00\x00\x00\x00\x00\x00\x03abc"),
	} {
		if _, err := parseFrames(bad); !errors.Is(err, errFrames) {
			t.Errorf("%s: err %v, want errFrames", name, err)
		}
	}
}

// FuzzFrames: any input parses or fails with errFrames, never panics, and
// what parses frames again to the same frames.
func FuzzFrames(f *testing.F) {
	f.Add(appendFrame(appendFrame(nil, frameFence, "", 0, []byte("x")), frameDmodex, "ns", 7, []byte("yz")))
	f.Add([]byte("gPX1D\x02ns\x00\x00\x00\x01\x00\x00\x00\x00"))
	f.Add(appendDmodex(nil, "ns", 3, 9, []byte("data")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := parseFrames(data)
		if err != nil {
			if !errors.Is(err, errFrames) {
				t.Fatalf("error %v is not errFrames", err)
			}
			return
		}
		var again []byte
		for _, fr := range frames {
			again = appendFrame(again, fr.kind, fr.nspace, fr.rank, fr.payload)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("frames do not round-trip: %q -> %q", data, again)
		}
	})
}
