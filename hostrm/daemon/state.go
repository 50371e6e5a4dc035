package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/names"
	"github.com/rs/zerolog"
)

// stateVersion is the state file's format.
const stateVersion = 1

type stateFile struct {
	Version int     `json:"version"`
	Names   []*name `json:"names"`
}

// name is one published name, as the state file keeps it: its realm is
// its user, its tag its run. Range and node came in with the shared name
// service; a name written before has neither, and so the default range.
type name struct {
	Key       string             `json:"key"`
	Value     string             `json:"value"`
	Publisher plugin.Proc        `json:"publisher"`
	UID       uint32             `json:"uid"`
	Run       string             `json:"run"`
	Persist   plugin.Persistence `json:"persist"`
	Range     plugin.Range       `json:"range,omitempty"`
	Node      string             `json:"node,omitempty"`
}

// The state is two files: the snapshot (StateFile, names.json), every
// name when it was written, and its journal (names.journal beside it),
// the changes since, one JSON line each ({"add":NAME} or {"del":NAME}),
// appended and synced as they happen. A change costs its own line, not a
// rewrite of every user's names; once the journal outgrows the snapshot
// (and compactAt), the snapshot is written anew and the journal emptied.
// Replaying is idempotent (an add of a name present replaces it, a del of
// one absent does nothing), so a daemon killed between the two, or while
// it appended (a torn last line, skipped), leaves a state that loads.

// journalLine is one change in the journal.
type journalLine struct {
	Add *name `json:"add,omitempty"`
	Del *name `json:"del,omitempty"`
}

// compactAt is the journal size below which it is never compacted.
const compactAt = 1 << 20

// journalOf is the journal of the snapshot at path.
func journalOf(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".journal"
}

// nameID is what tells two names apart: two names of one key and user
// coexist only when published by different processes or on different
// nodes (a range that keeps them apart).
func nameID(n *name) string {
	return fmt.Sprintf("%d\x00%s\x00%s\x00%s\x00%d", n.UID, n.Key, n.Publisher, n.Node, n.Range)
}

func toState(n names.Name) *name {
	return &name{Key: n.Key, Value: n.Value, Publisher: n.Publisher, UID: realmUID(n.Realm), Run: n.Tag, Persist: n.Persist, Range: n.Range, Node: n.Node}
}

func fromState(n *name) names.Name {
	rng := n.Range
	if rng == plugin.RangeDefault {
		rng = plugin.RangeSession
	}
	return names.Name{Key: n.Key, Value: n.Value, Publisher: n.Publisher, Range: rng, Persist: n.Persist, Node: n.Node, Realm: realmOf(n.UID), Tag: n.Run}
}

// loadNames reads the names a previous daemon kept, its snapshot and then
// its journal; missing files are none. torn is whether the journal's last
// line was cut short (the daemon was killed as it wrote it): skipped.
func loadNames(path string) (out []names.Name, torn bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	var st stateFile
	if err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, false, fmt.Errorf("state file %s: %w", path, err)
		}
		if st.Version != stateVersion {
			return nil, false, fmt.Errorf("state file %s: version %d, this daemon reads %d", path, st.Version, stateVersion)
		}
	}
	byID := map[string]*name{}
	var order []string
	put := func(n *name) {
		id := nameID(n)
		if byID[id] == nil {
			order = append(order, id)
		}
		byID[id] = n
	}
	for _, n := range st.Names {
		put(n)
	}
	jb, err := os.ReadFile(journalOf(path))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	lines := bytes.Split(jb, []byte("\n"))
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var jl journalLine
		if err := json.Unmarshal(line, &jl); err != nil || (jl.Add == nil) == (jl.Del == nil) {
			if i == len(lines)-1 {
				torn = true // no newline after it: cut short
				break
			}
			return nil, false, fmt.Errorf("state journal %s: line %d: %q", journalOf(path), i+1, line[:min(len(line), 80)])
		}
		if jl.Add != nil {
			put(jl.Add)
		} else {
			delete(byID, nameID(jl.Del))
		}
	}
	for _, id := range order {
		if n := byID[id]; n != nil {
			out = append(out, fromState(n))
			delete(byID, id) // an id added, deleted and added again is listed once
		}
	}
	return out, torn, nil
}

