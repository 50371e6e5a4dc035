package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestFrameReaderLines(t *testing.T) {
	fr := NewFrameReader(iotest.OneByteReader(strings.NewReader("a\nbb\n\nccc")), bufio.ScanLines)
	var got []string
	for {
		f, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(f))
	}
	if diff := cmp.Diff([]string{"a", "bb", "", "ccc"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A split error is returned for one frame and reading goes on.
func TestFrameReaderContinuesAfterSplitError(t *testing.T) {
	errBad := errors.New("bad frame")
	split := func(data []byte, atEOF bool) (int, []byte, error) {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if atEOF && len(data) > 0 {
				return len(data), data, nil
			}
			return 0, nil, nil
		}
		if string(data[:i]) == "bad" {
			return i + 1, nil, errBad
		}
		return i + 1, data[:i], nil
	}
	fr := NewFrameReader(strings.NewReader("x\nbad\ny\n"), split)
	var got []string
	for {
		f, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errBad) {
			got = append(got, "!")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(f))
	}
	if diff := cmp.Diff([]string{"x", "!", "y"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFrameReaderSwitchSplit(t *testing.T) {
	fr := NewFrameReader(strings.NewReader("hello\nABCDEF"), bufio.ScanLines)
	if f, err := fr.Next(); err != nil || string(f) != "hello" {
		t.Fatalf("Next = %q, %v", f, err)
	}
	if got := string(fr.Buffered()); got != "ABCDEF" {
		t.Errorf("Buffered = %q", got)
	}
	fr.SetSplit(func(data []byte, atEOF bool) (int, []byte, error) {
		if len(data) < 3 {
			return 0, nil, nil
		}
		return 3, data[:3], nil
	})
	for _, want := range []string{"ABC", "DEF"} {
		if f, err := fr.Next(); err != nil || string(f) != want {
			t.Fatalf("Next = %q, %v; want %q", f, err, want)
		}
	}
	if _, err := fr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("err = %v, want EOF", err)
	}
}

func TestFrameReaderErrors(t *testing.T) {
	// A split that never finishes a frame leaves bytes at EOF.
	fr := NewFrameReader(strings.NewReader("partial"), func([]byte, bool) (int, []byte, error) { return 0, nil, nil })
	if _, err := fr.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want ErrUnexpectedEOF", err)
	}
	// A split that advances past its data is caught.
	fr = NewFrameReader(strings.NewReader("x"), func(d []byte, _ bool) (int, []byte, error) { return len(d) + 1, nil, nil })
	if _, err := fr.Next(); !errors.Is(err, ErrMalformed) {
		t.Errorf("err = %v, want ErrMalformed", err)
	}
	// A read error keeps the buffered bytes.
	errRead := errors.New("read failed")
	r := io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(errRead))
	fr = NewFrameReader(r, bufio.ScanLines)
	if _, err := fr.Next(); !errors.Is(err, errRead) {
		t.Errorf("err = %v, want the read error", err)
	}
	if got := string(fr.Buffered()); got != "ab" {
		t.Errorf("Buffered = %q", got)
	}
}

func TestFrameReaderLargeFrame(t *testing.T) {
	big := strings.Repeat("z", 300000)
	fr := NewFrameReader(strings.NewReader(big+"\nok\n"), bufio.ScanLines)
	if f, err := fr.Next(); err != nil || len(f) != len(big) {
		t.Fatalf("Next = %d bytes, %v", len(f), err)
	}
	if f, err := fr.Next(); err != nil || string(f) != "ok" {
		t.Fatalf("Next = %q, %v", f, err)
	}
}
