package pmi1

import (
	"bytes"
	"fmt"

	"github.com/gopmi/gopmi/bridge/wire"
)

// DefaultMax is the frame limit a zero Splitter.Max stands for: 1 MiB,
// far above MPICH's 1 KiB values, so long values work.
const DefaultMax = 1 << 20

// longestEndcmd bounds how long a line can be and still be an endcmd line
// (spaces and a CR around the word); longer partial lines are dropped
// while skipping an oversized block.
const longestEndcmd = 64

type skipMode int

const (
	skipNone  skipMode = iota
	skipLine           // discard up to the next newline
	skipBlock          // discard up to the next endcmd line
)

// Splitter cuts a PMI-1 byte stream into frames: one line per command
// (without its newline and trailing carriage returns), or one whole
// mcmd= ... endcmd block (without the final newline). Blank lines between
// frames are skipped.
//
// Split has the shape of a bufio.SplitFunc but the Splitter keeps state
// between calls, so a caller must follow bufio.Scanner's contract: after
// a (0, nil, nil) return, call again with the same bytes plus more. Use
// one Splitter per connection.
//
// A frame longer than Max is reported once, as an error wrapping
// wire.ErrTooLong with advance > 0; the Splitter then discards the rest
// of that line (or block, through its endcmd line) and goes on with the
// next frame, so a caller that keeps calling after the error is back in
// step. A stream that ends inside a frame yields an error wrapping
// wire.ErrMalformed so the server can report a task that died mid-message.
type Splitter struct {
	// Max is the longest frame accepted, in bytes (a line's carriage
	// returns count, its newline does not); 0 means DefaultMax.
	Max int

	skip     skipMode
	midLine  bool   // skipping: the bytes before the data were part of a line
	head     []byte // skipping a first line: its first non-blank bytes, to tell a block start
	scanned  int    // bytes of the pending frame already searched for its end
	inBlock  bool   // the pending frame is an mcmd= block
	lineFrom int    // in a block: start of the first line not yet checked
}

// Reset drops any partial state, as for a new connection.
func (s *Splitter) Reset() { *s = Splitter{Max: s.Max} }

func (s *Splitter) max() int {
	if s.Max > 0 {
		return s.Max
	}
	return DefaultMax
}

// Split returns the next frame in data. See the type documentation.
func (s *Splitter) Split(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if s.skip != skipNone {
		return s.discard(data, atEOF)
	}
	if s.scanned > len(data) || s.lineFrom > len(data) {
		// The caller broke the contract (shorter data than before):
		// search again from the start rather than index out of range.
		s.scanned, s.lineFrom, s.inBlock = 0, 0, false
	}
	if s.scanned == 0 && !s.inBlock {
		if n := leadingBlankLines(data, s.max()); n > 0 {
			return n, nil, nil
		}
	}
	if s.inBlock {
		return s.splitBlock(data, atEOF)
	}
	max := s.max()
	i := bytes.IndexByte(data[s.scanned:], '\n')
	if i < 0 {
		switch {
		case len(data) > max:
			// Whether this line opens a block may not show yet (with a
			// tiny Max); keep its head and decide at its newline.
			s.scanned = 0
			s.skip, s.midLine = skipLine, true
			s.head = s.head[:0]
			s.noteHead(data)
			return len(data), nil, fmt.Errorf("%w: line longer than %d bytes, skipped", wire.ErrTooLong, max)
		case atEOF:
			s.scanned = 0
			if len(data) == 0 || isBlank(data) {
				return len(data), nil, nil
			}
			return len(data), nil, fmt.Errorf("%w: connection closed mid-message after %q", wire.ErrMalformed, preview(data))
		}
		s.scanned = len(data)
		return 0, nil, nil
	}
	end := s.scanned + i
	s.scanned = 0
	if isBlockStart(data[:end]) {
		s.inBlock = true
		s.lineFrom = end + 1
		return s.splitBlock(data, atEOF)
	}
	// The limit counts carriage returns so that a line is judged the same
	// whether its newline arrives in this call or a later one.
	if end > max {
		return end + 1, nil, fmt.Errorf("%w: line of %d bytes exceeds %d, skipped", wire.ErrTooLong, end, max)
	}
	line := trimCR(data[:end])
	if isBlank(line) {
		return end + 1, nil, nil
	}
	return end + 1, line, nil
}

