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
	"hostrm/internal/fencetree", "hostrm/internal/overlay", "plugin/crew",
	"shim/pmix", "shim/pmix/engine",
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

// goroutineStarts are the product files allowed to start goroutines or
// arm timers (a go statement, time.AfterFunc), with how many: the one
// owner (plugin/crew, which the bridge's calls, the hosts' fence trees
// and overlays, the PMIx engine, the universe and the node daemon run
// on), and serving loops and processes' waits that end with their
// listener or process. A new start anywhere else fails
// TestGoroutineOwners: it belongs on a crew, or here with its reason.
var goroutineStarts = map[string]int{
	// The owners.
	"plugin/crew/crew.go": 4, // the one owner: its goroutines (two ways), a bounded wait, its real clock
	// Serving loops, each ended by its listener's close.
	"plugin/grpcplugin/direct/serve.go": 3,
	"plugin/seclink/listen.go":          2,
	"hostrm/link/serve.go":              2,
	"hostrm/link/dial.go":               1,
	"hostrm/daemon/client.go":           1,
	"hostrm/daemon/run.go":              1,
	"hostrm/daemon/state.go":            1,
	"hostrm/daemon/upstream.go":         3,
	"shim/serve/server.go":              5,
	"shim/serve/host.go":                3,
	"shim/serve/portbudget.go":          2,
	"shim/run.go":                       2,
	"shim/pmixhost.go":                  1,
	// Processes' waits and output, each ended by its process.
	"plugin/grpcplugin/client.go":          2,
	"plugin/grpcplugin/runner.go":          1,
	"hostrm/local/launcher/here.go":        1,
	"hostrm/local/launcher/launcher.go":    3,
	"hostrm/local/launcher/notify.go":      1,
	"hostrm/local/launcher/output.go":      2,
	"hostrm/local/launcher/pmix.go":        1,
	"hostrm/local/launcher/procs.go":       1,
	"hostrm/local/launcher/shimnode.go":    1,
	"hostrm/local/launcher/singleton.go":   1,
	"hostrm/local/launcher/start.go":       1,
	"hostrm/local/launcher/tasks.go":       1,
	"hostrm/cmd/gopmi/main.go":             1,
	"hostrm/cmd/gopmi-pmix-tools/main.go":  1,
	"hostrm/slurm/cmd/gopmi-slurm/main.go": 2,
	// A log's answer once the PMIx server closed: libpmix's completions
	// must not run on its own thread (its crew runs the others).
	"shim/pmix/callbacks.go": 1,
	// The coordinator's serving of the step to the node daemon, and its
	// spawned sruns' waits (its failure's cancel and the sruns' kill are
	// on its crew).
	"hostrm/slurm/coord/coordinator.go": 2,
	"hostrm/slurm/coord/spawn.go":       2,
	// Test harnesses: the conformance kit and the scale simulation.
	"plugin/plugintest/cases_events.go":   1,
	"plugin/plugintest/cases_fence.go":    7,
	"plugin/plugintest/cases_names.go":    2,
	"plugin/plugintest/conformance.go":    1,
	"plugin/plugintest/pair.go":           1,
	"hostrm/slurm/slurmtest/slurmtest.go": 1,
}

func TestGoroutineOwners(t *testing.T) {
	got := map[string]int{}
	for _, f := range trackedFiles(t, "*.go") {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "integration/") || strings.Contains(f, "testdata/") || strings.HasSuffix(f, ".pb.go") {
			continue
		}
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, filepath.Join("..", f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				got[f]++
			case *ast.CallExpr:
				if s, ok := n.Fun.(*ast.SelectorExpr); ok {
					if id, ok := s.X.(*ast.Ident); ok && id.Name == "time" && s.Sel.Name == "AfterFunc" {
						got[f]++
					}
				}
			}
			return true
		})
	}
	for f, n := range got {
		if want := goroutineStarts[f]; n > want {
			t.Errorf("%s starts %d goroutines or timers (go, time.AfterFunc), %d allowed: run it on a crew (plugin/crew), or list it in goroutineStarts with its reason", f, n, want)
		}
	}
	for f, want := range goroutineStarts {
		if n := got[f]; n < want {
			t.Errorf("%s starts %d goroutines or timers, %d listed: lower its count in goroutineStarts", f, n, want)
		}
	}
}
