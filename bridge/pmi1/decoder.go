package pmi1

import (
	"io"

	"github.com/gopmi/gopmi/bridge/wire"
)

// Decoder reads PMI-1 messages from a stream, for clients and tests. The
// server does not use it: the shim feeds bytes to the bridge, which runs a
// Splitter itself.
type Decoder struct {
	split Splitter
	fr    *wire.FrameReader
}

// NewDecoder returns a Decoder reading r with frames of at most max bytes
// (0 means DefaultMax).
func NewDecoder(r io.Reader, max int) *Decoder {
	d := &Decoder{split: Splitter{Max: max}}
	d.fr = wire.NewFrameReader(r, d.split.Split)
	return d
}

// Decode reads and parses the next message. It returns io.EOF at the end
// of the stream. A framing error (wire.ErrTooLong) or parse error concerns
// one frame only: the next Decode goes on after it. A read error (such as
// a deadline) leaves buffered bytes in place, so Decode can be called
// again.
func (d *Decoder) Decode() (*wire.Message, error) {
	frame, err := d.fr.Next()
	if err != nil {
		return nil, err
	}
	return Parse(frame)
}

// Buffered returns bytes read past the last decoded message; a client that
// switches to PMI-2 after the init line hands them to the PMI-2 decoder.
func (d *Decoder) Buffered() []byte { return d.fr.Buffered() }

// Encoder writes PMI-1 messages to a stream, one Write per message.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes m as encoded by Append.
func (e *Encoder) Encode(m *wire.Message) error {
	e.buf = Append(e.buf[:0], m)
	_, err := e.w.Write(e.buf)
	return err
}
