package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
