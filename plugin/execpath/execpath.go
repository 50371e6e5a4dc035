// Package execpath finds executables the way every gopmi process does: a
// host finding its backend or its helper binaries, and a backend resolving
// the command of a spawn. It is part of the SDK so that a vendor's step
// daemon and backend resolve names as gopmi's own do.
//
// Two rules live here, once each:
//
//   - A binary of an installation ([Find] over [Beside] and [PathDirs]):
//     next to the running executable, then next to the file its symlink
//     points at, then in the absolute PATH entries. A relative PATH entry
//     is skipped: the working directory is a job's, not the installation's.
//   - A spawn's command ([Command]): as MPI_Comm_spawn's "path" info key
//     and a shell would resolve it, relative entries against the job's
//     working directory.
package execpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Check says why p is not an executable file, or nil if it is: it must
// exist (a symlink is followed), be a regular file and have an execute
// bit. The error is a short reason ("does not exist", "is a directory",
// "has no execute bit (mode 0644)") that wraps the cause.
func Check(p string) error {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("does not exist: %w", err)
	case err != nil:
		return err
	case st.IsDir():
		return errors.New("is a directory")
	case !st.Mode().IsRegular():
		return fmt.Errorf("is not a regular file (%s)", st.Mode().Type())
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("has no execute bit (mode %04o): %w", st.Mode().Perm(), fs.ErrPermission)
	}
	return nil
}

// Beside is where an installation's binaries are found relative to exe,
// the path of a running binary: its directory, then the directory of the
// file it is a symlink to (/usr/bin/gopmi-shim -> /usr/lib/gopmi/gopmi-shim
// finds /usr/lib/gopmi's binaries too). Empty exe gives nothing.
func Beside(exe string) []string {
	if exe == "" {
		return nil
	}
	dirs := []string{filepath.Dir(exe)}
	if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	return dirs
}

// PathDirs is the absolute entries of a PATH value, in order.
func PathDirs(path string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(path) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Find looks for an executable file called name in each of dirs in order,
// skipping relative and repeated directories. It returns the first path
// found ("" if none) and the directories it looked in, for a message.
func Find(name string, dirs ...string) (path string, searched []string) {
	for _, d := range dirs {
		if !filepath.IsAbs(d) || slices.Contains(searched, d) {
			continue
		}
		searched = append(searched, d)
		if p := filepath.Join(d, name); Check(p) == nil {
			return p, searched
		}
	}
	return "", searched
}

// Command resolves a spawn's command cmd for a job whose working
// directory is dir. An absolute cmd is taken as is. Otherwise the entries
// of pathList (the "path" info key, colon separated) are searched first;
// then a name with a slash is taken relative to dir; then a bare name is
// searched in envPath (the job's PATH), and last in dir itself, as
// mpirun and srun find a program that spawns itself by name (MPICH's
// spaconacc) where PATH lacks ".". In both lists an empty entry is dir
// and a relative one is taken against dir. An error means no executable
// file answers; its message says where Command looked.
func Command(cmd, dir, pathList, envPath string) (string, error) {
	if filepath.IsAbs(cmd) {
		if err := Check(cmd); err != nil {
			return "", fmt.Errorf("%s is not an executable file: %w", cmd, err)
		}
		return cmd, nil
	}
	search := func(list string) string {
		if list == "" {
			return ""
		}
		for d := range strings.SplitSeq(list, ":") {
			if !filepath.IsAbs(d) {
				d = filepath.Join(dir, d)
			}
			if p := filepath.Join(d, cmd); Check(p) == nil {
				return p
			}
		}
		return ""
	}
	if p := search(pathList); p != "" {
		return p, nil
	}
	if strings.Contains(cmd, "/") {
		p := filepath.Join(dir, cmd)
		if err := Check(p); err != nil {
			return "", fmt.Errorf("%s is not an executable file in %s: %w", cmd, dir, err)
		}
		return p, nil
	}
	if p := search(envPath); p != "" {
		return p, nil
	}
	if p := filepath.Join(dir, cmd); Check(p) == nil {
		return p, nil
	}
	where := "PATH"
	if pathList != "" {
		where = "the path info key (" + pathList + "), PATH"
	}
	return "", fmt.Errorf("command %q not found in %s or the working directory %s", cmd, where, dir)
}
