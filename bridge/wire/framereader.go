package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// FrameReader cuts frames out of a byte stream with a split function, like
// bufio.Scanner, with three differences the PMI codecs need: a split error
// is returned for that frame only and reading goes on after it (the
// splitters resynchronise after an oversized frame); the split function
// can be swapped between frames (a PMI-2 connection starts with one PMI-1
// line); and a read error other than io.EOF (a deadline) is returned
// without losing buffered bytes, so a later call can resume.
//
// A FrameReader is not safe for concurrent use.
type FrameReader struct {
	r        io.Reader
	split    bufio.SplitFunc
	buf      []byte
	start    int
	end      int
	eof      bool
	noProg   int
	readSize int
}

// NewFrameReader returns a reader that cuts r's bytes with split.
func NewFrameReader(r io.Reader, split bufio.SplitFunc) *FrameReader {
	return &FrameReader{r: r, split: split, readSize: 4096}
}

// SetSplit replaces the split function for the following frames. Bytes
// already buffered stay and are cut with the new function.
func (f *FrameReader) SetSplit(split bufio.SplitFunc) { f.split = split }

// Buffered returns the bytes read but not yet consumed by a frame.
func (f *FrameReader) Buffered() []byte { return f.buf[f.start:f.end] }

// errSplitRange reports a split function that advanced outside its data.
var errSplitRange = errors.New("split function advanced outside its data")

// Next returns the next frame. The frame aliases an internal buffer and
// is valid until the next call. At the end of the stream Next returns
// io.EOF; a split error is returned as is and the next call goes on with
// the bytes after it.
func (f *FrameReader) Next() ([]byte, error) {
	for {
		if f.end > f.start || f.eof {
			adv, tok, err := f.split(f.buf[f.start:f.end], f.eof)
			if adv < 0 || adv > f.end-f.start {
				return nil, fmt.Errorf("%w: %w (%d of %d bytes)", ErrMalformed, errSplitRange, adv, f.end-f.start)
			}
			f.start += adv
			if err != nil {
				return nil, err
			}
			if tok != nil {
				return tok, nil
			}
			if adv > 0 {
				continue
			}
			if f.eof {
				if f.end > f.start {
					return nil, io.ErrUnexpectedEOF
				}
				return nil, io.EOF
			}
		}
		if err := f.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads once into the buffer, growing it when it is full.
func (f *FrameReader) fill() error {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:f.end])
		f.start, f.end = 0, n
	}
	if len(f.buf)-f.end < f.readSize {
		size := 2 * len(f.buf)
		if size < f.end+f.readSize {
			size = f.end + f.readSize
		}
		nb := make([]byte, size)
		copy(nb, f.buf[:f.end])
		f.buf = nb
	}
	n, err := f.r.Read(f.buf[f.end:])
	f.end += n
	switch {
	case errors.Is(err, io.EOF):
		f.eof = true
		return nil
	case err != nil:
		return err
	case n == 0:
		f.noProg++
		if f.noProg > 100 {
			return io.ErrNoProgress
		}
	default:
		f.noProg = 0
	}
	return nil
}
