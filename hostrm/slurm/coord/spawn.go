package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/slurm"
	"github.com/gopmi/gopmi/plugin"
)

// The environment of a spawned step's srun, read by mpi/gopmi's stepd side
// (besides EnvCoordinator and EnvSecret, which make it join this
// coordinator).
const (
	// EnvNspace is the spawned job's namespace, which the spawner was
	// told.
	EnvNspace = "GOPMI_SLURM_NSPACE"
	// EnvParent is the spawner's namespace.
	EnvParent = "GOPMI_SLURM_PARENT"
	// EnvPreput is the spawn's preput, a JSON array of {"key","value"}.
	EnvPreput = "GOPMI_SLURM_PREPUT"
)

// launch starts a spawned job as a step of the same allocation: a nested
// `srun --mpi=gopmi --overlap`, which joins this coordinator. It returns
// once every node of the new step configured its backend (its tasks are
// starting), or with srun's own reason when srun ends first or the spawn
// time-out passes.
func (c *Coordinator) launch(ctx context.Context, spec *local.JobSpec) error {
	c.mu.Lock()
	addr := c.addr
	c.mu.Unlock()
	if addr == "" {
		return plugin.Errorf(plugin.ErrUnavailable, "spawn: the coordinator does not know its address yet")
	}
	prog := c.opts.Srun
	args, appEnv, conf, err := srunArgs(spec.Apps)
	if c.opts.FluxRun != nil {
		prog = c.opts.FluxRun[0]
		args, appEnv, err = fluxRunArgs(c.opts.FluxRun[1:], spec.Apps)
	}
	if err != nil {
		return err
	}
	if conf != "" {
		// Several commands at once: srun --multi-prog, one line each,
		// whose stepds give each rank its line's appnum.
		f, err := os.CreateTemp("", "gopmi-spawn-*.conf")
		if err != nil {
			return plugin.Errorf(plugin.ErrUnavailable, "spawn: %v", err)
		}
		defer os.Remove(f.Name()) // srun has read it once the step started
		_, werr := f.WriteString(conf)
		if cerr := f.Close(); werr != nil || cerr != nil {
			return plugin.Errorf(plugin.ErrUnavailable, "spawn: write %s: %v", f.Name(), errors.Join(werr, cerr))
		}
		args = append(args, "--multi-prog", f.Name())
	}
	type kv struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	preput := make([]kv, 0, len(spec.Preput))
	for _, p := range spec.Preput {
		// encoding/json would replace what is not UTF-8, and the child
		// would read another value than its parent put.
		if !utf8.ValidString(p.Key) || !utf8.ValidString(p.Value) {
			return plugin.Errorf(plugin.ErrInvalidArgument, "spawn: preput key %q or its value is not valid UTF-8", p.Key)
		}
		preput = append(preput, kv{p.Key, p.Value})
	}
	pj, err := json.Marshal(preput)
	if err != nil {
		return err
	}
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(),
		slurm.EnvCoordinator+"="+addr, slurm.EnvSecret+"="+c.opts.Secret,
		EnvNspace+"="+spec.Job.Nspace, EnvParent+"="+spec.Job.Parent, EnvPreput+"="+string(pj))
	cmd.Env = append(cmd.Env, appEnv...)
	tail := &tailBuffer{max: 4096}
	cmd.Stdout = c.opts.Stdout
	cmd.Stderr = io.MultiWriter(c.opts.Stderr, tail)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return plugin.Errorf(plugin.ErrUnavailable, "spawn: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ns := spec.Job.Nspace
	c.log.Debug().Str("job", ns).Strs("srun", args).Msg("spawning")
	for {
		// The channel is taken before the check, so that a node
		// configuring in between is not missed.
		changed := c.changed.C()
		if all, _ := c.u.Configured(ns); all {
			break
		}
		select {
		case <-changed:
		case err := <-exited:
			if all, _ := c.u.Configured(ns); all || err == nil {
				// It started and ended at once: the spawn happened.
				// A launcher that succeeded ran its job, even one
				// that ended before its nodes' backends, which its
				// one-node fences did not need, came up (a short
				// Flux job does).
				c.u.EndJob(ns, exitFailure(prog, err))
				return nil
			}
			c.u.EndJob(ns, filepath.Base(prog)+" ended before the job started")
			return fmt.Errorf("%s %s ended before the job started (%v): %s", filepath.Base(prog), strings.Join(args, " "), err, tail.last())
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			reason := tail.last()
			if reason == "" {
				reason = "srun said nothing"
			}
			return fmt.Errorf("%w: Slurm did not start it: %s", ctx.Err(), reason)
		}
	}
	// The step runs on; its end ends the job here.
	c.spawned.wg.Add(1)
	c.mu.Lock()
	if c.spawned.sruns == nil {
		c.spawned.sruns = map[*exec.Cmd]bool{}
	}
	c.spawned.sruns[cmd] = true
	stopped := c.outcome.status != 0
	c.mu.Unlock()
	if stopped {
		c.stopSpawned() // the job failed while this one started
	}
	go func() {
		defer c.spawned.wg.Done()
		err := <-exited
		c.mu.Lock()
		delete(c.spawned.sruns, cmd)
		c.mu.Unlock()
		c.u.EndJob(ns, exitFailure(prog, err))
	}()
	return nil
}

