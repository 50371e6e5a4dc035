// Package proto_test checks that the generated Go code committed next to
// each .proto file is what the pinned generators make of it.
package proto_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gopmi/gopmi"

// TestGeneratedCodeIsCurrent regenerates every .proto below this directory
// (protoc's include path) with protoc and the generators pinned in
// contrib/tools/go.mod, and compares the result byte for byte with the
// committed files. On failure run `make proto` and commit the result.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	var protos []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".proto") {
			protos = append(protos, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(protos) == 0 {
		t.Fatal("no .proto files below proto/")
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Fatalf("protoc not found (%v): install it with `apt-get install protobuf-compiler` (Debian bookworm ships 3.21.12, the version the committed files were made with)", err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "-C", "../contrib/tools", "build", "-o", bin+"/",
		"google.golang.org/protobuf/cmd/protoc-gen-go",
		"google.golang.org/grpc/cmd/protoc-gen-go-grpc")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the pinned generators in contrib/tools: %v\n%s", err, out)
	}

	out := t.TempDir()
	args := append([]string{
		"-I", ".",
		"--plugin=protoc-gen-go=" + filepath.Join(bin, "protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc=" + filepath.Join(bin, "protoc-gen-go-grpc"),
		"--go_out=" + out, "--go_opt=module=" + module,
		"--go-grpc_out=" + out, "--go-grpc_opt=module=" + module,
	}, protos...)
	gen := exec.Command(protoc, args...)
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("protoc %s: %v\n%s", strings.Join(args, " "), err, msg)
	}

	// Every generated file must be committed unchanged...
	generated := map[string]bool{}
	err = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(filepath.Join(out, "proto"), path)
		if err != nil {
			return err
		}
		generated[rel] = true
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(rel)
		if err != nil {
			t.Errorf("%s is generated but not committed: run `make proto`", rel)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what its .proto generates: run `make proto`; first difference:\n%s", rel, firstDiff(got, want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(generated) == 0 {
		t.Fatal("protoc generated nothing")
	}
	// ...and every committed generated file must still be generated.
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(path, ".pb.go") && !generated[path] {
			t.Errorf("%s is committed but no .proto generates it: delete it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// firstDiff shows the first line where committed and regenerated differ.
func firstDiff(committed, regenerated []byte) string {
	a := strings.Split(string(committed), "\n")
	b := strings.Split(string(regenerated), "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			return "line " + strconv.Itoa(i+1) + ":\n  committed:   " + la + "\n  regenerated: " + lb
		}
	}
	return "(same lines, different bytes)"
}
