package integration

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The house's size rules, which keep a room readable in one sitting:
// no hand-written product file over 600 lines, and in the rooms that grew
// fastest (the Slurm backend and the host-neutral pieces) no type that
// does things (one with methods) over 12 fields or 20 methods. Option
// structs, which only carry settings, are exempt.
const (
	maxFileLines   = 600
	maxTypeFields  = 12
	maxTypeMethods = 20
)

// sizedPackages are the directories whose types the rule holds to.
var sizedPackages = []string{
	"hostrm/slurm", "hostrm/slurm/coord",
	"hostrm/internal/fencetree", "hostrm/internal/overlay", "hostrm/internal/crew",
}

// trackedFiles lists the repository's files matching patterns.
func trackedFiles(t *testing.T, patterns ...string) []string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"ls-files", "--"}, patterns...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	return strings.Fields(string(out))
}

func TestFileSizes(t *testing.T) {
	for _, f := range trackedFiles(t, "*.go", "*.c", "*.h") {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, ".pb.go") || strings.HasSuffix(f, "_gen.go") ||
			strings.Contains(f, "testdata/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(b, []byte("// Code generated")) {
			continue
		}
		n := 0
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			n++
		}
		if n > maxFileLines {
			t.Errorf("%s has %d lines: split it by concern (at most %d)", f, n, maxFileLines)
		}
	}
}

func TestTypeSizes(t *testing.T) {
	for _, dir := range sizedPackages {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join("..", dir), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		fields, methods := map[string]int{}, map[string]int{}
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					switch d := d.(type) {
					case *ast.GenDecl:
						for _, s := range d.Specs {
							ts, ok := s.(*ast.TypeSpec)
							if !ok {
								continue
							}
							if st, ok := ts.Type.(*ast.StructType); ok {
								for _, fl := range st.Fields.List {
									fields[ts.Name.Name] += max(len(fl.Names), 1)
								}
							}
						}
					case *ast.FuncDecl:
						if d.Recv == nil {
							continue
						}
						recv := d.Recv.List[0].Type
						if s, ok := recv.(*ast.StarExpr); ok {
							recv = s.X
						}
						if id, ok := recv.(*ast.Ident); ok {
							methods[id.Name]++
						}
					}
				}
			}
		}
		for name, m := range methods {
			if f := fields[name]; m > 0 && (f > maxTypeFields || m > maxTypeMethods) {
				t.Errorf("%s.%s has %d fields and %d methods (at most %d and %d): split it by concern", dir, name, f, m, maxTypeFields, maxTypeMethods)
			}
		}
	}
}