// exitFailure is how a spawned job's launcher (srun, or flux) ended, as
// Universe.EndJob takes it: "" when it succeeded.
func exitFailure(prog string, err error) string {
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return filepath.Base(prog) + " exited with " + ee.ProcessState.String()
	case err != nil:
		return err.Error()
	}
	return ""
}

// fluxRunArgs is the arguments after the flux command that run a spawn's
// app as a Flux job, and the environment flux run is given (its tasks').
// One app only: a Flux job runs one command.
func fluxRunArgs(run []string, apps []local.AppSpec) (args, env []string, err error) {
	switch {
	case len(apps) == 0:
		return nil, nil, plugin.Errorf(plugin.ErrInvalidArgument, "spawn: no command")
	case len(apps) > 1:
		return nil, nil, plugin.Errorf(plugin.ErrNotSupported, "spawn: %d commands at once: a Flux job runs one (spawn them one at a time)", len(apps))
	case apps[0].Procs < 1:
		return nil, nil, plugin.Errorf(plugin.ErrInvalidArgument, "spawn: %d processes", apps[0].Procs)
	}
	a := apps[0]
	args = append(slices.Clone(run), "-n", strconv.Itoa(int(a.Procs)))
	if a.Dir != "" {
		args = append(args, "--cwd="+a.Dir)
	}
	return append(append(args, a.Path), a.Args...), a.Env, nil
}

// Slurm 22.05's limits on a --multi-prog line: slurmstepd's MAX_ARGC (128,
// the program and a terminating NULL included) and srun's line buffer.
const (
	multiProgMaxArgs = 126
	multiProgMaxLine = 16 << 10
)

// envPath runs a --multi-prog command in its own working directory and
// with its own environment: one step has one of each, but each line may
// start "env -C DIR K=V ... PROGRAM" (coreutils 8.28 or later), which
// execs the program in place (its pid, its rank, its MPI_APPNUM stay).
const envPath = "/usr/bin/env"

