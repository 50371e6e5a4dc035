package hclogzero

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLevelsAndFields(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf).Level(zerolog.DebugLevel))
	if l.GetLevel() != hclog.Debug || l.IsTrace() || !l.IsDebug() {
		t.Fatalf("level = %s; want debug", l.GetLevel())
	}
	named := l.Named("plugin").Named("stdio").With("job", "j1")
	named.Trace("dropped")
	named.Debug("d", "n", 3)
	named.Warn("w", "err", errors.New("bad"), "d", 2*time.Second)
	named.Error("e", "odd")
	l.Log(hclog.NoLevel, "relayed")
	want := []map[string]any{
		{"level": "debug", "message": "d", "module": "plugin.stdio", "job": "j1", "n": float64(3)},
		{"level": "warn", "message": "w", "module": "plugin.stdio", "job": "j1", "err": "bad", "d": "2s"},
		{"level": "error", "message": "e", "module": "plugin.stdio", "job": "j1", hclog.MissingKey: "odd"},
		{"level": "info", "message": "relayed"},
	}
	if diff := cmp.Diff(want, lines(t, &buf)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestSetLevelSharedAndOff(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf))
	child := l.Named("c")
	l.SetLevel(hclog.Error)
	child.Warn("dropped")
	child.Error("kept")
	l.SetLevel(hclog.Off)
	child.Error("dropped too")
	got := lines(t, &buf)
	if len(got) != 1 || got[0]["message"] != "kept" {
		t.Errorf("got %v; want only the error line", got)
	}
	if New(zerolog.Nop()).GetLevel() != hclog.Off {
		t.Error("a disabled zerolog logger is not Off")
	}
}

func TestStandardWriter(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf))
	std := l.StandardLogger(nil)
	std.Print("[WARN] careful")
	std.Print("plain")
	got := lines(t, &buf)
	want := []map[string]any{{"level": "warn", "message": "careful"}, {"level": "info", "message": "plain"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestCleanExitIsDebug: go-plugin's info line on every clean plugin exit
// is debug, while an exit with an error stays an error.
func TestCleanExitIsDebug(t *testing.T) {
	var buf bytes.Buffer
	l := New(zerolog.New(&buf).Level(zerolog.InfoLevel))
	l.Info("plugin process exited", "plugin", "/usr/bin/gopmi-rm-x", "id", 42)
	l.Error("plugin process exited", "plugin", "/usr/bin/gopmi-rm-x", "id", 43, "error", "exit status 2")
	l.Info("other news")
	got := lines(t, &buf)
	if len(got) != 2 || got[0]["level"] != "error" || got[0]["id"] != float64(43) || got[1]["message"] != "other news" {
		t.Errorf("at info: %v; want the error exit and the other line only", got)
	}
	buf.Reset()
	New(zerolog.New(&buf).Level(zerolog.DebugLevel)).Info("plugin process exited", "id", 44)
	if got := lines(t, &buf); len(got) != 1 || got[0]["level"] != "debug" {
		t.Errorf("at debug: %v; want the clean exit at debug", got)
	}
}