// saveNames writes the snapshot whole, through a temporary file renamed
// over the old one, so that a daemon killed while writing leaves the
// previous state. The file is root's alone: it holds every user's names.
// It returns the bytes written.
func saveNames(path string, all []*name) (int, error) {
	st := stateFile{Version: stateVersion, Names: all}
	if st.Names == nil {
		st.Names = []*name{}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".names-*")
	if err != nil {
		return 0, err
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	return len(b), os.Rename(tmp.Name(), path)
}

// change is one name added or removed, in the order the service made it.
type change struct {
	add bool
	n   names.Name
}

// saver writes the changes from a goroutine of its own, so that no call
// waits for the disk behind the server's lock.
type saver struct {
	path string
	log  zerolog.Logger

	mu      sync.Mutex
	pending []change
	wake    chan struct{} // capacity 1
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// The loop's own.
	state     map[string]*name // what the files say, by nameID
	order     []string         // the ids in publishing order, some gone
	journal   *os.File         // nil until the first append
	snapBytes int              // the snapshot's size when written
	jBytes    int              // the journal's size
	compactAt int              // compactAt (tests make it smaller)
}

// newSaver keeps the names kept (what the files say), compacting what it
// read into a fresh snapshot.
func newSaver(path string, kept []names.Name, log zerolog.Logger) *saver {
	sv := &saver{path: path, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), state: map[string]*name{}, compactAt: compactAt}
	// Temporary files of a daemon killed while it wrote.
	if old, err := filepath.Glob(filepath.Join(filepath.Dir(path), ".names-*")); err == nil {
		for _, f := range old {
			os.Remove(f)
		}
	}
	for _, n := range kept {
		sv.apply(change{add: true, n: n})
	}
	sv.compact()
	go sv.loop()
	return sv
}

// put hands the saver a change of the names.
func (sv *saver) put(added, removed []names.Name) {
	sv.mu.Lock()
	for _, n := range added {
		sv.pending = append(sv.pending, change{add: true, n: n})
	}
	for _, n := range removed {
		sv.pending = append(sv.pending, change{n: n})
	}
	sv.mu.Unlock()
	select {
	case sv.wake <- struct{}{}:
	default:
	}
}

func (sv *saver) loop() {
	defer close(sv.done)
	defer func() {
		if sv.journal != nil {
			sv.journal.Close()
		}
	}()
	for {
		select {
		case <-sv.wake:
			sv.flush()
		case <-sv.stop:
			sv.flush()
			return
		}
	}
}

// apply makes a change to the saver's state and returns its journal line.
func (sv *saver) apply(c change) []byte {
	n := toState(c.n)
	id := nameID(n)
	jl := journalLine{Del: n}
	if c.add {
		if sv.state[id] == nil {
			sv.order = append(sv.order, id)
		}
		sv.state[id] = n
		jl = journalLine{Add: n}
	} else {
		delete(sv.state, id)
	}
	b, _ := json.Marshal(jl)
	return append(b, '\n')
}

// flush appends the pending changes to the journal, and compacts it once
// it outgrew the snapshot.
func (sv *saver) flush() {
	sv.mu.Lock()
	todo := sv.pending
	sv.pending = nil
	sv.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	var buf []byte
	for _, c := range todo {
		buf = append(buf, sv.apply(c)...)
	}
	if err := sv.appendJournal(buf); err != nil {
		sv.log.Error().Err(err).Str("file", journalOf(sv.path)).Msg("append to the state journal; writing the state whole")
		sv.compact()
		return
	}
	if sv.jBytes > max(sv.compactAt, sv.snapBytes) {
		sv.compact()
	}
}

func (sv *saver) appendJournal(b []byte) error {
	if sv.journal == nil {
		f, err := os.OpenFile(journalOf(sv.path), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		sv.journal = f
	}
	if _, err := sv.journal.Write(b); err != nil {
		return err
	}
	sv.jBytes += len(b)
	return sv.journal.Sync()
}

// compact writes the snapshot whole and empties the journal.
func (sv *saver) compact() {
	all := make([]*name, 0, len(sv.state))
	live, seen := sv.order[:0], make(map[string]bool, len(sv.state))
	for _, id := range sv.order {
		if n := sv.state[id]; n != nil && !seen[id] {
			seen[id] = true
			all = append(all, n)
			live = append(live, id)
		}
	}
	sv.order = live
	size, err := saveNames(sv.path, all)
	if err != nil {
		sv.log.Error().Err(err).Str("file", sv.path).Msg("save the published names")
		return
	}
	sv.snapBytes = size
	// The snapshot holds every change: the journal starts again.
	if err := os.Truncate(journalOf(sv.path), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		sv.log.Error().Err(err).Str("file", journalOf(sv.path)).Msg("empty the state journal")
		return
	}
	sv.jBytes = 0
}

// close writes what is pending and stops.
func (sv *saver) close() {
	sv.once.Do(func() { close(sv.stop) })
	<-sv.done
}
