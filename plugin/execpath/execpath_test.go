package execpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes dir/<name> files: executable unless the name ends in
// ".txt", and a directory when it ends in "/".
func tree(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if strings.HasSuffix(n, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o755)
		if strings.HasSuffix(n, ".txt") {
			mode = 0o644
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheck(t *testing.T) {
	dir := tree(t, "prog", "data.txt", "sub/")
	if err := os.Symlink(filepath.Join(dir, "prog"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"prog":     "",
		"link":     "",
		"data.txt": "has no execute bit (mode 0644)",
		"sub":      "is a directory",
		"missing":  "does not exist",
	} {
		err := Check(filepath.Join(dir, name))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// TestFind: the first directory that has it wins; relative, repeated and
// non-executable candidates are passed over, and searched says where it
// looked.
func TestFind(t *testing.T) {
	dir := tree(t, "a/tool.txt", "b/tool", "c/tool")
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	p, searched := Find("tool.txt", a, b)
	if p != "" || strings.Join(searched, ":") != a+":"+b {
		t.Errorf("not executable: %q %v", p, searched)
	}
	p, searched = Find("tool", "relative", a, a, b, c)
	if p != filepath.Join(b, "tool") || strings.Join(searched, ":") != a+":"+b {
		t.Errorf("got %q after %v", p, searched)
	}
	if p, _ := Find("none", a, b); p != "" {
		t.Errorf("found %q", p)
	}
}

// TestBeside: a binary reached through a symlink finds the binaries next
// to its target as well.
func TestBeside(t *testing.T) {
	dir := tree(t, "lib/gopmi/gopmi-shim", "lib/gopmi/gopmi-rm-x", "bin/")
	bin, lib := filepath.Join(dir, "bin"), filepath.Join(dir, "lib", "gopmi")
	link := filepath.Join(bin, "gopmi-shim")
	if err := os.Symlink(filepath.Join(lib, "gopmi-shim"), link); err != nil {
		t.Fatal(err)
	}
	if got := Beside(link); len(got) != 2 || got[0] != bin || got[1] != lib {
		t.Errorf("Beside(%s) = %v", link, got)
	}
	if p, _ := Find("gopmi-rm-x", Beside(link)...); p != filepath.Join(lib, "gopmi-rm-x") {
		t.Errorf("found %q", p)
	}
	if got := Beside(filepath.Join(lib, "gopmi-shim")); len(got) != 1 || got[0] != lib {
		t.Errorf("no symlink: %v", got)
	}
	if Beside("") != nil {
		t.Error("empty exe gives directories")
	}
}

func TestPathDirs(t *testing.T) {
	got := PathDirs("/usr/bin::bin:./x:/opt/bin")
	if strings.Join(got, ",") != "/usr/bin,/opt/bin" {
		t.Errorf("got %v", got)
	}
}

// TestCommand holds a spawn's resolution: absolute as is; the path info
// key first, relative entries against the working directory; a name with
// a slash against the working directory; a bare name on PATH.
func TestCommand(t *testing.T) {
	dir := tree(t, "wd/bin/app", "wd/local/app", "wd/sub/app", "wd/doc.txt", "wd/self", "path/app", "path/other")
	wd := filepath.Join(dir, "wd")
	envPath := "bin:" + filepath.Join(dir, "path") // relative entries count against wd
	cases := []struct {
		cmd, pathList string
		want, err     string
	}{
		{cmd: filepath.Join(dir, "path", "other"), want: filepath.Join(dir, "path", "other")},
		{cmd: filepath.Join(dir, "nope"), err: " is not an executable file: does not exist"},
		{cmd: "app", pathList: "local", want: filepath.Join(wd, "local", "app")},
		{cmd: "app", pathList: "nowhere", want: filepath.Join(wd, "bin", "app")},
		{cmd: "app", want: filepath.Join(wd, "bin", "app")},
		{cmd: "other", want: filepath.Join(dir, "path", "other")},
		{cmd: "sub/app", want: filepath.Join(wd, "sub", "app")},
		{cmd: "sub/none", err: "sub/none is not an executable file in " + wd + ": does not exist"},
		{cmd: "self", want: filepath.Join(wd, "self")}, // not in PATH: the working directory, as mpirun
		{cmd: "doc.txt", err: `command "doc.txt" not found in PATH or the working directory ` + wd},
		{cmd: "gone", pathList: "x:y", err: `command "gone" not found in the path info key (x:y), PATH or the working directory ` + wd},
	}
	for _, tc := range cases {
		got, err := Command(tc.cmd, wd, tc.pathList, envPath)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s (path %q): %q, %v; want error %q", tc.cmd, tc.pathList, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s (path %q): %q, %v; want %q", tc.cmd, tc.pathList, got, err, tc.want)
		}
	}
}
