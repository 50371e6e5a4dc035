package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopmi/gopmi/integration/internal/slurmlab"
)

// startSlurm starts a two-node cluster with mpi/gopmi built for the
// binaries in gopmiDir and points srun at it (SLURM_CONF). stop ends it.
func startSlurm(ctx context.Context, gopmiDir string, progress io.Writer) (stop func(), err error) {
	fmt.Fprintln(progress, "bench: building mpi/gopmi and starting a two-node Slurm cluster")
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c, err := slurmlab.Start(sctx, "", slurmlab.Options{Nodes: 2, BinDir: gopmiDir, CPUs: 1024})
	if err != nil {
		return nil, err
	}
	os.Setenv("SLURM_CONF", c.Conf)
	return c.Stop, nil
}