// splitBlock looks for the endcmd line of the pending mcmd= block.
func (s *Splitter) splitBlock(data []byte, atEOF bool) (int, []byte, error) {
	max := s.max()
	for {
		i := bytes.IndexByte(data[s.lineFrom:], '\n')
		if i < 0 {
			break
		}
		lineEnd := s.lineFrom + i
		line := data[s.lineFrom:lineEnd]
		s.lineFrom = lineEnd + 1
		if isEndcmd(line) {
			s.inBlock, s.lineFrom = false, 0
			if lineEnd > max {
				return lineEnd + 1, nil, fmt.Errorf("%w: mcmd block of %d bytes exceeds %d, skipped", wire.ErrTooLong, lineEnd, max)
			}
			return lineEnd + 1, data[:lineEnd], nil
		}
	}
	switch {
	case len(data) > max:
		// Complete lines were checked; the partial tail may still be the
		// start of endcmd unless it is too long for that.
		adv, keep := s.lineFrom, len(data)-s.lineFrom
		s.midLine = false
		if keep > longestEndcmd {
			adv, s.midLine = len(data), true
		}
		s.inBlock, s.lineFrom = false, 0
		s.skip = skipBlock
		return adv, nil, fmt.Errorf("%w: mcmd block longer than %d bytes, skipped", wire.ErrTooLong, max)
	case atEOF:
		s.inBlock, s.lineFrom = false, 0
		return len(data), nil, fmt.Errorf("%w: connection closed inside an mcmd block (no endcmd line)", wire.ErrMalformed)
	}
	return 0, nil, nil
}

// noteHead records the first non-blank bytes of a skipped first line.
func (s *Splitter) noteHead(b []byte) {
	for _, c := range b {
		if len(s.head) >= len("mcmd=") {
			return
		}
		if len(s.head) == 0 && (c == ' ' || c == '\t') {
			continue
		}
		s.head = append(s.head, c)
	}
}

// discard drops the rest of an oversized frame.
func (s *Splitter) discard(data []byte, atEOF bool) (int, []byte, error) {
	off := 0
	for {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			break
		}
		line := data[off : off+i]
		wasMid := s.midLine
		s.midLine = false
		off += i + 1
		if s.skip == skipLine {
			s.noteHead(line)
			if string(s.head) == "mcmd=" {
				// The skipped line opened a block: skip to its endcmd.
				s.skip, s.head = skipBlock, s.head[:0]
				continue
			}
			s.skip, s.head = skipNone, s.head[:0]
			return off, nil, nil
		}
		if !wasMid && isEndcmd(line) {
			s.skip = skipNone
			return off, nil, nil
		}
	}
	rest := len(data) - off
	switch {
	case atEOF:
		s.skip, s.midLine, s.head = skipNone, false, s.head[:0]
		return len(data), nil, nil
	case rest == 0:
		if off == 0 {
			return 0, nil, nil
		}
		return off, nil, nil
	case s.skip == skipLine:
		s.noteHead(data[off:])
		return len(data), nil, nil
	case s.midLine || rest > longestEndcmd:
		// The partial line cannot end the skip: drop it.
		s.midLine = true
		return len(data), nil, nil
	}
	// A short partial line might be endcmd: wait for its newline.
	if off > 0 {
		return off, nil, nil
	}
	return 0, nil, nil
}

// leadingBlankLines measures the blank lines at the start of data; a blank
// line longer than max is left for the caller to report.
func leadingBlankLines(data []byte, max int) int {
	n := 0
	for {
		i := bytes.IndexByte(data[n:], '\n')
		if i < 0 || i > max || !isBlank(data[n:n+i]) {
			return n
		}
		n += i + 1
	}
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

func isBlockStart(b []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(b, " \t"), []byte("mcmd="))
}

// isEndcmd reports whether line ends a block. Lines longer than
// longestEndcmd never do, so a skip that drops long partial lines agrees
// with a whole-buffer scan.
func isEndcmd(line []byte) bool {
	return len(line) <= longestEndcmd && string(bytes.Trim(line, " \t\r")) == "endcmd"
}

func trimCR(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}

func preview(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
