// Command gopmi-rm-slurm is gopmi's Slurm backend. Run by a node's
// gopmi-shim (through go-plugin), it forwards the node's backend calls to
// the step's coordinator; run as `gopmi-rm-slurm coordinate` by srun's
// mpi/gopmi plugin, it is that coordinator: it serves the socket srun's
// plugin passes it (LISTEN_FDS=1, fd 3; without one it listens on -listen
// and prints "port <n>"), until its standard input closes or it gets
// SIGTERM, and
// exits with the status srun should report (an MPI_Abort's errorcode).
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/plugin/grpcplugin"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "coordinate" {
		os.Exit(coordinate(os.Args[2:]))
	}
	grpcplugin.Serve(slurm.NewNode())
}

// exitSetup is the status of a coordinator that could not start.
const exitSetup = 70

func coordinate(args []string) int {
	step, listen := "", ""
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "-step":
			step = args[i+1]
		case "-listen":
			listen = args[i+1]
		default:
			fmt.Fprintf(os.Stderr, "gopmi-rm-slurm coordinate: unknown flag %s\n", args[i])
			return exitSetup
		}
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true}).With().Timestamp().Str("step", step).Logger().Level(zerolog.InfoLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var c *slurm.Coordinator
	// srun's plugin holds our standard input open for the step's life;
	// when it closes, the steps the job spawned are served to their end.
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	var l net.Listener
	if os.Getenv("LISTEN_FDS") == "1" {
		// srun's plugin made the socket; it is fd 3.
		var err error
		if l, err = net.FileListener(os.NewFile(3, "coordinator")); err != nil {
			fmt.Fprintf(os.Stderr, "gopmi-rm-slurm coordinate: the inherited socket: %v\n", err)
			return exitSetup
		}
		os.Unsetenv("LISTEN_FDS")
	}
	opts := slurm.CoordinatorOptions{
		Listener: l,
		Listen:   listen,
		Secret:   os.Getenv(slurm.EnvSecret),
		Step:     step,
		Logger:   log,
	}
	if l == nil {
		opts.Ready = func(port int) { _ = slurm.WritePort(os.Stdout, port) }
	}
	c = slurm.NewCoordinator(opts)
	go func() {
		select {
		case <-stdinClosed:
			_ = c.WaitSpawned(ctx)
		case <-ctx.Done():
		}
		cancel()
	}()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "gopmi-rm-slurm coordinate: %v\n", err)
		return exitSetup
	}
	// The failure was reported when it happened.
	status, _ := c.Status()
	return status
}
