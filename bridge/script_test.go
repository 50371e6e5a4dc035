package bridge

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/plugin"
)

// rmAnswer is what a transcript's "rm<" line tells the fake RM to answer
// the next call of one kind whose subject matches, instead of what the
// fake would work out itself: the way a transcript reaches the failure
// paths (a fence that times out, a modex not found, a publish refused)
// that a capture of a healthy run never shows. The syntax is in
// testdata/transcripts/README.md.
type rmAnswer struct {
	call  string // fence, modex, publish, ...: a key of rmCalls
	match string // the call's subject, or "*" for any
	err   error  // the error answered; nil for the success answer
	recs  []kvs.Record
	kv    []plugin.Published // lookup's answer
	name  string             // spawn's nspace, connect's id
	line  string             // as written, for the golden transcript
}

// rmCalls names the calls a transcript may script, each with what its
// success answer may carry.
var rmCalls = map[string]string{
	"fence":      "records", // ok [rank:]key=value...: the merged data, at once
	"modex":      "records", // ok [rank:]key=value...: the target's data
	"lookup":     "pairs",   // ok key=value...: the names found
	"spawn":      "nspace",  // ok nspace=NAME: the new job
	"connect":    "id",      // ok id=ID: the connection
	"publish":    "",        // ok
	"unpublish":  "",        // ok
	"disconnect": "",        // ok
	"abort":      "",        // ok
	"connected":  "",        // ok: ClientConnected
	"finalized":  "",        // ok: ClientFinalized
	"notify":     "",        // ok: NotifyEvent
}

// kindNames are the plugin sentinels by the names err= gives them.
var kindNames = map[string]error{
	"notsupported": plugin.ErrNotSupported,
	"notfound":     plugin.ErrNotFound,
	"exists":       plugin.ErrAlreadyExists,
	"invalid":      plugin.ErrInvalidArgument,
	"timeout":      plugin.ErrTimeout,
	"aborted":      plugin.ErrAborted,
	"permission":   plugin.ErrPermission,
	"unavailable":  plugin.ErrUnavailable,
	"gone":         plugin.ErrBackendGone,
}

// parseAnswer reads what follows "rm< ": CALL MATCH err=KIND [message]
// or CALL MATCH ok [fields].
func parseAnswer(line string) (*rmAnswer, error) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return nil, fmt.Errorf("rm< %q: want CALL MATCH err=KIND [message] or CALL MATCH ok [fields]", line)
	}
	a := &rmAnswer{call: f[0], match: f[1], line: line}
	shape, ok := rmCalls[a.call]
	if !ok {
		return nil, fmt.Errorf("rm< %q: no call %q to script", line, a.call)
	}
	if kind, found := strings.CutPrefix(f[2], "err="); found {
		sentinel, ok := kindNames[kind]
		if !ok {
			return nil, fmt.Errorf("rm< %q: no error kind %q", line, kind)
		}
		// The message is the rest of the line as written, spaces kept.
		_, rest, _ := strings.Cut(line, f[2])
		if msg := strings.TrimSpace(rest); msg != "" {
			a.err = plugin.Errorf(sentinel, "%s", msg)
		} else {
			a.err = sentinel
		}
		return a, nil
	}
	if f[2] != "ok" {
		return nil, fmt.Errorf("rm< %q: the answer is err=KIND or ok, not %q", line, f[2])
	}
	for _, field := range f[3:] {
		k, v, found := strings.Cut(field, "=")
		if !found {
			return nil, fmt.Errorf("rm< %q: %q is not key=value", line, field)
		}
		switch shape {
		case "records":
			rank := int32(0)
			if r, key, hasRank := strings.Cut(k, ":"); hasRank {
				n, err := strconv.Atoi(r)
				if err != nil {
					return nil, fmt.Errorf("rm< %q: rank %q: %v", line, r, err)
				}
				rank, k = int32(n), key
			}
			a.recs = append(a.recs, kvs.Record{Rank: rank, Key: k, Value: v})
		case "pairs":
			a.kv = append(a.kv, plugin.Published{Key: k, Value: v})
		case "nspace", "id":
			if k != shape {
				return nil, fmt.Errorf("rm< %q: %s answers %s=, not %s=", line, a.call, shape, k)
			}
			a.name = v
		default:
			return nil, fmt.Errorf("rm< %q: %s answers ok alone", line, a.call)
		}
	}
	return a, nil
}

// data is the scripted records as a fence or modex answer carries them.
func (a *rmAnswer) data() []byte {
	var b []byte
	for _, r := range a.recs {
		b = kvs.AppendRecord(b, r)
	}
	return b
}

// script queues a's answer for the next matching call.
func (f *fakeRM) script(a *rmAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts = append(f.scripts, a)
}

// scripted takes the first queued answer for call whose match is subject
// or "*", and logs it with the call. Called with mu held, after the call
// was recorded.
func (f *fakeRM) scripted(call, subject string) *rmAnswer {
	for i, a := range f.scripts {
		if a.call == call && (a.match == "*" || a.match == subject) {
			f.scripts = append(f.scripts[:i:i], f.scripts[i+1:]...)
			if n := len(f.log); n > 0 {
				f.log[n-1] += " <- " + a.line
			}
			return a
		}
	}
	return nil
}

// firstKey is a publish's subject: the first name it publishes.
func firstKey(data []plugin.Info) string {
	if len(data) == 0 {
		return ""
	}
	return data[0].Key
}

// unusedScripts returns the scripted answers no call took.
func (f *fakeRM) unusedScripts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.scripts {
		out = append(out, a.line)
	}
	return out
}

// Every plugin sentinel has a name in rm< lines, each answer parses to
// what the fake RM returns, and a line that says something else is
// refused rather than ignored.
func TestParseAnswer(t *testing.T) {
	named := map[error]bool{}
	for _, kind := range kindNames {
		named[kind] = true
	}
	for _, kind := range plugin.Kinds() {
		if !named[kind] {
			t.Errorf("plugin.%v has no name for rm< err=", kind)
		}
	}
	for name, kind := range kindNames {
		a, err := parseAnswer("lookup svc err=" + name + " the name server  says no")
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(a.err, kind) || a.err.Error() != "the name server  says no" {
			t.Errorf("err=%s: %v (%T), want %v with the message as written", name, a.err, a.err, kind)
		}
	}
	a, err := parseAnswer("fence world/1 err=timeout")
	if err != nil || a.err != plugin.ErrTimeout {
		t.Errorf("no message: %v, %v; want the sentinel itself", a, err)
	}
	a, err = parseAnswer("modex job:3 ok k=v 2:k2=v=2")
	if err != nil {
		t.Fatal(err)
	}
	if got := records(a.data()); got != "[0:k 2:k2]" || a.recs[1].Value != "v=2" {
		t.Errorf("modex ok: %s %+v", got, a.recs)
	}
	a, err = parseAnswer("spawn * ok nspace=job-7")
	if err != nil || a.name != "job-7" || a.match != "*" {
		t.Errorf("spawn ok: %+v, %v", a, err)
	}
	for _, bad := range []string{
		"fence world/1",             // no answer
		"fance world/1 err=timeout", // no such call
		"fence world/1 err=late",    // no such kind
		"fence world/1 fine",        // neither err= nor ok
		"publish svc ok extra=1",    // publish answers ok alone
		"spawn * ok id=x",           // spawn answers nspace=
		"lookup svc ok novalue",     // not key=value
		"modex job:3 ok x:k=v",      // a rank that is no number
		"connect * ok nspace=job-2", // connect answers id=
	} {
		if _, err := parseAnswer(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
