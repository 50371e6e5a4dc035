//go:build pmix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/shim/pmix"
	"github.com/gopmi/gopmi/shim/sockdir"
)

// dirPrefix names the server's directory in TMPDIR.
const dirPrefix = "gopmi-tools-"

// dialTimeout bounds the connection to the node daemon.
const dialTimeout = 5 * time.Second

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopmi tools", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("daemon", "", "the node daemon's socket (default $"+daemon.EnvSocket+", else "+daemon.DefaultSocket+")")
	level := fs.String("log-level", "warn", "this server's log level (debug, info, warn, error)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: gopmi tools [flags] TOOL [ARGS...]

Runs a PMIx tool (Debian's pps) against the node daemon: the tool's
queries see your running jobs on this node (root: everyone's), as gopmi
query does.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil {
		fmt.Fprintf(stderr, "gopmi tools: -log-level %q: %v\n", *level, err)
		return 2
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000"}).Level(lvl).With().Timestamp().Str("from", "gopmi tools").Logger()
	tool, err := exec.LookPath(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "gopmi tools: %v (Debian's PMIx tools are in libpmix-bin)\n", err)
		return 127
	}

	sock := daemon.SocketPath(*path)
	if !daemon.IsSocket(sock) {
		fmt.Fprintf(stderr, "gopmi tools: no node daemon at %s (start it: systemctl start gopmi.socket, or gopmi daemon -socket PATH)\n", sock)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	conn, err := link.Dial(ctx, sock)
	cancel()
	switch {
	case errors.Is(err, plugin.ErrPermission):
		fmt.Fprintf(stderr, "gopmi tools: %v\n", err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "gopmi tools: the node daemon at %s does not answer: %v\n", sock, err)
		return 1
	}
	defer conn.Close()

	// Signals are taken from here on: one that came during the start
	// would leave the directory behind.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// A gopmi tools killed with SIGKILL leaves its directory: the next
	// one of the same user removes it.
	sockdir.SweepStale(os.TempDir(), dirPrefix)
	dir, err := sockdir.Make(os.TempDir(), dirPrefix)
	if err != nil {
		fmt.Fprintf(stderr, "gopmi tools: the server's directory: %v\n", err)
		return 1
	}
	defer dir.Remove()
	srv, err := pmix.Start(pmix.Options{
		Backend: conn.Backend(),
		TmpDir:  dir.Path,
		ID:      "gopmi-tools." + strconv.Itoa(os.Getpid()),
		Tools:   true,
		Logger:  log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "gopmi tools: %v\n", err)
		return 1
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Warn().Err(err).Msg("closing the PMIx server")
		}
	}()

	cmd := exec.Command(tool, fs.Args()[1:]...)
	cmd.Args[0] = fs.Arg(0)
	cmd.Env = toolEnv(os.Environ(), dir.Path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// The tool ends with this process, which serves it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "gopmi tools: %v\n", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				// A terminal's ^C and ^\ reach the tool itself (the
				// same process group); what is sent to this process
				// alone is passed on.
				if s == syscall.SIGTERM || s == syscall.SIGHUP {
					_ = cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	return exitCode(cmd.ProcessState, err, stderr)
}

// toolEnv is the tool's environment: this server's directory as the
// one PMIx tools search for servers, and nothing that would point the
// tool at another server (a tool started from inside a job inherits its
// PMIX_SERVER_URI*) or make it take itself for a client. The user's
// PMIX_MCA_ settings stay.
func toolEnv(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if pmix.ForeignVar(kv) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PMIX_SYSTEM_TMPDIR="+dir)
}

// exitCode is the tool's exit status as a shell gives it: 128+N when
// signal N killed it.
func exitCode(st *os.ProcessState, err error, stderr io.Writer) int {
	if st == nil {
		fmt.Fprintf(stderr, "gopmi tools: %v\n", err)
		return 1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
