package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"
)

// stateVersion is the state file's format.
const stateVersion = 1

type stateFile struct {
	Version int     `json:"version"`
	Names   []*name `json:"names"`
}

// loadNames reads the names a previous daemon kept; a missing file is
// none.
func loadNames(path string) ([]*name, error) {
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
	return st.Names, nil
}

// saveNames writes the names whole, through a temporary file renamed
// over the old one, so that a daemon killed while writing leaves the
// previous state. The file is root's alone: it holds every user's names.
func saveNames(path string, names []*name) error {
	b, err := json.Marshal(stateFile{Version: stateVersion, Names: names})
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
	pending []*name
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
func (sv *saver) put(names []*name) {
	sv.mu.Lock()
	sv.pending, sv.has = names, true
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
	names, has := sv.pending, sv.has
	sv.pending, sv.has = nil, false
	sv.mu.Unlock()
	if !has {
		return
	}
	if err := saveNames(sv.path, names); err != nil {
		sv.log.Error().Err(err).Str("file", sv.path).Msg("save the published names")
	}
}

// close writes what is pending and stops.
func (sv *saver) close() {
	sv.once.Do(func() { close(sv.stop) })
	<-sv.done
}
