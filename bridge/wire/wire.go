// Package wire holds the message form both PMI codecs decode into and
// encode from, so the bridge handles a PMI-1 put and a PMI-2 kvs-put with
// the same code. It has no framing of its own: see bridge/pmi1 and
// bridge/pmi2.
package wire

import (
	"errors"
	"strconv"
	"strings"
)

// Arg is one key=value pair of a message, in wire order.
type Arg struct {
	Key   string
	Value string
}

// Message is one PMI request or reply.
type Message struct {
	// Cmd is the value of the leading cmd= (or mcmd= for a PMI-1 spawn
	// block).
	Cmd string
	// Block marks a PMI-1 multi-line "mcmd=" block; Args then hold its
	// lines in order, without mcmd= and endcmd.
	Block bool
	// Args are the remaining pairs in wire order; duplicates are kept so
	// the bridge can refuse them.
	Args []Arg
}

// New returns a message with cmd and the given key, value pairs.
func New(cmd string, kv ...string) *Message {
	m := &Message{Cmd: cmd}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Args = append(m.Args, Arg{kv[i], kv[i+1]})
	}
	return m
}

// Get returns the value of the first key, and whether it is present.
func (m *Message) Get(key string) (string, bool) {
	for _, a := range m.Args {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Has reports whether key is present.
func (m *Message) Has(key string) bool {
	_, ok := m.Get(key)
	return ok
}

// Value returns the value of key, or "" when absent.
func (m *Message) Value(key string) string {
	v, _ := m.Get(key)
	return v
}

// Add appends a pair and returns m.
func (m *Message) Add(key, value string) *Message {
	m.Args = append(m.Args, Arg{key, value})
	return m
}

// AddInt appends an integer pair and returns m.
func (m *Message) AddInt(key string, v int) *Message {
	return m.Add(key, strconv.Itoa(v))
}

// AddBool appends a boolean pair written TRUE or FALSE and returns m.
func (m *Message) AddBool(key string, v bool) *Message {
	return m.Add(key, FormatBool(v))
}

// Duplicate returns the first key that occurs more than once, if any.
func (m *Message) Duplicate() (string, bool) {
	seen := make(map[string]struct{}, len(m.Args))
	for _, a := range m.Args {
		if _, ok := seen[a.Key]; ok {
			return a.Key, true
		}
		seen[a.Key] = struct{}{}
	}
	return "", false
}

// Int parses key as a decimal integer. A missing key is (def, nil).
func (m *Message) Int(key string, def int) (int, error) {
	v, ok := m.Get(key)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return def, &FieldError{Key: key, Value: v, Reason: "not an integer"}
	}
	return n, nil
}

// Bool parses key as a boolean in any case (TRUE, true, True; also yes/no
// and 1/0). A missing key is (def, nil).
func (m *Message) Bool(key string, def bool) (bool, error) {
	v, ok := m.Get(key)
	if !ok {
		return def, nil
	}
	b, ok := ParseBool(v)
	if !ok {
		return def, &FieldError{Key: key, Value: v, Reason: "not a boolean"}
	}
	return b, nil
}

// ParseBool reads a wire boolean in any case.
func ParseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "1":
		return true, true
	case "false", "no", "0":
		return false, true
	}
	return false, false
}

// FormatBool writes a wire boolean: TRUE or FALSE, the only forms real
// clients accept.
func FormatBool(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// FieldError reports a field whose value cannot be used.
type FieldError struct {
	Key    string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 32 {
		v = v[:32] + "..."
	}
	return "field " + e.Key + "=" + strconv.Quote(v) + ": " + e.Reason
}

// Framing and parsing errors shared by the codecs. Each codec wraps them
// with detail; errors.Is finds these.
var (
	// ErrTooLong: a frame exceeds the configured maximum; it was skipped.
	ErrTooLong = errors.New("message too long")
	// ErrMalformed: a frame could not be parsed.
	ErrMalformed = errors.New("malformed message")
	// ErrNoCmd: a frame does not start with cmd= (or mcmd=).
	ErrNoCmd = errors.New("message does not start with cmd=")
	// ErrBadLength: a PMI-2 length prefix is not a number.
	ErrBadLength = errors.New("bad PMI-2 length prefix")
)
