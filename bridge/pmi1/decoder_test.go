package pmi1

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

func TestDecoder(t *testing.T) {
	in := "cmd=init pmi_version=1 pmi_subversion=1\n\ncmd=put key=k value=" + strings.Repeat("x", 100) +
		"\ncmd=ok\nmcmd=spawn\nnprocs=1\nendcmd\nbogus\ncmd=last\n"
	d := NewDecoder(iotest.OneByteReader(strings.NewReader(in)), 64)
	var got []string
	for {
		m, err := d.Decode()
		if errors.Is(err, io.EOF) {
			break
		}
		switch {
		case errors.Is(err, wire.ErrTooLong):
			got = append(got, "toolong")
		case errors.Is(err, wire.ErrNoCmd):
			got = append(got, "nocmd")
		case err != nil:
			t.Fatalf("Decode: %v", err)
		default:
			got = append(got, m.Cmd)
		}
	}
	want := []string{"init", "toolong", "ok", "spawn", "nocmd", "last"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDecoderEOFMidMessage(t *testing.T) {
	d := NewDecoder(strings.NewReader("cmd=a\ncmd=b key="), 0)
	if m, err := d.Decode(); err != nil || m.Cmd != "a" {
		t.Fatalf("first Decode = %v, %v", m, err)
	}
	if _, err := d.Decode(); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("second Decode err = %v, want ErrMalformed", err)
	}
	if _, err := d.Decode(); !errors.Is(err, io.EOF) {
		t.Errorf("third Decode err = %v, want io.EOF", err)
	}
}

// A read error that is not EOF (a deadline) keeps buffered bytes, so the
// next Decode resumes.
func TestDecoderResumesAfterReadError(t *testing.T) {
	r := &flakyReader{parts: []string{"cmd=put key=a ", "", "value=b\n"}}
	d := NewDecoder(r, 0)
	if _, err := d.Decode(); !errors.Is(err, errFlaky) {
		t.Fatalf("first Decode err = %v, want the read error", err)
	}
	m, err := d.Decode()
	if err != nil || m.Value("value") != "b" || m.Value("key") != "a" {
		t.Fatalf("second Decode = %+v, %v", m, err)
	}
}

var errFlaky = errors.New("flaky read")

type flakyReader struct{ parts []string }

func (f *flakyReader) Read(p []byte) (int, error) {
	if len(f.parts) == 0 {
		return 0, io.EOF
	}
	s := f.parts[0]
	f.parts = f.parts[1:]
	if s == "" {
		return 0, errFlaky
	}
	return copy(p, s), nil
}

func TestDecoderBufferedAfterInit(t *testing.T) {
	d := NewDecoder(strings.NewReader("cmd=init pmi_version=2 pmi_subversion=0\n23    cmd=fullinit;"), 0)
	m, err := d.Decode()
	if err != nil || m.Cmd != "init" {
		t.Fatalf("Decode = %v, %v", m, err)
	}
	if got := string(d.Buffered()); got != "23    cmd=fullinit;" {
		t.Errorf("Buffered = %q", got)
	}
}

func TestEncoder(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	if err := e.Encode(wire.New("get", "key", "a")); err != nil {
		t.Fatal(err)
	}
	if err := e.Encode(wire.New("barrier_in")); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "cmd=get key=a\ncmd=barrier_in\n" {
		t.Errorf("got %q", got)
	}
}
