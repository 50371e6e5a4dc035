package pmi1

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gopmi/gopmi/bridge/wire"
)

func msg(cmd string, kv ...string) *wire.Message { return wire.New(cmd, kv...) }

func block(cmd string, kv ...string) *wire.Message {
	m := wire.New(cmd, kv...)
	m.Block = true
	return m
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *wire.Message
	}{
		{"no args", "cmd=get_maxes", msg("get_maxes")},
		{"init", "cmd=init pmi_version=1 pmi_subversion=1", msg("init", "pmi_version", "1", "pmi_subversion", "1")},
		{"runs of spaces and tabs", "  cmd=put \t kvsname=k   key=a\tvalue=b", msg("put", "kvsname", "k", "key", "a", "value", "b")},
		{"trailing cr and newline", "cmd=finalize\r\n", msg("finalize")},
		{"value takes the rest", "cmd=put key=a value=x y  z ", msg("put", "key", "a", "value", "x y  z ")},
		{"value with equals", "cmd=put key=a value=a=b=c", msg("put", "key", "a", "value", "a=b=c")},
		{"empty value", "cmd=put key= value=", msg("put", "key", "", "value", "")},
		{"abort message with spaces", "cmd=abort exitcode=7 message=rank 1 gave up: out of memory",
			msg("abort", "exitcode", "7", "message", "rank 1 gave up: out of memory")},
		{"flux error_msg", "cmd=abort exitcode=1 error_msg=it broke badly", msg("abort", "exitcode", "1", "error_msg", "it broke badly")},
		{"hydra msg before value", "cmd=get_result rc=0 msg=success value=(vector,(0,1,1))",
			msg("get_result", "rc", "0", "msg", "success", "value", "(vector,(0,1,1))")},
		{"msg with spaces before value", "cmd=get_result rc=1 msg=key not found  value=unknown",
			msg("get_result", "rc", "1", "msg", "key not found", "value", "unknown")},
		{"msg containing value= inside a word", "cmd=x msg=bad xvalue=3 here", msg("x", "msg", "bad xvalue=3 here")},
		{"msg starting with value=", "cmd=x msg=value=3", msg("x", "msg", "value=3")},
		{"msg last", "cmd=lookup_result rc=1 msg=service_not_found", msg("lookup_result", "rc", "1", "msg", "service_not_found")},
		{"hydra 4.1 found after value stays in value", "cmd=get_result rc=0 value=abc found=TRUE",
			msg("get_result", "rc", "0", "value", "abc found=TRUE")},
		{"duplicates kept", "cmd=put key=a key=b", msg("put", "key", "a", "key", "b")},
		{"second cmd is a pair", "cmd=put cmd=get", msg("put", "cmd", "get")},
		{"nul byte in value", "cmd=put key=a\x00b", msg("put", "key", "a\x00b")},
		{"group barrier", "cmd=barrier_in group=0,1,3:12345", msg("barrier_in", "group", "0,1,3:12345")},
		{"initack", "cmd=initack pmiid=3", msg("initack", "pmiid", "3")},
		{"block", "mcmd=spawn\nnprocs=2\nexecname=./a b\narg1= x \nendcmd",
			block("spawn", "nprocs", "2", "execname", "./a b", "arg1", " x ")},
		{"block blank lines crlf and spaces", "mcmd=spawn\r\n\r\n  nprocs=1\r\n\tendcmd \r\n",
			block("spawn", "nprocs", "1")},
		{"block without endcmd", "mcmd=spawn\nnprocs=1", block("spawn", "nprocs", "1")},
		{"block value with equals and spaces", "mcmd=spawn\ninfo_val_0=a=b c\nendcmd", block("spawn", "info_val_0", "a=b c")},
		{"block key endcmd with value", "mcmd=spawn\nendcmd=3\nendcmd", block("spawn", "endcmd", "3")},
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
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", wire.ErrNoCmd},
		{"blank", "   ", wire.ErrNoCmd},
		{"no cmd", "put key=a", wire.ErrNoCmd},
		{"cmd not first", "key=a cmd=put", wire.ErrNoCmd},
		{"empty cmd", "cmd= key=a", wire.ErrNoCmd},
		{"cmd prefix only", "cmdx=put", wire.ErrNoCmd},
		{"bare word", "cmd=put key=a oops", wire.ErrMalformed},
		{"empty key", "cmd=put =a", wire.ErrMalformed},
		{"newline inside", "cmd=put key=a\ncmd=get", wire.ErrMalformed},
		{"empty mcmd", "mcmd=\nendcmd", wire.ErrNoCmd},
		{"mcmd name with space", "mcmd=spawn now\nendcmd", wire.ErrMalformed},
		{"block line without =", "mcmd=spawn\nnprocs\nendcmd", wire.ErrMalformed},
		{"block empty key", "mcmd=spawn\n=2\nendcmd", wire.ErrMalformed},
		{"block key with space", "mcmd=spawn\nn procs=2\nendcmd", wire.ErrMalformed},
		{"block line after endcmd", "mcmd=spawn\nendcmd\nnprocs=2", wire.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%q) = %+v, %v; want error %v", tt.in, m, err, tt.want)
			}
		})
	}
}

