package pmi2

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/wire"
)

// junkLen is how many bytes MPICH 4.0's client counts past its body: its
// simple2pmi.c PMIi_WriteSimpleCommand includes the 6-byte header in the
// declared length, so 6 stale bytes follow every command inside it.
const junkLen = HeaderLen

// Parse decodes one frame body (without the length prefix): key=value;
// pairs. The first pair must be cmd= with a non-empty value
// (wire.ErrNoCmd otherwise).
//
// ";;" inside a key or value is an escaped ';'. Slurm's libpmi2 and
// MPICH 4.0's simple2pmi.c both write that escape and read it back;
// MPICH >= 4.1 and the Slurm and Hydra servers neither write nor read it.
// Since a terminating ';' is never followed by another ';' in any of them,
// honouring the escape changes nothing for the others.
//
// Junk is tolerated, for MPICH 4.0's off-by-6 bug (see junkLen):
//   - when the body does not end in ';' but the byte 7 from its end is
//     one, the last 6 bytes are that bug's junk and are dropped unread
//     (this also keeps junk that starts with ';' from being read as an
//     escape);
//   - otherwise segments without '=' (NUL runs, "\x00;valu") are ignored,
//     and so is a final segment without a terminating ';'.
//
// Segments with an empty key ("=x;") are ignored as junk too. Keys and
// values are otherwise taken byte for byte; duplicates are kept in order.
// Junk that starts and ends with ';' cannot be told from data; no capture
// has shown it. The message does not alias body.
func Parse(body []byte) (*wire.Message, error) {
	b := body
	if n := len(b); n > junkLen && b[n-1] != ';' && b[n-1-junkLen] == ';' {
		b = b[:n-junkLen]
	}
	// One string holds every key and value that has no escape: the
	// message's fields are slices of it.
	str := string(b)
	var m *wire.Message
	var seg []byte // a segment with ";;" escapes, unescaped
	first := true
	for start := 0; start < len(str); {
		// The segment ends at the first ';' not doubled.
		end, escaped := start, false
		for {
			i := strings.IndexByte(str[end:], ';')
			if i < 0 {
				end = len(str)
				break
			}
			end += i
			if end+1 < len(str) && str[end+1] == ';' {
				escaped = true
				end += 2
				continue
			}
			break
		}
		if end == len(str) {
			break // no terminator: not a pair
		}
		field := str[start:end]
		start = end + 1
		if escaped {
			seg = seg[:0]
			for i := 0; i < len(field); i++ {
				seg = append(seg, field[i])
				if field[i] == ';' {
					i++ // the second of ";;"
				}
			}
			field = string(seg)
		}
		key, val, ok := strings.Cut(field, "=")
		if first {
			first = false
			if !ok || key != "cmd" {
				return nil, fmt.Errorf("%w: first pair %q", wire.ErrNoCmd, preview(body))
			}
			if val == "" {
				return nil, fmt.Errorf("%w: empty cmd=", wire.ErrNoCmd)
			}
			m = &wire.Message{Cmd: val}
			continue
		}
		if ok && key != "" {
			if m.Args == nil {
				// One allocation: at most one pair per '=' left.
				m.Args = make([]wire.Arg, 0, strings.Count(str[start:], "=")+1)
			}
			m.Args = append(m.Args, wire.Arg{Key: key, Value: val})
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%w: no ';'-terminated cmd= pair in %q", wire.ErrNoCmd, preview(body))
	}
	return m, nil
}

func preview(b []byte) string {
	if len(b) > 48 {
		b = b[:48]
	}
	return string(b)
}

// BodyLen returns the length of m's encoded body (without the prefix).
// A body longer than MaxBody cannot be framed; check before Append.
func BodyLen(m *wire.Message) int {
	n := len("cmd=") + escLen(m.Cmd) + 1
	for _, a := range m.Args {
		n += escLen(a.Key) + 1 + escLen(a.Value) + 1
	}
	return n
}

func escLen(s string) int {
	return len(s) + strings.Count(s, ";")
}

// Append encodes m and appends it to dst: a 6-byte length prefix, then
// cmd=<Cmd>; and key=value; per pair in Args order, with ';' in the
// command, keys and values escaped as ";;".
//
// The prefix is left-aligned and space-padded ("38    "), as Slurm's
// server and both client libraries write it. Every client reads the prefix
// with atoi, which accepts either alignment; left-aligned matches the
// server those clients are most often paired with, so captures compare
// byte for byte.
//
// The escape is what Slurm's libpmi2 and MPICH 4.0's client expect. A
// MPICH >= 4.1 client does not unescape and would see ";;" in a value
// with ';' — a value it could not have sent correctly either, since it
// does not escape its own.
//
// A body longer than MaxBody (see BodyLen) gets a prefix of more than 6
// digits that no reader accepts; the Encoder refuses such messages.
func Append(dst []byte, m *wire.Message) []byte {
	n := BodyLen(m)
	// One allocation at most: the size is known.
	dst = slices.Grow(dst, HeaderLen+n)
	start := len(dst)
	dst = strconv.AppendInt(dst, int64(n), 10)
	for len(dst)-start < HeaderLen {
		dst = append(dst, ' ')
	}
	dst = append(dst, "cmd="...)
	dst = appendEsc(dst, m.Cmd)
	dst = append(dst, ';')
	for _, a := range m.Args {
		dst = appendEsc(dst, a.Key)
		dst = append(dst, '=')
		dst = appendEsc(dst, a.Value)
		dst = append(dst, ';')
	}
	return dst
}

func appendEsc(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, ';')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, ';')
		s = s[i+1:]
	}
}

// Encode returns m encoded as by Append.
func Encode(m *wire.Message) []byte { return Append(nil, m) }

// Validate reports whether Append's encoding of m parses back to m: Cmd
// is not empty; keys are not empty, hold no '=' and do not start with ';'
// (";;" right after a terminator would read as an escape); the body fits
// in MaxBody. Values may hold any byte. Errors wrap wire.ErrMalformed.
func Validate(m *wire.Message) error {
	if m.Cmd == "" {
		return fmt.Errorf("%w: empty cmd", wire.ErrMalformed)
	}
	for _, a := range m.Args {
		if a.Key == "" || strings.IndexByte(a.Key, '=') >= 0 || a.Key[0] == ';' {
			return fmt.Errorf("%w: cmd=%s: key %q is empty, holds '=' or starts with ';'", wire.ErrMalformed, m.Cmd, a.Key)
		}
	}
	if n := BodyLen(m); n > MaxBody {
		return fmt.Errorf("%w: cmd=%s: body of %d bytes exceeds %d", wire.ErrMalformed, m.Cmd, n, MaxBody)
	}
	return nil
}