// srunArgs is the nested srun's arguments for a spawn's apps, the
// environment srun itself is given (every rank's), and, for several apps,
// the --multi-prog configuration that runs them (the caller writes it to
// a file and adds --multi-prog): one line per app, its ranks, its program
// and its arguments single-quoted, as slurmstepd parses them. Apps whose
// working directories or environments differ each get theirs on their
// line, through env; what a --multi-prog line cannot hold is refused by
// name.
func srunArgs(apps []local.AppSpec) (args, env []string, conf string, err error) {
	if len(apps) == 0 {
		return nil, nil, "", plugin.Errorf(plugin.ErrInvalidArgument, "spawn: no command")
	}
	total := int32(0)
	sameDir, sameEnv := true, true
	first := apps[0]
	for _, a := range apps {
		total += a.Procs
		sameDir = sameDir && a.Dir == first.Dir
		sameEnv = sameEnv && slices.Equal(a.Env, first.Env)
	}
	args = []string{"--mpi=gopmi", "--overlap", "-n", strconv.Itoa(int(total))}
	if first.Dir != "" && sameDir {
		args = append(args, "--chdir="+first.Dir)
	}
	if sameEnv {
		env = first.Env
	}
	if len(apps) == 1 {
		return append(append(args, first.Path), first.Args...), env, "", nil
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b strings.Builder
	rank := int32(0)
	for i, a := range apps {
		switch {
		case a.Path == "" || strings.ContainsAny(a.Path, " \t\n\r\v\f'\"\\%"):
			return nil, nil, "", plugin.Errorf(plugin.ErrNotSupported,
				"spawn: command %d, %q: srun --multi-prog cannot run a program whose path is empty or holds blanks, quotes, '\\' or '%%'", i, a.Path)
		case a.Procs < 1:
			return nil, nil, "", plugin.Errorf(plugin.ErrInvalidArgument, "spawn: command %d asks for %d processes", i, a.Procs)
		}
		var words []string
		if !sameDir || !sameEnv {
			words = append(words, envPath)
			if !sameDir && a.Dir != "" {
				words = append(words, "-C", quote(a.Dir))
			}
			if !sameEnv {
				for _, e := range a.Env {
					words = append(words, quote(e))
				}
			}
		}
		words = append(words, a.Path)
		for _, arg := range a.Args {
			words = append(words, quote(arg))
		}
		if len(words)-1 > multiProgMaxArgs {
			return nil, nil, "", plugin.Errorf(plugin.ErrNotSupported,
				"spawn: command %d has %d arguments with its directory and environment: slurmstepd runs at most %d per --multi-prog line", i, len(words)-1, multiProgMaxArgs)
		}
		line := fmt.Sprintf("%d-%d %s\n", rank, rank+a.Procs-1, strings.Join(words, " "))
		if strings.Count(line, "\n") > 1 {
			return nil, nil, "", plugin.Errorf(plugin.ErrNotSupported, "spawn: command %d: srun --multi-prog cannot pass an argument, directory or variable holding a newline", i)
		}
		if len(line) >= multiProgMaxLine {
			return nil, nil, "", plugin.Errorf(plugin.ErrNotSupported,
				"spawn: command %d's --multi-prog line is %d bytes: srun reads lines shorter than %d", i, len(line), multiProgMaxLine)
		}
		b.WriteString(line)
		rank += a.Procs
	}
	return args, env, b.String(), nil
}

// stopSpawned ends the spawned steps after an abort or a failure: SIGTERM
// to each srun, which ends its step, then SIGKILL to the srun's group
// after a few seconds. Without it a spawned step's ranks outside PMI
// would run on, and srun, waiting for the coordinator, with them.
func (c *Coordinator) stopSpawned() {
	c.mu.Lock()
	var cmds []*exec.Cmd
	for cmd := range c.spawned.sruns {
		cmds = append(cmds, cmd)
	}
	c.mu.Unlock()
	for _, cmd := range cmds {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		c.crew.After(5*time.Second, func() {
			// Only while it is unreaped: its pid cannot be reused yet.
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.spawned.sruns[cmd] {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		})
	}
}

// tailBuffer keeps the end of what a process wrote, for its reason.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// last is the last non-empty line written.
func (t *tailBuffer) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.b), []byte("\n"))
	return strings.TrimSpace(string(lines[len(lines)-1]))
}