func TestAppend(t *testing.T) {
	tests := []struct {
		name string
		m    *wire.Message
		want string
	}{
		{"no args", msg("finalize_ack"), "cmd=finalize_ack\n"},
		{"args in order", msg("get_result", "rc", "0", "msg", "success", "value", "v w"), "cmd=get_result rc=0 msg=success value=v w\n"},
		{"block", block("spawn", "nprocs", "1", "arg1", "a b"), "mcmd=spawn\nnprocs=1\narg1=a b\nendcmd\n"},
		{"empty block", block("spawn"), "mcmd=spawn\nendcmd\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Append([]byte("x"), tt.m)); got != "x"+tt.want {
				t.Errorf("Append = %q, want %q", got, "x"+tt.want)
			}
			if got := string(Encode(tt.m)); got != tt.want {
				t.Errorf("Encode = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAppendInitack(t *testing.T) {
	got := string(AppendInitack(nil, 3, 8, 0))
	want := "cmd=initack rc=0\ncmd=set size=8\ncmd=set rank=3\ncmd=set debug=0\n"
	if got != want {
		t.Errorf("AppendInitack = %q, want %q", got, want)
	}
}

// roundTrip encodes m, splits it back with a fresh Splitter and parses it.
func roundTrip(t testing.TB, m *wire.Message) *wire.Message {
	t.Helper()
	enc := Encode(m)
	s := &Splitter{Max: len(enc) + 1}
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
	big := strings.Repeat("0123456789ABCDEF", 70*1024/16)
	tests := []*wire.Message{
		msg("put", "kvsname", "kvs_1_0", "key", "-allgather-0-1", "value", big),
		msg("get_result", "rc", "0", "msg", "success", "value", "with spaces and = signs"),
		msg("abort", "exitcode", "7", "message", "free text at the end  "),
		msg("barrier_in", "group", "WORLD:99"),
		block("spawn", "nprocs", "2", "execname", "/bin/my prog", "arg1", "--x=1 y", "info_val_0", big[:2000]),
	}
	for _, m := range tests {
		t.Run(m.Cmd, func(t *testing.T) {
			if diff := cmp.Diff(m, roundTrip(t, m)); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFreeText(t *testing.T) {
	for _, k := range []string{"value", "message", "msg", "error_msg", "errmsg"} {
		if !FreeText(k) {
			t.Errorf("FreeText(%q) = false", k)
		}
	}
	for _, k := range []string{"key", "Value", "kvsname"} {
		if FreeText(k) {
			t.Errorf("FreeText(%q) = true", k)
		}
	}
}
