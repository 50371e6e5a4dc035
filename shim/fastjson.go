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
// it to that).
func decodeFast(data []byte) (b *shimv1.Bootstrap, ok bool) {
	if !utf8.Valid(data) {
		return nil, false
	}
	d := &fastDec{dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	b = &shimv1.Bootstrap{}
	d.object(bootstrapFields(b))
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

func (d *fastDec) fenceMode() shimv1.FenceMode {
	v, ok := shimv1.FenceMode_value[d.str()]
	if !ok {
		d.err = errNotPlain
	}
	return shimv1.FenceMode(v)
}

func (d *fastDec) keyValues(out *[]*shimv1.KeyValue) {
	d.array(func() {
		kv := &shimv1.KeyValue{}
		d.object([]fastField{
			{"key", "key", func(d *fastDec) { kv.Key = d.str() }},
			{"value", "value", func(d *fastDec) { kv.Value = d.str() }},
		})
		*out = append(*out, kv)
	})
}

// bootstrapFields and jobFields are the plain form's tables, written by
// hand rather than generated (why: plugin/internal/forwardgen's doc);
// TestDecodeFastCoversEveryField fails when they miss a field of the
// message.
func bootstrapFields(b *shimv1.Bootstrap) []fastField {
	return []fastField{
		{"version", "version", func(d *fastDec) { b.Version = d.uint32() }},
		{"job", "job", func(d *fastDec) { b.Job = &shimv1.Job{}; d.object(jobFields(b.Job)) }},
		{"nodeId", "node_id", func(d *fastDec) { b.NodeId = d.int32() }},
		{"tasks", "tasks", func(d *fastDec) {
			d.array(func() {
				t := &shimv1.Task{}
				d.object([]fastField{
					{"rank", "rank", func(d *fastDec) { t.Rank = d.int32() }},
					{"fdName", "fd_name", func(d *fastDec) { t.FdName = d.str() }},
				})
				b.Tasks = append(b.Tasks, t)
			})
		}},
		{"backend", "backend", func(d *fastDec) {
			be := &shimv1.BackendConfig{}
			b.Backend = be
			d.object([]fastField{
				{"name", "name", func(d *fastDec) { be.Name = d.str() }},
				{"path", "path", func(d *fastDec) { be.Path = d.str() }},
				{"config", "config", func(d *fastDec) { be.Config = d.str() }},
				{"args", "args", func(d *fastDec) { d.array(func() { be.Args = append(be.Args, d.str()) }) }},
				{"startAtOnce", "start_at_once", func(d *fastDec) { be.StartAtOnce = d.boolean() }},
			})
		}},
		{"limits", "limits", func(d *fastDec) {
			l := &shimv1.Limits{}
			b.Limits = l
			d.object([]fastField{
				{"kvsnameMax", "kvsname_max", func(d *fastDec) { l.KvsnameMax = d.int32() }},
				{"keyMax", "key_max", func(d *fastDec) { l.KeyMax = d.int32() }},
				{"valMax", "val_max", func(d *fastDec) { l.ValMax = d.int32() }},
				{"lineMax", "line_max", func(d *fastDec) { l.LineMax = d.int32() }},
				{"kvsMax", "kvs_max", func(d *fastDec) { l.KvsMax = d.int64() }},
			})
		}},
		{"timeouts", "timeouts", func(d *fastDec) {
			t := &shimv1.Timeouts{}
			b.Timeouts = t
			d.object([]fastField{
				{"fence", "fence", func(d *fastDec) { t.Fence = d.duration() }},
				{"get", "get", func(d *fastDec) { t.Get = d.duration() }},
				{"lookup", "lookup", func(d *fastDec) { t.Lookup = d.duration() }},
				{"nodeattr", "nodeattr", func(d *fastDec) { t.Nodeattr = d.duration() }},
				{"spawn", "spawn", func(d *fastDec) { t.Spawn = d.duration() }},
				{"backendStart", "backend_start", func(d *fastDec) { t.BackendStart = d.duration() }},
				{"connect", "connect", func(d *fastDec) { t.Connect = d.duration() }},
				{"shutdown", "shutdown", func(d *fastDec) { t.Shutdown = d.duration() }},
			})
		}},
		{"fenceMode", "fence_mode", func(d *fastDec) { b.FenceMode = d.fenceMode() }},
		{"pmiPortFd", "pmi_port_fd", func(d *fastDec) { b.PmiPortFd = d.str() }},
		{"logLevel", "log_level", func(d *fastDec) { b.LogLevel = d.str() }},
		{"pmiDebug", "pmi_debug", func(d *fastDec) { b.PmiDebug = d.boolean() }},
		{"pmix", "pmix", func(d *fastDec) { b.Pmix = d.boolean() }},
		{"pmixRendezvousFd", "pmix_rendezvous_fd", func(d *fastDec) { b.PmixRendezvousFd = d.str() }},
		{"pmiPortSecret", "pmi_port_secret", func(d *fastDec) { b.PmiPortSecret = d.str() }},
	}
}

func jobFields(j *shimv1.Job) []fastField {
	return []fastField{
		{"nspace", "nspace", func(d *fastDec) { j.Nspace = d.str() }},
		{"size", "size", func(d *fastDec) { j.Size = d.int32() }},
		{"universeSize", "universe_size", func(d *fastDec) { j.UniverseSize = d.int32() }},
		{"nodes", "nodes", func(d *fastDec) {
			d.array(func() {
				n := &shimv1.Node{}
				d.object([]fastField{
					{"id", "id", func(d *fastDec) { n.Id = d.int32() }},
					{"name", "name", func(d *fastDec) { n.Name = d.str() }},
					{"ranks", "ranks", func(d *fastDec) { d.array(func() { n.Ranks = append(n.Ranks, d.int32()) }) }},
					{"addr", "addr", func(d *fastDec) { n.Addr = d.str() }},
				})
				j.Nodes = append(j.Nodes, n)
			})
		}},
		{"apps", "apps", func(d *fastDec) {
			d.array(func() {
				a := &shimv1.App{}
				d.object([]fastField{
					{"firstRank", "first_rank", func(d *fastDec) { a.FirstRank = d.int32() }},
					{"size", "size", func(d *fastDec) { a.Size = d.int32() }},
					{"cmd", "cmd", func(d *fastDec) { a.Cmd = d.str() }},
					{"ranks", "ranks", func(d *fastDec) { d.array(func() { a.Ranks = append(a.Ranks, d.int32()) }) }},
				})
				j.Apps = append(j.Apps, a)
			})
		}},
		{"parent", "parent", func(d *fastDec) { j.Parent = d.str() }},
		{"preput", "preput", func(d *fastDec) { d.keyValues(&j.Preput) }},
		{"attrs", "attrs", func(d *fastDec) { d.keyValues(&j.Attrs) }},
	}
}
