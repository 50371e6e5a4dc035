package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// goPackage is what `go list -json` says of a package that this test
// reads.
type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listPackages runs `go list -json` on patterns from the module root.
func listPackages(t *testing.T, patterns ...string) map[string]goPackage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-json"}, patterns...)...)
	cmd.Dir = ".."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

const mod = "github.com/gopmi/gopmi/"

// TestImportRules holds the layout's rules, so that they can be read from
// the imports: the local resource manager (the universe, its link and
// gopmi-rm-local) uses nothing but the SDK and itself, the Slurm backend
// (hostrm/slurm, gopmi-rm-slurm) nothing but the SDK, Slurm's coordinator
// nothing but the SDK, the universe (and its link) and the backend (and gopmi-slurm,
// which is also a shim, the shim); only gopmi run's launcher, the shim and gopmi-slurm
// import the shim's serving loop; the bridge never imports gRPC; `gopmi`
// links neither go-plugin nor gRPC nor protojson nor the shim, and
// gopmi-slurm and the shim's package not go-plugin, so that they start
// lean.
func TestImportRules(t *testing.T) {
	begin(t)
	pkgs := listPackages(t, "./...")
	sdkOnly := map[string]bool{
		mod + "hostrm/local":                    true,
		mod + "hostrm/link":                     true,
		mod + "hostrm/local/forwarder":          true,
		mod + "hostrm/local/cmd/gopmi-rm-local": true,
	}
	// The host-neutral pieces every host with nodes of its own drives
	// (Slurm's today, Flux's next: the fence tree, the crew) know no
	// resource manager and use only the SDK and each other.
	// The fence tree's private service (gopmi.tree.v1) is one of them.
	neutral := func(path string) bool {
		return strings.HasPrefix(path, mod+"hostrm/internal/") || path == mod+"proto/gopmi/tree/v1"
	}
	sdk := []string{mod + "plugin", mod + "plugin/wake", mod + "plugin/names", mod + "plugin/execpath", mod + "plugin/peercred", mod + "plugin/seclink", mod + "plugin/crew", mod + "plugin/grpcplugin", mod + "plugin/grpcplugin/direct"}
	slurmShim := mod + "hostrm/slurm/cmd/gopmi-slurm"
	shimPkgs := map[string]bool{mod + "shim": true, mod + "shim/serve": true}
	for path, p := range pkgs {
		for _, imp := range p.Imports {
			own := strings.HasPrefix(imp, mod)
			switch {
			case neutral(path) && own && !slices.Contains(sdk, imp) && !neutral(imp):
				t.Errorf("%s imports %s: a host-neutral piece may use only the SDK and the other pieces", path, imp)
			case sdkOnly[path] && own && !slices.Contains(sdk, imp) && !sdkOnly[imp]:
				t.Errorf("%s imports %s: the local resource manager may use only the SDK (%s)", path, imp, strings.Join(sdk, ", "))
			case (path == mod+"hostrm/slurm" || path == mod+"hostrm/slurm/cmd/gopmi-rm-slurm") && own && !slices.Contains(sdk, imp) &&
				imp != mod+"hostrm/slurm" && !neutral(imp):
				t.Errorf("%s imports %s: the Slurm backend may use only the SDK (%s) and the host-neutral fence tree", path, imp, strings.Join(sdk, ", "))
			case strings.HasPrefix(path, mod+"hostrm/slurm/") && own && !slices.Contains(sdk, imp) && !neutral(imp) &&
				imp != mod+"hostrm/local" && imp != mod+"hostrm/link" && !strings.HasPrefix(imp, mod+"hostrm/slurm") &&
				!(path == slurmShim && (shimPkgs[imp] || imp == mod+"hostrm/daemon")):
				// The coordinator keeps the step's state in the local RM's
				// universe, itself SDK-only, and serves it to srun's node
				// daemon over the universe's link; gopmi-slurm is also the
				// shim, and connects the coordinator to that daemon.
				t.Errorf("%s imports %s: Slurm's coordinator may use only the SDK, the universe (hostrm/local and its link) and the backend", path, imp)
			case imp == mod+"shim/serve" && path != mod+"hostrm/local/launcher" && path != mod+"shim" && path != slurmShim:
				t.Errorf("%s imports the shim's serving loop: only gopmi run's launcher, the shim and gopmi-slurm may", path)
			case imp == mod+"shim" && path != mod+"shim/cmd/gopmi-shim" && path != mod+"shim/cmd/gopmi-pmix" && path != mod+"shim/goplugin" && path != slurmShim:
				t.Errorf("%s imports package shim: only gopmi-shim's and gopmi-pmix's mains, shim/goplugin and gopmi-slurm may", path)
			case strings.HasPrefix(imp, mod+"hostrm") && !strings.HasPrefix(path, mod+"hostrm") &&
				// The benchmark runs the Slurm backend's own code at scale.
				!(path == mod+"integration/bench" && imp == mod+"hostrm/slurm/slurmtest") &&
				// gopmi-pmix serves gopmi run's backend in process.
				!(path == mod+"shim/cmd/gopmi-pmix" && imp == mod+"hostrm/local/forwarder"):
				t.Errorf("%s imports %s: nothing outside hostrm imports it (but the benchmark, its scale simulation, and gopmi-pmix, gopmi run's backend)", path, imp)
			case strings.HasPrefix(path, mod+"bridge") && strings.HasPrefix(imp, "google.golang.org/grpc"):
				t.Errorf("%s imports %s: the bridge never imports gRPC", path, imp)
			}
		}
	}
	gopmi := listPackages(t, "./hostrm/cmd/gopmi")[mod+"hostrm/cmd/gopmi"]
	for _, dep := range gopmi.Deps {
		if strings.HasPrefix(dep, "github.com/hashicorp/go-plugin") || strings.HasPrefix(dep, "google.golang.org/grpc") ||
			dep == "google.golang.org/protobuf/encoding/protojson" || dep == mod+"shim" || dep == mod+"plugin/grpcplugin" {
			t.Errorf("gopmi links %s: every run would pay its package init", dep)
		}
	}
	if !slices.Contains(gopmi.Deps, mod+"shim/serve") {
		t.Errorf("gopmi does not link the shim's serving loop: it no longer serves a job on one node itself?")
	}
	// The Slurm backend, as vendors and the conformance kit see it, links
	// nothing of gopmi's but the SDK and the host-neutral pieces (SDK-only
	// themselves).
	for _, p := range listPackages(t, "./hostrm/slurm/cmd/gopmi-rm-slurm") {
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, mod) && !slices.Contains(sdk, dep) && dep != mod+"hostrm/slurm" && !neutral(dep) &&
				!strings.HasPrefix(dep, mod+"proto/") && !strings.HasPrefix(dep, mod+"plugin/") {
				t.Errorf("gopmi-rm-slurm links %s: the Slurm backend is built on the public SDK only", dep)
			}
		}
	}
	// Every Slurm step starts a gopmi-slurm per node and one beside srun;
	// the shim's package leaves go-plugin to gopmi-shim's main.
	for _, pkg := range []string{"./hostrm/slurm/cmd/gopmi-slurm", "./shim"} {
		for _, p := range listPackages(t, pkg) {
			for _, dep := range p.Deps {
				if strings.HasPrefix(dep, "github.com/hashicorp/go-plugin") || dep == mod+"plugin/grpcplugin" {
					t.Errorf("%s links %s: every start would pay its package init", p.ImportPath, dep)
				}
			}
		}
	}
}

// TestNoProtobufInSDK: vendors see Go types; no protobuf type appears in
// the public API of the SDK's packages.
func TestNoProtobufInSDK(t *testing.T) {
	begin(t)
	for _, pkg := range []string{"./plugin", "./plugin/execpath", "./plugin/grpcplugin", "./plugin/grpcplugin/direct", "./plugin/plugintest"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "go", "doc", "-all", pkg)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("go doc %s: %v\n%s", pkg, err, out)
		}
		for _, bad := range []string{"rmv1.", "shimv1.", "proto.Message", "protoreflect"} {
			if strings.Contains(string(out), bad) {
				t.Errorf("go doc %s shows %s in its public API", pkg, bad)
			}
		}
	}
}
