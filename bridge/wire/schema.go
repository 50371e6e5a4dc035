package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is the type of an attribute value on the wire.
type Kind int

const (
	// KindString is any text.
	KindString Kind = iota
	// KindInt is a decimal integer.
	KindInt
	// KindBool is TRUE or FALSE (read in any case, see ParseBool).
	KindBool
)

// String names the kind as the MPICH tables do (string, int, bool).
func (k Kind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindBool:
		return "bool"
	}
	return "string"
}

// AttrSpec describes one attribute of a request or a reply, in the spirit
// of MPICH's src/pmi/maint/pmi-*.txt tables.
type AttrSpec struct {
	// Key is the attribute key. A '#' stands for a decimal index in an
	// indexed family such as arg# (arg1, arg2, ...); see MatchKey.
	Key  string
	Kind Kind
	// Required attributes must be present. A missing optional attribute
	// means Default; an empty Default means "unset" (MPICH's optional=NULL).
	Required bool
	Default  string
	// Count names the attribute holding the size of an indexed family and
	// Base its first index (arg# counts from 1, preput_key_# from 0).
	Count string
	Base  int
	// Since is the protocol version that added the attribute to an older
	// command ("1.2" for barrier_in group=); empty when as old as the
	// command.
	Since string
	Doc   string
}

// CommandSpec describes one request and its reply.
type CommandSpec struct {
	// Name is the request's cmd= (or mcmd= when Block).
	Name string
	// Reply is the reply's cmd=; empty when no reply is sent (abort).
	Reply string
	// Block marks a PMI-1 mcmd= ... endcmd request.
	Block bool
	// Since is the protocol version that introduced the command: "1.1",
	// "1.2", "2.0", or "legacy" for commands only MPICH's old simple PMI
	// client sent (getbyidx, create_kvs, destroy_kvs), which no other
	// current server answers.
	Since string
	// Request lists the request's attributes. When Section is set, these
	// are the ones before the first section.
	Request []AttrSpec
	// Section is the key that opens each repeated section of the request
	// (subcmd for a PMI-2 spawn); SectionAttrs are each section's
	// attributes, Section's own included.
	Section      string
	SectionAttrs []AttrSpec
	// Response lists the reply's attributes besides rc= and msg=/errmsg=,
	// which every reply may carry.
	Response []AttrSpec
	Doc      string
}

// RequestAttr returns the spec of a request key (Request first, then
// SectionAttrs), matching indexed families.
func (c *CommandSpec) RequestAttr(key string) (AttrSpec, bool) {
	if a, ok := findAttr(c.Request, key); ok {
		return a, true
	}
	return findAttr(c.SectionAttrs, key)
}

// ResponseAttr returns the spec of a reply key, matching indexed families.
func (c *CommandSpec) ResponseAttr(key string) (AttrSpec, bool) {
	return findAttr(c.Response, key)
}

// MissingRequired lists the required non-indexed Request attributes that m
// lacks, in spec order. Section attributes are not checked: the spawn
// helpers of each codec do that per section.
func (c *CommandSpec) MissingRequired(m *Message) []string {
	var miss []string
	for _, a := range c.Request {
		if !a.Required || strings.Contains(a.Key, "#") {
			continue
		}
		if _, ok := m.Get(a.Key); !ok {
			miss = append(miss, a.Key)
		}
	}
	return miss
}

// Arg reads request attribute key of m as c describes it: m's value, or
// the attribute's Default when m lacks it. A key c does not list is an
// error: a server reads only what its table says a client may send, so
// the table is the one place that says what a request carries and what
// an absent attribute means.
func (c *CommandSpec) Arg(m *Message, key string) (string, error) {
	a, ok := c.RequestAttr(key)
	if !ok {
		return "", fmt.Errorf("%s: attribute %s is not in gopmi's command table", c.Name, key)
	}
	if v, ok := m.Get(key); ok {
		return v, nil
	}
	return a.Default, nil
}

// Int reads an integer attribute as Arg does; an absent attribute without
// a Default, like a value that is not an integer, is a *FieldError.
func (c *CommandSpec) Int(m *Message, key string) (int, error) {
	v, err := c.Arg(m, key)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, &FieldError{Key: key, Value: v, Reason: "not an integer"}
	}
	return n, nil
}

// Bool reads a boolean attribute as Arg does (ParseBool's spellings).
func (c *CommandSpec) Bool(m *Message, key string) (bool, error) {
	v, err := c.Arg(m, key)
	if err != nil {
		return false, err
	}
	b, ok := ParseBool(v)
	if !ok {
		return false, &FieldError{Key: key, Value: v, Reason: "not a boolean"}
	}
	return b, nil
}

func findAttr(list []AttrSpec, key string) (AttrSpec, bool) {
	for _, a := range list {
		if _, ok := MatchKey(a.Key, key); ok {
			return a, true
		}
	}
	return AttrSpec{}, false
}

// MatchKey reports whether key matches pattern, where one '#' in pattern
// matches a non-empty run of decimal digits. For a family it also returns
// the index; for a plain key the index is -1.
func MatchKey(pattern, key string) (index int, ok bool) {
	i := strings.IndexByte(pattern, '#')
	if i < 0 {
		return -1, pattern == key
	}
	pre, suf := pattern[:i], pattern[i+1:]
	if len(key) <= len(pre)+len(suf) || !strings.HasPrefix(key, pre) || !strings.HasSuffix(key, suf) {
		return -1, false
	}
	digits := key[len(pre) : len(key)-len(suf)]
	if len(digits) > 9 {
		return -1, false
	}
	n := 0
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c < '0' || c > '9' {
			return -1, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Table is a protocol's list of commands.
type Table []CommandSpec

// Lookup returns the spec of a request command. The tables are a few
// dozen entries: a scan is as fast as a map.
func (t Table) Lookup(cmd string) (*CommandSpec, bool) {
	for i := range t {
		if t[i].Name == cmd {
			return &t[i], true
		}
	}
	return nil, false
}
