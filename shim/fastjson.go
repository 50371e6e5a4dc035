package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	shimv1 "github.com/gopmi/gopmi/proto/gopmi/shim/v1"
)

// decodeFast decodes the plain form of a Bootstrap, the one step daemons
// write, with encoding/json's tokenizer, and reports ok=false for anything
// outside it; readBootstrap then asks protojson, which stays the
// definition of what the shim accepts. protojson's first use costs the
// shim about 0.2 ms of its start (it builds the message's reflection
// data), encoding/json a quarter of that.
//
// The plain form: one JSON object, each field named once, by its JSON or
// its proto name; integers as JSON integers in range, booleans, strings
// in valid UTF-8 without escapes that encoding/json would rewrite, the
// fence mode by its name, durations as "<seconds>[.<up to 9
// digits>]s". Null, a number as a string, an enum by number, an unknown
// field and the like are protojson's to judge. Whatever decodeFast
// accepts, protojson accepts with the same result (FuzzDecodeFast holds
// it to that). The tables of fields, fieldsOf<Message> in plain_gen.go,
// are generated from the message's descriptor (plugin/internal/forwardgen);
// the readers here are the plain form's rules, one per kind of field.
func decodeFast(data []byte) (b *shimv1.Bootstrap, ok bool) {
	if !utf8.Valid(data) {
		return nil, false
	}
	d := &fastDec{dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	b = &shimv1.Bootstrap{}
	d.object(fieldsOfBootstrap(b))
	if d.err == nil {
		// Nothing may follow the object.
		if _, err := d.dec.Token(); err != io.EOF {
			d.err = errNotPlain
		}
	}
	return b, d.err == nil
}

// errNotPlain stops decodeFast: protojson decides.
var errNotPlain = errors.New("not the plain form")

// fastDec walks the tokens; the first surprise stops it.
type fastDec struct {
	dec *json.Decoder
	err error
}

// fastField is one field of a message: its JSON and proto names and what
// reads its value.
type fastField struct {
	json, proto string
	read        func(d *fastDec)
}

func (d *fastDec) token() json.Token {
	if d.err != nil {
		return nil
	}
	t, err := d.dec.Token()
	if err != nil {
		d.err = errNotPlain
		return nil
	}
	return t
}

// object reads one object of the given fields, each at most once.
func (d *fastDec) object(fields []fastField) {
	if t := d.token(); t != json.Delim('{') {
		d.err = errNotPlain
		return
	}
	seen := make([]bool, len(fields))
	for d.err == nil && d.dec.More() {
		name, ok := d.token().(string)
		i := -1
		for k, f := range fields {
			if ok && (name == f.json || name == f.proto) {
				i = k
			}
		}
		if i < 0 || seen[i] {
			d.err = errNotPlain
			return
		}
		seen[i] = true
		fields[i].read(d)
	}
	if t := d.token(); t != json.Delim('}') {
		d.err = errNotPlain
	}
}

// array reads an array, each element by elem.
func (d *fastDec) array(elem func()) {
	if t := d.token(); t != json.Delim('[') {
		d.err = errNotPlain
		return
	}
	for d.err == nil && d.dec.More() {
		elem()
	}
	if t := d.token(); t != json.Delim(']') {
		d.err = errNotPlain
	}
}

// integer reads a JSON integer within [lo, hi].
func (d *fastDec) integer(lo, hi int64) int64 {
	n, ok := d.token().(json.Number)
	if !ok {
		d.err = errNotPlain
		return 0
	}
	s := string(n)
	if strings.ContainsAny(s, ".eE") || (len(s) > 1 && s[0] == '0') || strings.HasPrefix(s, "-0") {
		d.err = errNotPlain
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		d.err = errNotPlain
		return 0
	}
	return v
}

func (d *fastDec) int32() int32 { return int32(d.integer(-1<<31, 1<<31-1)) }

// int64 reads what protojson writes for an int64, a decimal in a string,
// or a plain number (as a C step daemon may write it).
func (d *fastDec) int64() int64 {
	tok := d.token()
	s, quoted := tok.(string)
	if !quoted {
		n, ok := tok.(json.Number)
		if !ok {
			d.err = errNotPlain
			return 0
		}
		s = string(n)
	}
	if s == "" || strings.ContainsAny(s, ".eE+ ") || (len(s) > 1 && s[0] == '0') || strings.HasPrefix(s, "-0") {
		d.err = errNotPlain
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.err = errNotPlain
	}
	return v
}

func (d *fastDec) uint32() uint32 { return uint32(d.integer(0, 1<<32-1)) }

func (d *fastDec) boolean() bool {
	v, ok := d.token().(bool)
	if !ok {
		d.err = errNotPlain
	}
	return v
}

// str reads a string; one that needed encoding/json to replace something
// (U+FFFD) is protojson's to judge.
func (d *fastDec) str() string {
	s, ok := d.token().(string)
	if !ok || strings.ContainsRune(s, utf8.RuneError) {
		d.err = errNotPlain
		return ""
	}
	return s
}

// duration reads "<seconds>[.<1-9 digits>]s", non-negative, as the
// durations of a bootstrap are written.
func (d *fastDec) duration() *durationpb.Duration {
	s := d.str()
	if d.err != nil {
		return nil
	}
	body, ok := strings.CutSuffix(s, "s")
	secs, frac, hasFrac := strings.Cut(body, ".")
	if !ok || !digits(secs, 1, 12) || (len(secs) > 1 && secs[0] == '0') || (hasFrac && !digits(frac, 1, 9)) {
		d.err = errNotPlain
		return nil
	}
	sec, _ := strconv.ParseInt(secs, 10, 64)
	var nanos int64
	if hasFrac {
		nanos, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	if sec > 315576000000 {
		d.err = errNotPlain
		return nil
	}
	return &durationpb.Duration{Seconds: sec, Nanos: int32(nanos)}
}

// digits reports whether s is between lo and hi ASCII digits.
func digits(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// enum reads an enum value by its name, one of values (the generated
// <Enum>_value map).
func (d *fastDec) enum(values map[string]int32) int32 {
	v, ok := values[d.str()]
	if !ok {
		d.err = errNotPlain
	}
	return v
}
