package pmi1

import (
	"fmt"
	"strings"

	"github.com/gopmi/gopmi/bridge/wire"
)

// freeText lists the keys whose values are prose and may contain spaces:
// MPICH's abort message=, Flux's error_msg=, and the msg=/errmsg= of
// replies. See FreeText.
var freeText = map[string]bool{
	"message":   true,
	"msg":       true,
	"error_msg": true,
	"errmsg":    true,
}

// FreeText reports whether key's value is read as free text: value= takes
// the rest of the line; message=, msg=, error_msg= and errmsg= take the
// text up to a following " value=" or the end of the line. A sender must
// put such keys last (free text, then value=); Append does not reorder.
func FreeText(key string) bool { return key == "value" || freeText[key] }

// Parse decodes one frame as returned by Splitter.Split: a single line
// cmd=<name> k=v ... or an mcmd=<name> block.
//
// Single lines are split on runs of spaces and tabs. The first pair must
// be cmd= with a non-empty value (wire.ErrNoCmd otherwise). Leniency, each
// for a real sender:
//   - value= takes the rest of the line, spaces included, so values with
//     spaces survive (flux and MPICH put value= last);
//   - message=, msg=, error_msg= and errmsg= take the text up to a
//     following whitespace-separated "value=" token or the end of the
//     line: MPICH's abort message and Flux's error_msg contain spaces,
//     and Hydra writes "msg=success value=..." in get replies;
//   - empty values (key=) are accepted; MPICH itself never sends them;
//   - trailing carriage returns and newlines are ignored, and so are
//     carriage returns at the end of the last token before trailing
//     blanks;
//   - duplicate keys are kept in order (the bridge refuses them), and a
//     second cmd= is an ordinary pair.
//
// A token without '=' or with an empty key is wire.ErrMalformed: no
// PMI-1 client sends bare words on a command line, and guessing would hide
// corruption. A newline inside a single-line frame is wire.ErrMalformed.
// Hydra 4.1.1/4.2.0's " found=TRUE" after value= stays part of the value;
// gopmi never sends it and only parses its own replies as a client.
//
// A block's lines are key=value with the value running to the end of the
// line; blank lines are skipped and the endcmd line ends the block. The
// result has Block set, Cmd from mcmd= and Args in line order.
//
// The message does not alias frame, so the caller may reuse its buffer.
func Parse(frame []byte) (*wire.Message, error) {
	s := strings.TrimRight(string(frame), "\r\n")
	if strings.HasPrefix(strings.TrimLeft(s, " \t"), "mcmd=") {
		return parseBlock(s)
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return nil, fmt.Errorf("%w: newline inside a command line at byte %d", wire.ErrMalformed, i)
	}
	return parseLine(s)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func skipSpaces(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func tokenEnd(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return i
}

func parseLine(s string) (*wire.Message, error) {
	i := skipSpaces(s, 0)
	end := tokenEnd(s, i)
	first := s[i:end]
	if !strings.HasPrefix(first, "cmd=") {
		return nil, fmt.Errorf("%w: got %q", wire.ErrNoCmd, preview([]byte(first)))
	}
	m := &wire.Message{Cmd: first[len("cmd="):]}
	if skipSpaces(s, end) >= len(s) {
		m.Cmd = strings.TrimRight(m.Cmd, "\r")
	}
	if m.Cmd == "" {
		return nil, fmt.Errorf("%w: empty cmd=", wire.ErrNoCmd)
	}
	i = end
	for {
		i = skipSpaces(s, i)
		if i >= len(s) {
			return m, nil
		}
		end = tokenEnd(s, i)
		tok := s[i:end]
		eq := strings.IndexByte(tok, '=')
		switch {
		case eq < 0:
			return nil, fmt.Errorf("%w: cmd=%s: token %q has no '='", wire.ErrMalformed, m.Cmd, preview([]byte(tok)))
		case eq == 0:
			return nil, fmt.Errorf("%w: cmd=%s: token %q has an empty key", wire.ErrMalformed, m.Cmd, preview([]byte(tok)))
		}
		key := tok[:eq]
		valFrom := i + eq + 1
		switch {
		case key == "value":
			m.Args = append(m.Args, wire.Arg{Key: key, Value: s[valFrom:]})
			return m, nil
		case freeText[key]:
			rest := s[valFrom:]
			j := valueToken(rest)
			if j < 0 {
				m.Args = append(m.Args, wire.Arg{Key: key, Value: rest})
				return m, nil
			}
			m.Args = append(m.Args, wire.Arg{Key: key, Value: strings.TrimRight(rest[:j], " \t")})
			i = valFrom + j
		default:
			val := tok[eq+1:]
			if skipSpaces(s, end) >= len(s) {
				val = strings.TrimRight(val, "\r")
			}
			m.Args = append(m.Args, wire.Arg{Key: key, Value: val})
			i = end
		}
	}
}

// valueToken returns the index in s of the first "value=" that starts a
// whitespace-separated token (not at index 0), or -1.
func valueToken(s string) int {
	from := 0
	for {
		j := strings.Index(s[from:], "value=")
		if j < 0 {
			return -1
		}
		j += from
		if j > 0 && isSpace(s[j-1]) {
			return j
		}
		from = j + 1
	}
}

func parseBlock(s string) (*wire.Message, error) {
	lines := strings.Split(s, "\n")
	head := strings.TrimRight(strings.TrimLeft(lines[0], " \t"), "\r \t")
	m := &wire.Message{Cmd: head[len("mcmd="):], Block: true}
	if m.Cmd == "" {
		return nil, fmt.Errorf("%w: empty mcmd=", wire.ErrNoCmd)
	}
	if strings.ContainsAny(m.Cmd, " \t") {
		return nil, fmt.Errorf("%w: mcmd=%q: name contains a space", wire.ErrMalformed, m.Cmd)
	}
	ended := false
	for n, raw := range lines[1:] {
		line := strings.TrimRight(raw, "\r")
		t := strings.TrimLeft(line, " \t")
		if strings.TrimRight(t, " \t") == "" {
			continue
		}
		if ended {
			return nil, fmt.Errorf("%w: mcmd=%s: line %d after endcmd", wire.ErrMalformed, m.Cmd, n+2)
		}
		if isEndcmd([]byte(line)) {
			ended = true
			continue
		}
		eq := strings.IndexByte(t, '=')
		switch {
		case eq < 0:
			return nil, fmt.Errorf("%w: mcmd=%s: line %d %q has no '='", wire.ErrMalformed, m.Cmd, n+2, preview([]byte(t)))
		case eq == 0 || strings.ContainsAny(t[:eq], " \t"):
			return nil, fmt.Errorf("%w: mcmd=%s: line %d %q has a bad key", wire.ErrMalformed, m.Cmd, n+2, preview([]byte(t)))
		}
		m.Args = append(m.Args, wire.Arg{Key: t[:eq], Value: t[eq+1:]})
	}
	return m, nil
}

// Append encodes m and appends it to dst: "cmd=<Cmd> k=v ...\n" with the
// pairs in Args order, or for a Block "mcmd=<Cmd>\n" plus one "k=v\n" per
// pair and "endcmd\n". Put free-text keys and value= last (see FreeText):
// other values must not contain spaces, tabs or newlines, which PMI-1
// cannot carry; Append writes them as given.
func Append(dst []byte, m *wire.Message) []byte {
	if m.Block {
		dst = append(dst, "mcmd="...)
		dst = append(dst, m.Cmd...)
		dst = append(dst, '\n')
		for _, a := range m.Args {
			dst = append(dst, a.Key...)
			dst = append(dst, '=')
			dst = append(dst, a.Value...)
			dst = append(dst, '\n')
		}
		return append(dst, "endcmd\n"...)
	}
	dst = append(dst, "cmd="...)
	dst = append(dst, m.Cmd...)
	for _, a := range m.Args {
		dst = append(dst, ' ')
		dst = append(dst, a.Key...)
		dst = append(dst, '=')
		dst = append(dst, a.Value...)
	}
	return append(dst, '\n')
}

// Encode returns m encoded as by Append.
func Encode(m *wire.Message) []byte { return Append(nil, m) }

// AppendInitack appends the server's answer to a PMI_PORT handshake
// (cmd=initack pmiid=N): the initack reply followed by the three set lines
// MPICH's client reads next, in the order it reads them.
func AppendInitack(dst []byte, rank, size, debug int) []byte {
	dst = Append(dst, wire.New("initack").AddInt("rc", 0))
	dst = Append(dst, wire.New("set").AddInt("size", size))
	dst = Append(dst, wire.New("set").AddInt("rank", rank))
	return Append(dst, wire.New("set").AddInt("debug", debug))
}

// Validate reports whether Append's encoding of m parses back to m, which
// is what a sender needs before writing a reply built from client data:
// PMI-1 has no escapes, so a space in an ordinary value or a newline
// anywhere would change the message. Rules for a single line: Cmd and keys
// are non-empty and free of spaces, tabs and newlines (keys also of '=');
// ordinary values are free of spaces, tabs and newlines; a free-text value
// (msg, message, ...) may hold spaces but must come last or just before
// value=, and then not end in a space or contain " value="; value= must
// come last; the line must not end in a carriage return. For a block, keys
// as above and values without newlines or a trailing carriage return.
// Errors wrap wire.ErrMalformed.
func Validate(m *wire.Message) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: cmd=%s: "+format, append([]any{wire.ErrMalformed, m.Cmd}, a...)...)
	}
	if m.Cmd == "" || strings.ContainsAny(m.Cmd, " \t\n") {
		return bad("command name empty or with spaces")
	}
	for i, a := range m.Args {
		if a.Key == "" || strings.ContainsAny(a.Key, " \t\n=") {
			return bad("key %q empty or with spaces, newlines or '='", a.Key)
		}
		if strings.ContainsRune(a.Value, '\n') {
			return bad("%s= value contains a newline", a.Key)
		}
		if m.Block {
			continue
		}
		last := i == len(m.Args)-1
		switch {
		case a.Key == "value":
			if !last {
				return bad("value= must come last")
			}
		case freeText[a.Key]:
			if !last {
				if m.Args[i+1].Key != "value" || i+1 != len(m.Args)-1 {
					return bad("free-text %s= must come last or just before value=", a.Key)
				}
				if strings.HasSuffix(a.Value, " ") || strings.HasSuffix(a.Value, "\t") || valueToken(a.Value) >= 0 {
					return bad("free-text %s= before value= ends in a space or holds \" value=\"", a.Key)
				}
			} else if valueToken(a.Value) >= 0 {
				return bad("free-text %s= holds \" value=\"", a.Key)
			}
		default:
			if strings.ContainsAny(a.Value, " \t") {
				return bad("%s= value contains a space; PMI-1 cannot carry it", a.Key)
			}
		}
	}
	tail := m.Cmd
	if n := len(m.Args); n > 0 {
		tail = m.Args[n-1].Value
	}
	if m.Block {
		if strings.HasSuffix(m.Cmd, "\r") {
			return bad("command name ends in a carriage return")
		}
		for _, a := range m.Args {
			if strings.HasSuffix(a.Value, "\r") {
				return bad("%s= value ends in a carriage return", a.Key)
			}
		}
		return nil
	}
	if strings.HasSuffix(tail, "\r") {
		return bad("line ends in a carriage return")
	}
	return nil
}
