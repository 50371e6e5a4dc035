package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// measureBurst is (d): cfg.burst MPICH hello jobs of cfg.burstN ranks
// started at once, as a parameter sweep or a test suite does, with the
// launchers taking turns run by run. A sample is the wall time until the
// last job ended; every job must pass.
func measureBurst(ctx context.Context, cfg *config, hello string, rep *report, progress io.Writer) error {
	cells := map[string]*cell{}
	for _, l := range cfg.launchers {
		c := &cell{Section: "burst", N: cfg.burst, Launcher: l.Name, Argv: l.Argv(cfg.burstN, hello)}
		rep.Cells = append(rep.Cells, c)
		cells[l.Name] = c
	}
	for i := 0; i < cfg.burstRuns; i++ {
		for _, l := range cfg.launchers {
			c := cells[l.Name]
			if c.Fail != "" {
				continue
			}
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: %w", ctx.Err())
			}
			rctx, cancel := context.WithTimeout(ctx, cfg.timeoutFor(cfg.burst*cfg.burstN))
			start := time.Now()
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				errs []error
			)
			for range cfg.burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := clients.Run(rctx, c.Argv, clients.RunOptions{})
					if err == nil {
						err = clients.All(clients.ExitCode(0), clients.PerRank("ok hello ", cfg.burstN, nil))(res)
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			wall := time.Since(start)
			cancel()
			if err := errors.Join(errs...); err != nil {
				c.Fail = fmt.Sprintf("%d of %d jobs failed: %v", len(errs), cfg.burst, errs[0])
				fmt.Fprintf(progress, "burst %dx%d %s run %d/%d: fail (%s)\n", cfg.burst, cfg.burstN, l.Name, i+1, cfg.burstRuns, c.Fail)
				continue
			}
			fmt.Fprintf(progress, "burst %dx%d %s run %d/%d: %.1f ms\n", cfg.burst, cfg.burstN, l.Name, i+1, cfg.burstRuns, ms(wall))
			c.Samples = append(c.Samples, sample{WallMS: ms(wall)})
		}
	}
	for _, c := range cells {
		summarize(c)
	}
	return nil
}

// startupRow is one line of (e): how one of gopmi's binaries starts.
type startupRow struct {
	Binary string `json:"binary"`
	// What is timed: from exec to the process's exit, or to READY=1.
	What   string  `json:"what"`
	Runs   int     `json:"runs"`
	WallMS float64 `json:"wall_ms"`
	// InitMS is the package init time GODEBUG=inittrace=1 reports, summed
	// over packages; 0 for a program that is not Go.
	InitMS float64 `json:"init_ms"`
	// Faults are the minor page faults of the process (rusage).
	Faults float64 `json:"page_faults"`
	Fail   string  `json:"fail,omitempty"`
}

// measureStartup is (e): how long each of gopmi's binaries takes to start
// on this machine, next to /bin/true (a process's floor here): gopmi and
// gopmi-rm-local from exec to exit with nothing to do, package init, page
// faults; gopmi-shim from exec to READY=1 for a one-task job. Medians.
func measureStartup(ctx context.Context, cfg *config, progress io.Writer) []startupRow {
	dir := cfg.gopmiDir
	type probe struct {
		row startupRow
		run func() (wall time.Duration, faults int64, init float64, err error)
	}
	exit := func(argv ...string) func() (time.Duration, int64, float64, error) {
		return func() (time.Duration, int64, float64, error) { return runToExit(ctx, argv) }
	}
	probes := []probe{
		{row: startupRow{Binary: "/bin/true", What: "exec to exit"}, run: exit("/bin/true")},
		{row: startupRow{Binary: "gopmi", What: "exec to exit (gopmi version)"}, run: exit(filepath.Join(dir, "gopmi"), "version")},
		{row: startupRow{Binary: "gopmi-rm-local", What: "exec to exit (not started as a plugin)"}, run: exit(filepath.Join(dir, "gopmi-rm-local"))},
		{row: startupRow{Binary: "gopmi-shim", What: "exec to READY=1, one task"}, run: func() (time.Duration, int64, float64, error) {
			return shimReady(ctx, filepath.Join(dir, "gopmi-shim"))
		}},
	}
	rows := make([]startupRow, len(probes))
	walls := make([][]float64, len(probes))
	faults := make([][]float64, len(probes))
	inits := make([][]float64, len(probes))
	for i := 0; i < cfg.startRuns; i++ {
		for j, p := range probes {
			if rows[j].Fail != "" {
				continue
			}
			w, f, in, err := p.run()
			if err != nil {
				rows[j].Fail = err.Error()
				fmt.Fprintf(progress, "startup %s: fail (%v)\n", p.row.Binary, err)
				continue
			}
			walls[j] = append(walls[j], ms(w))
			faults[j] = append(faults[j], float64(f))
			inits[j] = append(inits[j], in)
		}
	}
	for j, p := range probes {
		r := p.row
		r.Fail = rows[j].Fail
		r.Runs = len(walls[j])
		r.WallMS, r.Faults, r.InitMS = median(walls[j]), median(faults[j]), median(inits[j])
		rows[j] = r
		fmt.Fprintf(progress, "startup %s: %.2f ms, init %.2f ms, %.0f page faults\n", r.Binary, r.WallMS, r.InitMS, r.Faults)
	}
	return rows
}

