// Command gopmi-slurm is what Slurm's mpi/gopmi plugin runs for a step:
//
//   - `gopmi-slurm coordinate -step J.S`, started by srun's side, is the
//     step's coordinator: it serves the socket srun's plugin passes it
//     (LISTEN_FDS=1, fd 3; without one it listens on -listen and prints
//     "port <n>") until its standard input closes or it gets SIGTERM, and
//     exits with the status srun should report (an MPI_Abort's errorcode).
//     With -end-fd N (Flux's job shell), the job's end is not scancel's:
//     the coordinator writes "end <status> <why>" on fd N, and the host
//     ends the job with that status; with -flux-run ARG (repeated, the
//     command first), a spawn is a job of the Flux instance.
//   - `gopmi-slurm shim`, started by each node's slurmstepd, is gopmi-shim
//     with the Slurm backend in its own process: it serves PMI to the
//     node's tasks and forwards to the coordinator what crosses nodes.
//     Flux's job shell (contrib/flux, flux run -o pmi=gopmi) starts both
//     commands the same way, with -host flux and -end-fd.
//     Built with the tag pmix it is gopmi-slurm-pmix, which serves a
//     PMIx step's tasks (Open MPI) through libpmix instead.
//   - `gopmi-slurm check`, for an admin on a node: whether the installed
//     mpi_gopmi.so was built for the slurmd that runs and goes with the
//     gopmi binaries it runs (exit 1 when not).
//   - `gopmi-slurm version` prints gopmi's release.
//
// It does not link go-plugin: every step starts one of these per node and
// one beside srun, and on a busy node a process's start-up is what a short
// step pays. gopmi-rm-slurm is the same backend as a go-plugin process, for
// gopmi-shim and the conformance kit.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/hostrm/slurm/coord"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim"
	"github.com/gopmi/gopmi/shim/serve"
)

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano // sub-second log times
	serve.StepGC()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "coordinate":
			os.Exit(coordinate(os.Args[2:]))
		case "shim":
			os.Exit(serveNode(os.Args[2:]))
		case "check":
			os.Exit(check(os.Args[2:], os.Stdout))
		case "version":
			fmt.Println(version)
			os.Exit(0)
		}
	}
	fmt.Fprintln(os.Stderr, "usage: gopmi-slurm coordinate -step J.S | gopmi-slurm shim (run by Slurm's mpi/gopmi plugin) | gopmi-slurm check [-plugin SO] [-slurmd PATH] | gopmi-slurm version")
	os.Exit(exitSetup)
}

// serveNode is gopmi-shim with the node's backend in its own process.
// "-host flux": started by Flux's job shell, which waits for it, rather
// than by a slurmstepd.
func serveNode(args []string) int {
	host := "slurm"
	if len(args) == 2 && args[0] == "-host" {
		host = args[1]
	} else if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "gopmi-slurm shim: unknown arguments %q\n", args)
		return exitSetup
	}
	// stderr is a pipe to the stepd, which copies the log into the
	// node's slurmd log: a line written after the stepd went must not
	// kill the shim.
	signal.Ignore(syscall.SIGPIPE)
	err := shim.Run(context.Background(), shim.RunConfig{
		Backend: func(ctx context.Context, spec serve.BackendSpec) (plugin.Full, error) {
			if spec.Name != "slurm" {
				return nil, fmt.Errorf("the bootstrap asks for backend %q; gopmi-slurm shim serves only slurm", spec.Name)
			}
			// The node's log (its fence tree's failures, refused
			// connections) is the shim's.
			// Its fence tree's wait for the children's answers is
			// done once, at the ranks' finalize, which the shim in
			// this process asks for.
			return slurm.NodeFromArgs(spec.Args, slurm.WithLogger(*zerolog.Ctx(ctx)), slurm.WithFinalizeDrain()), nil
		},
		PMIx: pmixFace,
	})
	if err == nil && host == "slurm" {
		lingerForStepd()
	}
	return serve.ExitCode(err)
}

