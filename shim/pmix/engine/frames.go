package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gopmi/gopmi/plugin"
)

// What a PMIx face contributes to a fence is framed: libpmix's fence blob
// (the node's packed data, which every node's libpmix unpacks from the
// concatenation a collecting fence returns), or each local client's data
// in libpmix's direct-modex format (PMIx_server_dmodex_request, which a
// server asking for one process must be handed, and which the fence blob
// is not). The latter goes in a fence that collects nothing, in a fence
// of the node alone when a local client connects to another job, and in
// one when a multi-node job's client first commits. The backend keeps
// each node's contributions for DirectModex (the contract's
// ModexResponse), so another node's server, or another job's after a
// spawn or a connect, finds a process's data there without a call back
// to the node that hosts it. Frames concatenate: a fence's answer is
// every node's frames in any order, a direct modex every fence's of one
// node.
//
// A frame is
//
//	"gPX1" | kind (1) | len(nspace) (1) | nspace | rank (4, big-endian) | len(payload) (4) | payload
//
// with kind 'F' (a fence blob; empty nspace, rank 0), 'V' (the
// direct-modex data of nspace's rank, after an 8-byte big-endian version:
// its server numbers what libpmix gave it in the order it was given, and
// the highest number is the newest, whatever order the backend keeps
// them in) or 'D' (the same, unversioned, as version 0).
const frameMagic = "gPX1"

const (
	frameFence     = 'F'
	frameDmodex    = 'D'
	frameVersioned = 'V'
)

// appendDmodex adds a versioned frame of nspace's rank's direct-modex
// data to dst.
func appendDmodex(dst []byte, nspace string, rank uint32, version uint64, data []byte) []byte {
	payload := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), version)
	return appendFrame(dst, frameVersioned, nspace, rank, append(payload, data...))
}

// frameHeader is a frame's length before its nspace and after it.
const (
	frameHead = len(frameMagic) + 2
	frameTail = 8
)

// appendFrame adds one frame to dst.
func appendFrame(dst []byte, kind byte, nspace string, rank uint32, payload []byte) []byte {
	if len(nspace) > 255 {
		nspace = nspace[:255] // PMIx names are at most 255 bytes
	}
	dst = append(dst, frameMagic...)
	dst = append(dst, kind, byte(len(nspace)))
	dst = append(dst, nspace...)
	dst = binary.BigEndian.AppendUint32(dst, rank)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// Frame is one parsed frame; payload aliases the input.
type Frame struct {
	kind    byte
	nspace  string
	rank    uint32
	payload []byte
}

var errFrames = errors.New("pmix: fence data is not a PMIx face's frames")

// parseFrames splits data into its frames, or fails naming where it stops
// making sense: the data came from a backend, which must hand back what
// the faces gave it, unchanged.
func parseFrames(data []byte) ([]Frame, error) {
	var out []Frame
	for off := 0; off < len(data); {
		rest := data[off:]
		if len(rest) < frameHead || string(rest[:len(frameMagic)]) != frameMagic {
			return nil, fmt.Errorf("%w: no frame at byte %d of %d", errFrames, off, len(data))
		}
		kind, nslen := rest[len(frameMagic)], int(rest[len(frameMagic)+1])
		if kind != frameFence && kind != frameDmodex && kind != frameVersioned {
			return nil, fmt.Errorf("%w: frame kind %q at byte %d", errFrames, kind, off)
		}
		if len(rest) < frameHead+nslen+frameTail {
			return nil, fmt.Errorf("%w: a frame header cut at byte %d of %d", errFrames, off, len(data))
		}
		ns := string(rest[frameHead : frameHead+nslen])
		at := frameHead + nslen
		rank := binary.BigEndian.Uint32(rest[at:])
		n := binary.BigEndian.Uint32(rest[at+4:])
		at += frameTail
		if uint64(n) > uint64(len(rest)-at) {
			return nil, fmt.Errorf("%w: a frame of %d bytes at byte %d, with %d left", errFrames, n, off, len(rest)-at)
		}
		if kind == frameVersioned && n < 8 {
			return nil, fmt.Errorf("%w: a versioned frame of %d bytes at byte %d", errFrames, n, off)
		}
		out = append(out, Frame{kind: kind, nspace: ns, rank: rank, payload: rest[at : at+int(n)]})
		off += at + int(n)
	}
	return out, nil
}

// FenceBlobs is the concatenation of the fence blobs among frames, for
// libpmix, in the buffer alloc gives for its length (a fence's answer is
// copied once, into memory libpmix frees); nil when there is none.
func FenceBlobs(frames []Frame, alloc func(n int) []byte) []byte {
	n := 0
	for _, f := range frames {
		if f.kind == frameFence {
			n += len(f.payload)
		}
	}
	if n == 0 {
		return nil
	}
	out := alloc(n)[:0]
	for _, f := range frames {
		if f.kind == frameFence {
			out = append(out, f.payload...)
		}
	}
	return out
}

// frameSize is the length of a frame of nspace with n bytes of payload.
func frameSize(nspace string, n int) int {
	return frameHead + min(len(nspace), 255) + frameTail + n
}

// dmodexOf is the newest direct-modex data of nspace's rank among frames
// (later fences carry the data committed since, and libpmix's answer
// holds all of it): the highest version, and of equal ones the last; or
// nil.
func dmodexOf(frames []Frame, nspace string, rank uint32) []byte {
	var out []byte
	var newest uint64
	for _, f := range frames {
		if f.nspace != nspace || f.rank != rank {
			continue
		}
		v, data := uint64(0), f.payload
		switch f.kind {
		case frameDmodex:
		case frameVersioned:
			v, data = binary.BigEndian.Uint64(f.payload), f.payload[8:]
		default:
			continue
		}
		if out == nil || v >= newest {
			out, newest = data, v
		}
	}
	return out
}

// DataOf is p's newest direct-modex data in data, a backend's frames
// (what a hand-over or a fence gave it), or nil.
func DataOf(data []byte, p plugin.Proc) ([]byte, error) {
	frames, err := parseFrames(data)
	if err != nil {
		return nil, err
	}
	return dmodexOf(frames, p.Nspace, uint32(p.Rank)), nil
}