// initSum adds up the clock ms of GODEBUG=inittrace=1's lines.
func initSum(stderr []byte) float64 {
	var t float64
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// init <pkg> @<t> ms, <clock> ms clock, ...
		if len(f) > 5 && f[0] == "init" && f[5] == "ms" {
			v, _ := strconv.ParseFloat(f[4], 64)
			t += v
		}
	}
	return t
}

// runToExit times argv from exec to its exit, then runs it again with
// package init traced (the trace's writes would slow the timed run).
func runToExit(ctx context.Context, argv []string) (time.Duration, int64, float64, error) {
	var (
		wall   time.Duration
		faults int64
		stderr bytes.Buffer
	)
	for _, traced := range []bool{false, true} {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		if traced {
			cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
			cmd.Stderr = &stderr
		}
		start := time.Now()
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return 0, 0, 0, err
		}
		if !traced {
			wall, faults = time.Since(start), minflt(cmd.ProcessState)
		}
	}
	return wall, faults, initSum(stderr.Bytes()), nil
}

func minflt(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Minflt
	}
	return 0
}

// shimBootstrap is a one-task job on one node, as a C step daemon writes
// it.
const shimBootstrap = `{"version":1,"job":{"nspace":"bench","size":1,"nodes":[{"id":0,"name":"n0","ranks":[0]}]},` +
	`"nodeId":0,"tasks":[{"rank":0,"fdName":"rank0"}],"backend":{"name":"local"}}`

// shimReady times gopmi-shim from exec to READY=1 (shimReadyOnce), then
// once more with its package init traced.
func shimReady(ctx context.Context, shim string) (time.Duration, int64, float64, error) {
	wall, faults, _, err := shimReadyOnce(ctx, shim, false)
	if err != nil {
		return 0, 0, 0, err
	}
	_, _, init, err := shimReadyOnce(ctx, shim, true)
	return wall, faults, init, err
}

// shimReadyOnce starts gopmi-shim as a step daemon does, with one task's
// socket, and times it from exec to READY=1; then the task closes its end
// and the shim exits.
func shimReadyOnce(ctx context.Context, shim string, traced bool) (time.Duration, int64, float64, error) {
	dir, err := os.MkdirTemp("", "gopmi-bench-")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return 0, 0, 0, err
	}
	defer nc.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	srv, task := os.NewFile(uintptr(fds[0]), "rank0"), os.NewFile(uintptr(fds[1]), "task")
	defer task.Close()
	cmd := exec.CommandContext(ctx, shim)
	cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "LISTEN_FDNAMES=rank0", "NOTIFY_SOCKET="+sock)
	if traced {
		cmd.Env = append(cmd.Env, "GODEBUG=inittrace=1")
	}
	cmd.Stdin = strings.NewReader(shimBootstrap)
	cmd.ExtraFiles = []*os.File{srv}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		srv.Close()
		return 0, 0, 0, err
	}
	srv.Close()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	var wall time.Duration
	for wall == 0 {
		n, _, err := nc.ReadFromUnix(buf)
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, 0, 0, fmt.Errorf("no READY=1: %w; %s", err, strings.TrimSpace(stderr.String()))
		}
		if bytes.Contains(buf[:n], []byte("READY=1")) {
			wall = time.Since(start)
		}
	}
	task.Close()
	if err := cmd.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("%w; %s", err, strings.TrimSpace(stderr.String()))
	}
	return wall, minflt(cmd.ProcessState), initSum(stderr.Bytes()), nil
}
