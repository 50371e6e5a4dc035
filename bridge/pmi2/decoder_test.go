package pmi2

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
	in := "    63cmd=fullinit-response;rc=0;rank=0;size=2;appnum=0;pmiverbose=0;" +
		"20    cmd=kvs-fence;\x00;valu" +
		"200   " + strings.Repeat("z", 200) +
		"14    cmd=kvs-fence;" +
		"5     junk;" +
		"13    cmd=finalize;"
	d := NewDecoder(iotest.HalfReader(strings.NewReader(in)), 100)
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
	want := []string{"fullinit-response", "kvs-fence", "toolong", "kvs-fence", "nocmd", "finalize"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDecoderBuffered(t *testing.T) {
	d := NewDecoderBuffered([]byte("14    cmd=kv"), strings.NewReader("s-fence;13    cmd=finalize;"), 0)
	for _, want := range []string{"kvs-fence", "finalize"} {
		m, err := d.Decode()
		if err != nil || m.Cmd != want {
			t.Fatalf("Decode = %v, %v; want %s", m, err, want)
		}
	}
	if _, err := d.Decode(); !errors.Is(err, io.EOF) {
		t.Errorf("err = %v, want io.EOF", err)
	}
}

func TestDecoderBadLength(t *testing.T) {
	d := NewDecoder(strings.NewReader("cmd=init pmi_version=2 pmi_subversion=0\n"), 0)
	for i := 0; i < 2; i++ {
		if _, err := d.Decode(); !errors.Is(err, wire.ErrBadLength) {
			t.Fatalf("Decode %d: err = %v, want ErrBadLength", i, err)
		}
	}
}

func TestEncoder(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	if err := e.Encode(wire.New("kvs-put", "key", "k", "value", "a;b")); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "29    cmd=kvs-put;key=k;value=a;;b;" {
		t.Errorf("got %q", got)
	}
	err := e.Encode(wire.New("kvs-put", "value", strings.Repeat("v", MaxBody)))
	if !errors.Is(err, wire.ErrTooLong) {
		t.Errorf("oversized Encode err = %v, want ErrTooLong", err)
	}
}
