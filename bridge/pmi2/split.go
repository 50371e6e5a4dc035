package pmi2

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/gopmi/gopmi/bridge/wire"
)

// HeaderLen is the size of the decimal length prefix of every PMI-2 frame.
const HeaderLen = 6

// MaxBody is the longest body a 6-digit length prefix can declare.
const MaxBody = 999999

// DefaultMax is the frame limit a zero Splitter.Max stands for. It is above
// MaxBody, so by default every frame a client can express is accepted.
const DefaultMax = 1 << 20

// Splitter cuts a PMI-2 byte stream into frame bodies: a 6-byte decimal
// length, left-aligned ("38    ", Slurm and the clients) or right-aligned
// ("   113", Hydra) and trimmed of spaces, then exactly that many bytes. The
// body is returned without the prefix. MPICH 4.0's junk bytes counted in
// the length stay in the body; Parse ignores them.
//
// Split has the shape of a bufio.SplitFunc but keeps state between calls;
// use one Splitter per connection and follow bufio.Scanner's contract.
//
// A declared length above Max is reported once, as an error wrapping
// wire.ErrTooLong; the Splitter then discards exactly that many bytes,
// across calls, and goes on with the next frame.
//
// A length prefix that is not a number (wire.ErrBadLength) leaves no way
// to find the next frame: the Splitter keeps returning that error and the
// caller must close the connection. The message says when the prefix looks
// like a PMI-1 line, which is what a second PMI2_Init on the same
// connection sends.
//
// A stream that ends inside a frame yields an error wrapping
// wire.ErrMalformed.
type Splitter struct {
	// Max is the longest body accepted, in bytes; 0 means DefaultMax.
	Max int

	skip   int   // bytes of an oversized body still to discard
	broken error // sticky wire.ErrBadLength
}

// Reset drops any partial state, as for a new connection.
func (s *Splitter) Reset() { *s = Splitter{Max: s.Max} }

func (s *Splitter) max() int {
	if s.Max > 0 {
		return s.Max
	}
	return DefaultMax
}

// Split returns the next frame body in data. See the type documentation.
func (s *Splitter) Split(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if s.broken != nil {
		return len(data), nil, s.broken
	}
	if s.skip > 0 {
		n := min(s.skip, len(data))
		s.skip -= n
		if n == 0 && atEOF {
			s.skip = 0
		}
		return n, nil, nil
	}
	if len(data) < HeaderLen {
		if !atEOF {
			return 0, nil, nil
		}
		if len(data) == 0 {
			return 0, nil, nil
		}
		return len(data), nil, fmt.Errorf("%w: connection closed inside a length prefix %q", wire.ErrMalformed, data)
	}
	n, err := ParseLength(data[:HeaderLen])
	if err != nil {
		s.broken = err
		return len(data), nil, err
	}
	if n > s.max() {
		got := min(n, len(data)-HeaderLen)
		s.skip = n - got
		return HeaderLen + got, nil, fmt.Errorf("%w: frame of %d bytes exceeds %d, skipped", wire.ErrTooLong, n, s.max())
	}
	if len(data)-HeaderLen < n {
		if atEOF {
			return len(data), nil, fmt.Errorf("%w: connection closed after %d of %d bytes", wire.ErrMalformed, len(data)-HeaderLen, n)
		}
		return 0, nil, nil
	}
	return HeaderLen + n, data[HeaderLen : HeaderLen+n], nil
}

// ParseLength reads a 6-byte length prefix, left- or right-aligned.
func ParseLength(h []byte) (int, error) {
	t := bytes.Trim(h, " ")
	ok := len(t) > 0
	for _, c := range t {
		if c < '0' || c > '9' {
			ok = false
			break
		}
	}
	if !ok {
		if bytes.HasPrefix(h, []byte("cmd=")) || bytes.HasPrefix(h, []byte("mcmd")) {
			return 0, fmt.Errorf("%w: %q is a PMI-1 line on a PMI-2 connection (a second init?)", wire.ErrBadLength, h)
		}
		return 0, fmt.Errorf("%w: %q", wire.ErrBadLength, h)
	}
	n, _ := strconv.Atoi(string(t))
	return n, nil
}
