package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/slurmlab"
)

// startSlurm starts a cluster of nodes slurmd with mpi/gopmi built for
// the binaries in gopmiDir, its fence tree of width width (0: its
// default), and points srun at it (SLURM_CONF). stop ends it.
// With prefix, the cluster runs the Slurm installed there, whose
// commands come first on PATH.
func startSlurm(ctx context.Context, gopmiDir, prefix string, nodes, width int, progress io.Writer) (stop func(), err error) {
	fmt.Fprintf(progress, "bench: building mpi/gopmi and starting a %d-node Slurm cluster (Slurm %s)\n", nodes, slurmlab.Release(prefix))
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conf := ""
	if width > 0 {
		conf = fmt.Sprintf("GopmiTreeWidth=%d\n", width)
	}
	c, err := slurmlab.Start(sctx, "", slurmlab.Options{Nodes: nodes, BinDir: gopmiDir, CPUs: 1024, MPIConf: conf, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	setenv(c.Env())
	return c.Stop, nil
}

// setenv puts env's KEY=VALUE entries in the bench's environment, which
// every run inherits.
func setenv(env []string) {
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		os.Setenv(k, v)
	}
}

// startDaemon runs `gopmi daemon` on a socket of its own and returns the
// launcher that registers with it (gopmi+daemon), and what stops it.
func startDaemon(gopmi string) (stop func(), l clients.Launcher, err error) {
	dir, err := os.MkdirTemp("", "gopmi-bench-daemon-")
	if err != nil {
		return nil, l, err
	}
	sock := filepath.Join(dir, "d.sock")
	cmd := exec.Command(gopmi, "daemon", "-socket", sock, "-state", dir, "-log-level", "warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, l, err
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if i == 500 {
			stop()
			return nil, l, fmt.Errorf("gopmi daemon did not listen on %s", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return stop, clients.Launcher{Name: "gopmi+daemon", Template: []string{gopmi, "run", "-daemon", sock, "-n", "{n}"}}, nil
}
