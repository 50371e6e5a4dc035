package pmi2

import (
	"bytes"
	"fmt"
	"io"

	"github.com/gopmi/gopmi/bridge/wire"
)

// Decoder reads PMI-2 messages from a stream, for clients and tests. It
// expects the PMI-1 init exchange to be over: hand it the bytes a PMI-1
// decoder buffered past the init line with NewDecoderBuffered.
type Decoder struct {
	split Splitter
	fr    *wire.FrameReader
}

// NewDecoder returns a Decoder reading r with bodies of at most max bytes
// (0 means DefaultMax).
func NewDecoder(r io.Reader, max int) *Decoder {
	d := &Decoder{split: Splitter{Max: max}}
	d.fr = wire.NewFrameReader(r, d.split.Split)
	return d
}

// NewDecoderBuffered is NewDecoder for a stream whose first bytes were
// already read into buffered.
func NewDecoderBuffered(buffered []byte, r io.Reader, max int) *Decoder {
	if len(buffered) == 0 {
		return NewDecoder(r, max)
	}
	b := append([]byte(nil), buffered...)
	return NewDecoder(io.MultiReader(bytes.NewReader(b), r), max)
}

// Decode reads and parses the next message. It returns io.EOF at the end
// of the stream. wire.ErrTooLong and parse errors concern one frame: the
// next Decode goes on after it. After wire.ErrBadLength the stream cannot
// be read further. A read error (such as a deadline) leaves buffered bytes
// in place, so Decode can be called again.
func (d *Decoder) Decode() (*wire.Message, error) {
	frame, err := d.fr.Next()
	if err != nil {
		return nil, err
	}
	return Parse(frame)
}

// Buffered returns bytes read past the last decoded message.
func (d *Decoder) Buffered() []byte { return d.fr.Buffered() }

// Encoder writes PMI-2 messages (requests as a client, replies in tests),
// one Write per message, with a left-aligned length prefix.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes m as encoded by Append. It refuses a body longer than
// MaxBody, which a 6-digit prefix cannot declare.
func (e *Encoder) Encode(m *wire.Message) error {
	if n := BodyLen(m); n > MaxBody {
		return fmt.Errorf("%w: cmd=%s body of %d bytes exceeds %d", wire.ErrTooLong, m.Cmd, n, MaxBody)
	}
	e.buf = Append(e.buf[:0], m)
	_, err := e.w.Write(e.buf)
	return err
}
