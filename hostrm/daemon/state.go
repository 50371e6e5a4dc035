package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// loadNames reads the names a previous daemon kept; a missing file is
// none.
func loadNames(path string) ([]names.Name, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("state file %s: version %d, this daemon reads %d", path, st.Version, stateVersion)
	}
	out := make([]names.Name, 0, len(st.Names))
	for _, n := range st.Names {
		rng := n.Range
		if rng == plugin.RangeDefault {
			rng = plugin.RangeSession
		}
		out = append(out, names.Name{Key: n.Key, Value: n.Value, Publisher: n.Publisher, Range: rng, Persist: n.Persist, Node: n.Node, Realm: realmOf(n.UID), Tag: n.Run})
	}
	return out, nil
}

// saveNames writes the names whole, through a temporary file renamed
// over the old one, so that a daemon killed while writing leaves the
// previous state. The file is root's alone: it holds every user's names.
func saveNames(path string, all []names.Name) error {
	st := stateFile{Version: stateVersion, Names: []*name{}}
	for _, n := range all {
		st.Names = append(st.Names, &name{Key: n.Key, Value: n.Value, Publisher: n.Publisher, UID: realmUID(n.Realm), Run: n.Tag, Persist: n.Persist, Range: n.Range, Node: n.Node})
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".names-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// saver writes the names from a goroutine of its own, so that no call
// waits for the disk behind the server's lock; the latest state wins.
type saver struct {
	path string
	log  zerolog.Logger

	mu      sync.Mutex
	pending []names.Name
	has     bool
	wake    chan struct{} // capacity 1
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newSaver(path string, log zerolog.Logger) *saver {
	sv := &saver{path: path, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	// Temporary files of a daemon killed while it wrote.
	if old, err := filepath.Glob(filepath.Join(filepath.Dir(path), ".names-*")); err == nil {
		for _, f := range old {
			os.Remove(f)
		}
	}
	go sv.loop()
	return sv
}

// put hands the saver a state to write.
func (sv *saver) put(all []names.Name) {
	sv.mu.Lock()
	sv.pending, sv.has = all, true
	sv.mu.Unlock()
	select {
	case sv.wake <- struct{}{}:
	default:
	}
}

func (sv *saver) loop() {
	defer close(sv.done)
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

func (sv *saver) flush() {
	sv.mu.Lock()
	all, has := sv.pending, sv.has
	sv.pending, sv.has = nil, false
	sv.mu.Unlock()
	if !has {
		return
	}
	if err := saveNames(sv.path, all); err != nil {
		sv.log.Error().Err(err).Str("file", sv.path).Msg("save the published names")
	}
}

// close writes what is pending and stops.
func (sv *saver) close() {
	sv.once.Do(func() { close(sv.stop) })
	<-sv.done
}
