package clients

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Program names: the keys of the map Build returns.
const (
	MPIHello    = "mpi_hello"
	MPIAlltoall = "mpi_alltoall"
	MPIAbort    = "mpi_abort"
	MPIAttrs    = "mpi_attrs"
	MPIPubname  = "mpi_pubname"
	MPINode     = "mpi_node"
	PMI2Test    = "pmi2_test"
	PMI2Bench   = "pmi2_bench"
	PMI2Fault   = "pmi2_fault"
	PMI2Secret  = "pmi2_secret"
	PMI1Only    = "pmi1_only"
)

// InstallHint is the Debian command that provides every compiler, header and
// library the programs need.
const InstallHint = "apt-get install mpich libmpich-dev libpmi2-0-dev gcc"

// ErrMissingTool reports that a compiler, header or library the programs
// need is not installed; the message names the Debian packages.
var ErrMissingTool = errors.New("missing build dependency")

// header is included by every program; it is part of each cache key.
const header = "gopmi_test.h"

// buildVersion changes the cache key of every program when the way they are
// built changes.
const buildVersion = "1"

type kind int

const (
	kindMPI  kind = iota // mpicc.mpich
	kindPMI2             // gcc -lpmi2
	kindC                // gcc, no PMI library
)

type program struct {
	name string
	kind kind
}

var programs = []program{
	{MPIHello, kindMPI},
	{MPIAlltoall, kindMPI},
	{MPIAbort, kindMPI},
	{MPIAttrs, kindMPI},
	{MPIPubname, kindMPI},
	{MPINode, kindMPI},
	{PMI2Test, kindPMI2},
	{PMI2Bench, kindPMI2},
	{PMI2Fault, kindPMI2},
	{PMI2Secret, kindPMI2},
	{PMI1Only, kindC},
}

// Names lists every program Build produces.
func Names() []string {
	out := make([]string, len(programs))
	for i, p := range programs {
		out[i] = p.name
	}
	return out
}

// SourceDir finds integration/testdata/src: $GOPMI_CLIENTS_SRC if set, else
// next to this package's source file, else upward from the working
// directory (for binaries built with -trimpath).
func SourceDir() (string, error) {
	if d := os.Getenv("GOPMI_CLIENTS_SRC"); d != "" {
		return d, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		d := filepath.Join(filepath.Dir(file), "..", "testdata", "src")
		if _, err := os.Stat(filepath.Join(d, header)); err == nil {
			return filepath.Clean(d), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find client sources: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "integration", "testdata", "src")
		if _, err := os.Stat(filepath.Join(c, header)); err == nil {
			return c, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("find client sources: no integration/testdata/src above %s (set GOPMI_CLIENTS_SRC)", wd)
		}
	}
}

// DefaultDir is where tests and the benchmark keep built programs:
// integration/testdata/bin (git-ignored) next to the sources.
func DefaultDir() (string, error) {
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(src), "bin"), nil
}

// Build compiles every program into dir and returns name → absolute path.
// MPI programs are built with mpicc.mpich (MPICH's, whichever MPI the
// machine's alternatives make plain mpicc), libpmi2 programs with gcc -lpmi2. A
// program whose sources, compiler command and build version are unchanged
// since the last build in dir is not rebuilt. A missing compiler, header or
// library gives an error wrapping ErrMissingTool that names the packages to
// install.
func Build(ctx context.Context, dir string) (map[string]string, error) {
	src, err := SourceDir()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("build clients: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("build clients: %w", err)
	}
	hdr, err := os.ReadFile(filepath.Join(src, header))
	if err != nil {
		return nil, fmt.Errorf("build clients: read %s: %w", header, err)
	}

	out := make(map[string]string, len(programs))
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	// Two at a time: the machines this runs on have two cores.
	sem := make(chan struct{}, 2)
	for _, p := range programs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				errs = append(errs, fmt.Errorf("build %s: %w", p.name, ctx.Err()))
				mu.Unlock()
				return
			}
			path, err := buildOne(ctx, src, dir, hdr, p)
			<-sem
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[p.name] = path
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func compilerFor(k kind) (cc string, extra []string) {
	switch k {
	case kindMPI:
		return "mpicc.mpich", nil
	case kindPMI2:
		return "gcc", []string{"-lpmi2"}
	default:
		return "gcc", nil
	}
}

func buildOne(ctx context.Context, src, dir string, hdr []byte, p program) (string, error) {
	cc, libs := compilerFor(p.kind)
	ccPath, err := exec.LookPath(cc)
	if err != nil {
		return "", fmt.Errorf("build %s: %s not found in PATH: %w (install: %s)", p.name, cc, ErrMissingTool, InstallHint)
	}
	cfile := filepath.Join(src, p.name+".c")
	code, err := os.ReadFile(cfile)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p.name, err)
	}
	bin := filepath.Join(dir, p.name)
	// The pid keeps two processes building into one dir (go test running
	// packages in parallel) from writing the same temporary file.
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	args := append([]string{"-O2", "-Wall", "-I", src, "-o", tmp, cfile}, libs...)

	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", buildVersion, ccPath, strings.Join(libs, " "), cfile)
	h.Write(code)
	h.Write([]byte{0})
	h.Write(hdr)
	sum := hex.EncodeToString(h.Sum(nil))
	stamp := bin + ".sha256"
	if old, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(old)) == sum {
		if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
			return bin, nil
		}
	}

	cmd := exec.CommandContext(ctx, ccPath, args...)
	var outb bytes.Buffer
	cmd.Stdout = &outb
	cmd.Stderr = &outb
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		msg := outb.String()
		if missingDep(msg) {
			return "", fmt.Errorf("build %s: %w: %s (install: %s)", p.name, ErrMissingTool, firstErrorLine(msg), InstallHint)
		}
		return "", fmt.Errorf("build %s: %s %s: %w\n%s", p.name, cc, strings.Join(args, " "), err, msg)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("build %s: %w", p.name, err)
	}
	if err := os.WriteFile(stamp, []byte(sum+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("build %s: write cache stamp: %w", p.name, err)
	}
	return bin, nil
}

// missingDep recognises gcc's and ld's words for a header or library that
// is not installed.
func missingDep(msg string) bool {
	for _, s := range []string{"slurm/pmi2.h", "mpi.h", "cannot find -lpmi2", "cannot find -lmpi"} {
		if strings.Contains(msg, s) && (strings.Contains(msg, "No such file") || strings.Contains(msg, "cannot find")) {
			return true
		}
	}
	return false
}

func firstErrorLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "error") || strings.Contains(l, "cannot find") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(s)
}
