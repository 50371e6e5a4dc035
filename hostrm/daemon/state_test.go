package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func testName(i int) names.Name {
	return names.Name{Key: "k" + strconv.Itoa(i), Value: "port-" + strconv.Itoa(i), Publisher: plugin.Proc{Nspace: "job.a", Rank: 0},
		Range: plugin.RangeSession, Realm: realmOf(1000), Tag: "run-a"}
}

func keysOf(ns []names.Name) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Key)
	}
	slices.Sort(out)
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// A change of the names appends its own line to the journal; the snapshot
// is not written again until the journal outgrows it, and then the
// journal starts anew. What is read back is every change, in order.
func TestStateJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "names.json")
	sv := newSaver(path, nil, zerolog.Nop())
	sv.compactAt = 4 << 10
	snap := fileSize(t, path)
	var want []string
	for i := range 20 {
		sv.put([]names.Name{testName(i)}, nil)
		want = append(want, "k"+strconv.Itoa(i))
	}
	sv.put(nil, []names.Name{testName(3), testName(7)})
	want = slices.DeleteFunc(want, func(k string) bool { return k == "k3" || k == "k7" })
	// Twenty names are a journal under 4 KiB: the snapshot stays as it was.
	waitUntil(t, func() bool { return fileSize(t, journalOf(path)) > 0 })
	sv.close()
	if got := fileSize(t, path); got != snap {
		t.Errorf("the snapshot was rewritten (%d bytes, was %d) for changes the journal holds", got, snap)
	}
	got, torn, err := loadNames(path)
	if err != nil || torn || !slices.Equal(keysOf(got), slices.Sorted(slices.Values(want))) {
		t.Fatalf("read back: %v (torn %v, %v); want %v", keysOf(got), torn, err, want)
	}

	// Many more: the journal is compacted into the snapshot, and stays
	// under its bound.
	sv = newSaver(path, got, zerolog.Nop())
	sv.compactAt = 4 << 10
	for i := 20; i < 400; i++ {
		sv.put([]names.Name{testName(i)}, nil)
		want = append(want, "k"+strconv.Itoa(i))
		if i%50 == 0 {
			time.Sleep(time.Millisecond) // let the saver write in several turns
		}
	}
	sv.close()
	if j := fileSize(t, journalOf(path)); j > max(4<<10, fileSize(t, path))+1<<10 {
		t.Errorf("the journal is %d bytes, the snapshot %d: not compacted", j, fileSize(t, path))
	}
	got, _, err = loadNames(path)
	if err != nil || !slices.Equal(keysOf(got), slices.Sorted(slices.Values(want))) {
		t.Fatalf("after compaction: %d names, %v; want %d", len(got), err, len(want))
	}
}

// A daemon killed as it appended leaves a last line cut short: the next
// daemon skips it, says so, and keeps every name before it.
func TestStateTornJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "names.json")
	sv := newSaver(path, nil, zerolog.Nop())
	sv.put([]names.Name{testName(1), testName(2)}, nil)
	sv.close()
	f, err := os.OpenFile(journalOf(path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"add":{"key":"k3","val`)
	f.Close()
	log := &plugintest.Buffer{}
	s, err := NewServer(Options{StateFile: path, Logger: zerolog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := keysOf(s.names.Names(nil)); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Fatalf("loaded %v", got)
	}
	if !strings.Contains(log.String(), "the state journal's last line was cut short") {
		t.Errorf("not said:\n%s", log.String())
	}
	// The new daemon wrote what it loaded whole: the torn line is gone.
	if j := fileSize(t, journalOf(path)); j != 0 {
		t.Errorf("the journal after a load holds %d bytes", j)
	}
}
