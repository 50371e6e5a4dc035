// Command lab runs the tests' Slurm cluster (package slurmlab) until it
// is interrupted, for trying srun --mpi=gopmi by hand:
//
//	go run ./integration/internal/slurmlab/lab -bin bin -nodes 2
//
// It prints the SLURM_CONF to export (and, with -prefix, the PATH), and
// with -bin builds mpi/gopmi for the gopmi binaries there (as root: slurmd
// runs tasks as their user). -prefix runs a Slurm installed there (e.g.
// /opt/slurm-25.11) instead of Debian's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/integration/internal/slurmlab"
)

func main() {
	bin := flag.String("bin", "", "directory of the gopmi binaries mpi/gopmi runs (empty: no gopmi)")
	nodes := flag.Int("nodes", 2, "slurmd to run")
	cpus := flag.Int("cpus", 32, "CPUs each node declares")
	mpiConf := flag.String("mpi-conf", "", "mpi.conf's text")
	own := flag.Bool("own-hostnames", false, "each slurmd in a UTS namespace named for its node")
	prefix := flag.String("prefix", "", "a Slurm install to run (its configured source in PREFIX/src); empty: Debian's")
	plugin := flag.String("plugin", "", "a built mpi_gopmi.so to load instead of building one")
	extra := flag.String("extra-plugins", "", "more built plugins (comma-separated) for the cluster's plugin directory, e.g. an earlier mpi/gopmi renamed mpi_gopmio.so")
	flag.Parse()
	if *bin != "" {
		abs, err := filepath.Abs(*bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lab:", err)
			os.Exit(1)
		}
		*bin = abs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := slurmlab.Start(ctx, "", slurmlab.Options{Nodes: *nodes, CPUs: *cpus, BinDir: *bin, MPIConf: *mpiConf, OwnHostnames: *own,
		Prefix: *prefix, Plugin: *plugin, Extra: strings.FieldsFunc(*extra, func(r rune) bool { return r == ',' })})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
	for _, e := range c.Env() {
		fmt.Printf("export %s\n", e)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Stop()
}
