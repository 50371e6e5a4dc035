package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gopmi/gopmi/integration/internal/slurmlab"
)

// startSlurm builds mpi/gopmi for the binaries in gopmiDir, starts a
// two-node cluster and points srun at it (SLURM_CONF). stop ends it.
func startSlurm(ctx context.Context, gopmiDir string, progress io.Writer) (stop func(), err error) {
	if err := slurmlab.Check(); err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(gopmiDir)
	if err != nil {
		return nil, err
	}
	var mod bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Stdout = &mod
	if err := cmd.Run(); err != nil || strings.TrimSpace(mod.String()) == "" || strings.TrimSpace(mod.String()) == os.DevNull {
		return nil, errors.New("run it from the gopmi module: it builds contrib/slurm")
	}
	dir, err := os.MkdirTemp("", "gopmi-bench-slurm-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // munged wants it enterable
		return nil, err
	}
	fmt.Fprintln(progress, "bench: building mpi/gopmi and starting a two-node Slurm cluster")
	so := filepath.Join(dir, "mpi_gopmi.so")
	build := exec.CommandContext(ctx, filepath.Join(filepath.Dir(strings.TrimSpace(mod.String())), "contrib", "slurm", "build.sh"), so)
	build.Env = append(os.Environ(), "BINDIR="+bin)
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("contrib/slurm/build.sh: %w\n%s", err, out)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := slurmlab.Start(sctx, filepath.Join(dir, "cluster"), slurmlab.Options{Nodes: 2, Plugin: so, CPUs: 1024})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	os.Setenv("SLURM_CONF", c.Conf)
	return func() {
		c.Stop()
		os.RemoveAll(dir)
	}, nil
}