// lingerAfterJob is how long the shim of a job that ended cleanly stays,
// waiting for its stepd to kill it with the step's other processes.
const lingerAfterJob = time.Second

// lingerForStepd keeps the shim until its stepd ends the step. slurmstepd
// reaps its children with wait3(-1): when the first child it reaps is the
// shim, not a task (MPICH closes its PMI socket before it exits, so the
// shim often ends first), it sleeps 100 ms before it looks again
// (_wait_for_all_tasks), and a short step takes 100 ms longer. A shim that
// is still there when the tasks are reaped is killed with the step's
// leftovers instead. Tasks that run on long after PMI's finalize find it
// gone after lingerAfterJob, at the cost of that one pause.
func lingerForStepd() {
	time.Sleep(lingerAfterJob)
}

// exitSetup is the status of a coordinator that could not start.
const exitSetup = 70

func coordinate(args []string) int {
	step, listen, endFD := "", "", ""
	var fluxRun []string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "-step":
			step = args[i+1]
		case "-listen":
			listen = args[i+1]
		case "-end-fd":
			endFD = args[i+1]
		case "-flux-run":
			// A spawn is a job of this Flux instance: flux run with
			// these arguments, one flag for each.
			fluxRun = append(fluxRun, args[i+1])
		default:
			fmt.Fprintf(os.Stderr, "gopmi-slurm coordinate: unknown flag %s\n", args[i])
			return exitSetup
		}
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true}).With().Timestamp().Str("step", step).Logger().Level(zerolog.InfoLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var c *coord.Coordinator
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
			fmt.Fprintf(os.Stderr, "gopmi-slurm coordinate: the inherited socket: %v\n", err)
			return exitSetup
		}
		os.Unsetenv("LISTEN_FDS")
	}
	opts := coord.Options{
		FluxRun:  fluxRun,
		Listener: l,
		Listen:   listen,
		Secret:   os.Getenv(slurm.EnvSecret),
		Step:     step,
		Logger:   log,
	}
	if l == nil {
		opts.Ready = func(port int) { _ = coord.WritePort(os.Stdout, port) }
	}
	if endFD != "" {
		// A host that ends the job itself (Flux's job shell) reads the
		// end on a pipe instead of the coordinator running scancel.
		fd, err := strconv.Atoi(endFD)
		if err != nil || fd < 3 {
			fmt.Fprintf(os.Stderr, "gopmi-slurm coordinate: -end-fd %q is not an inherited fd\n", endFD)
			return exitSetup
		}
		end := os.NewFile(uintptr(fd), "end")
		opts.Cancel = func(context.Context, string) error {
			return coord.WriteEnd(end, c.Status)
		}
	}
	if d := nodeDaemon(log); d != nil {
		defer d.Close()
		opts.Beyond = d
		opts.OnJob = func(job plugin.Job, universe string) {
			d.Register(job, daemon.RunConfig{PID: os.Getpid(), Cmd: "srun (step " + step + ")", Universe: universe})
		}
	}
	c = coord.New(opts)
	go func() {
		select {
		case <-stdinClosed:
			_ = c.WaitSpawned(ctx)
		case <-ctx.Done():
		}
		cancel()
	}()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "gopmi-slurm coordinate: %v\n", err)
		return exitSetup
	}
	// The failure was reported when it happened.
	status, _ := c.Status()
	return status
}

// nodeDaemon is a client of srun's node's daemon (gopmi daemon) when its
// socket ($GOPMI_DAEMON, else the default) is there and answers: the
// step's names are then shared with the node's other runs and steps.
// GOPMI_DAEMON=none keeps them within the step.
func nodeDaemon(log zerolog.Logger) *daemon.Client {
	c, why := daemon.DialNode("", log)
	if why != "" {
		log.Warn().Msg(why + ": names stay within the step")
	}
	return c
}
