package pmi2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

func msg(cmd string, kv ...string) *wire.Message { return wire.New(cmd, kv...) }

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *wire.Message
	}{
		{"no args", "cmd=kvs-fence;", msg("kvs-fence")},
		{"args", "cmd=fullinit;pmijobid=4242.0;pmirank=0;threaded=FALSE;",
			msg("fullinit", "pmijobid", "4242.0", "pmirank", "0", "threaded", "FALSE")},
		{"spaces are data", "cmd=abort;isworld=TRUE;msg=it broke badly ;", msg("abort", "isworld", "TRUE", "msg", "it broke badly ")},
		{"escaped semicolon", "cmd=kvs-put;key=k;value=a;;b;;;", msg("kvs-put", "key", "k", "value", "a;b;")},
		{"value of one semicolon", "cmd=kvs-put;key=k;value=;;;", msg("kvs-put", "key", "k", "value", ";")},
		{"escape at value start", "cmd=kvs-put;value=;;x;", msg("kvs-put", "value", ";x")},
		{"empty value", "cmd=kvs-put;key=;value=;", msg("kvs-put", "key", "", "value", "")},
		{"equals in value", "cmd=kvs-put;key=k;value=a=b;", msg("kvs-put", "key", "k", "value", "a=b")},
		{"duplicates kept", "cmd=spawn;subcmd=a;subcmd=b;", msg("spawn", "subcmd", "a", "subcmd", "b")},
		{"thrid", "cmd=kvs-get;thrid=0x7ffd1234;key=k;", msg("kvs-get", "thrid", "0x7ffd1234", "key", "k")},
		// MPICH 4.0's off-by-6 junk, as captured.
		{"six NULs", "cmd=fullinit;pmirank=0;threaded=FALSE;\x00\x00\x00\x00\x00\x00",
			msg("fullinit", "pmirank", "0", "threaded", "FALSE")},
		{"NUL then ;valu", "cmd=kvs-fence;\x00;valu", msg("kvs-fence")},
		{"junk without NUL", "cmd=name-unpublish;name=gopmi-svc;infokeycount=0;327$if",
			msg("name-unpublish", "name", "gopmi-svc", "infokeycount", "0")},
		{"heap bytes", "cmd=kvs-get;jobid=j;srcid=-1;key=P0-businesscard;\x00-p\xf6\xe8\xc7",
			msg("kvs-get", "jobid", "j", "srcid", "-1", "key", "P0-businesscard")},
		{"NUL then spaces then cmd", "cmd=finalize;\x00  cmd", msg("finalize")},
		{"junk starting with semicolon", "cmd=kvs-fence;;valu\x00", msg("kvs-fence")},
		{"junk that looks like a pair", "cmd=kvs-fence;a=b;cd", msg("kvs-fence")},
		{"junk ending with semicolon", "cmd=kvs-fence;\x00\x00\x00\x00\x00;", msg("kvs-fence")},
		{"segment without equals", "cmd=kvs-fence;junk;key=v;", msg("kvs-fence", "key", "v")},
		{"empty segments", "cmd=x;;;", msg("x;")},
		{"unterminated last pair", "cmd=kvs-get;key=k;value=v", msg("kvs-get", "key", "k")},
		{"empty key ignored", "cmd=x;=v;k=w;", msg("x", "k", "w")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"", ";", "cmd=kvs-fence", "key=v;cmd=x;", "cmd=;", "xcmd=a;", "\x00\x00\x00\x00\x00\x00", " cmd=x;", "cmd;x=y;",
	} {
		if m, err := Parse([]byte(in)); !errors.Is(err, wire.ErrNoCmd) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrNoCmd", in, m, err)
		}
	}
}

func TestAppend(t *testing.T) {
	tests := []struct {
		m    *wire.Message
		want string
	}{
		{msg("kvs-fence"), "14    cmd=kvs-fence;"},
		{msg("kvs-fence-response", "rc", "0"), "28    cmd=kvs-fence-response;rc=0;"},
		{msg("kvs-put", "key", "a;b", "value", "x;"), "31    cmd=kvs-put;key=a;;b;value=x;;;"},
		{msg("abort", "msg", "with spaces"), "26    cmd=abort;msg=with spaces;"},
	}
	for _, tt := range tests {
		got := string(Append([]byte(">"), tt.m))
		if got != ">"+tt.want {
			t.Errorf("Append(%+v) = %q, want %q", tt.m, got, ">"+tt.want)
		}
		if n := BodyLen(tt.m); n != len(tt.want)-HeaderLen {
			t.Errorf("BodyLen(%+v) = %d, want %d", tt.m, n, len(tt.want)-HeaderLen)
		}
	}
	// Prefixes of every width stay six bytes and left-aligned.
	for _, n := range []int{1, 9, 10, 99, 100, 99999, 100000, 999990} {
		m := msg("x", "v", strings.Repeat("y", n))
		b := Encode(m)
		if len(b)-HeaderLen != BodyLen(m) || !bytes.HasPrefix(b, []byte(fmt.Sprintf("%-6d", BodyLen(m)))) {
			t.Errorf("n=%d: prefix %q for body %d", n, b[:HeaderLen], BodyLen(m))
		}
	}
}

func roundTrip(t testing.TB, m *wire.Message) *wire.Message {
	t.Helper()
	enc := Encode(m)
	s := &Splitter{}
	adv, tok, err := s.Split(enc, true)
	if err != nil || tok == nil || adv != len(enc) {
		t.Fatalf("Split(Encode(%+v)) = %d, %q, %v", m, adv, tok, err)
	}
	got, err := Parse(tok)
	if err != nil {
		t.Fatalf("Parse(%q): %v", tok, err)
	}
	return got
}

func TestRoundTrip(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 70*1024/16)
	for _, m := range []*wire.Message{
		msg("kvs-put", "key", "P0-businesscard", "value", big),
		msg("kvs-put", "key", "k", "value", ";;;x;y;;"),
		msg("x;y", "a;", ";b", "c", ";"),
		msg("kvs-get-response", "rc", "0", "found", "TRUE", "value", "a=b c\x00\n\r"),
		msg("fullinit"),
	} {
		if diff := cmp.Diff(m, roundTrip(t, m)); diff != "" {
			t.Errorf("round trip of %.40q (-want +got):\n%s", m.Cmd, diff)
		}
	}
}

func TestValidate(t *testing.T) {
	good := []*wire.Message{msg("x", "k", ";v;"), msg("a;b", "k;", "=")}
	for _, m := range good {
		if err := Validate(m); err != nil {
			t.Errorf("Validate(%+v) = %v", m, err)
		}
	}
	bad := []*wire.Message{msg(""), msg("x", "", "v"), msg("x", "a=b", "v"), msg("x", ";k", "v"), msg("x", "v", strings.Repeat("z", MaxBody))}
	for _, m := range bad {
		if err := Validate(m); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("Validate(%.60v) = %v, want ErrMalformed", m, err)
		}
	}
}
