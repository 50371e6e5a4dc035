package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopmi/gopmi/integration/internal/proc"
)

// ErrTimeout reports that a run did not end before its context's deadline;
// the launcher's whole process tree was killed.
var ErrTimeout = errors.New("run timed out")

// Launcher starts N copies of a program: a name for tables and a command
// template in which "{n}" stands for the number of tasks. The program and
// its arguments follow the template.
type Launcher struct {
	// Name labels the launcher in reports ("hydra", "gopmi", "srun").
	Name string
	// Template is the command before the program, e.g.
	// ["mpiexec.hydra", "-n", "{n}"].
	Template []string
}

// Hydra is MPICH's own launcher, the reference every measurement is
// compared with.
var Hydra = Launcher{Name: "hydra", Template: []string{"mpiexec.hydra", "-n", "{n}"}}

// ParseLauncher reads "name=command template", e.g.
// "gopmi=./bin/gopmi run -n {n}". The template is split on white space;
// it must contain {n}.
func ParseLauncher(spec string) (Launcher, error) {
	name, tmpl, ok := strings.Cut(spec, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return Launcher{}, fmt.Errorf("parse launcher %q: want name=command template", spec)
	}
	fields := strings.Fields(tmpl)
	if len(fields) == 0 {
		return Launcher{}, fmt.Errorf("parse launcher %q: empty command", spec)
	}
	if !strings.Contains(tmpl, "{n}") {
		return Launcher{}, fmt.Errorf("parse launcher %q: template has no {n}", spec)
	}
	return Launcher{Name: name, Template: fields}, nil
}

// String gives the spec form ParseLauncher reads.
func (l Launcher) String() string {
	return l.Name + "=" + strings.Join(l.Template, " ")
}

// Argv is the full command line that starts n tasks of prog with args.
func (l Launcher) Argv(n int, prog string, args ...string) []string {
	out := make([]string, 0, len(l.Template)+1+len(args))
	for _, f := range l.Template {
		out = append(out, strings.ReplaceAll(f, "{n}", strconv.Itoa(n)))
	}
	out = append(out, prog)
	return append(out, args...)
}

// Result is what one launcher run produced.
type Result struct {
	// Argv is the command that ran.
	Argv []string
	// Stdout and Stderr hold everything the launcher and the tasks wrote.
	Stdout, Stderr string
	// ExitCode is the launcher's exit status; -1 when it died of a signal
	// (including the kill after a timeout).
	ExitCode int
	// Signal is the signal the launcher died of, 0 if it exited.
	Signal syscall.Signal
	// Wall is the time from start to the launcher's exit.
	Wall time.Duration
	// TreeCPU is user+system CPU of the launcher and every descendant it
	// (or they) waited for: wait4's rusage of the launcher.
	TreeCPU time.Duration
	// TimedOut is set when ctx ended before the launcher and Run killed
	// the process tree.
	TimedOut bool
}

// RunOptions tunes Run.
type RunOptions struct {
	// Env is added to the current environment.
	Env []string
	// Dir is the working directory; empty means the current one.
	Dir string
	// KillGrace is how long Run waits for the output pipes after the
	// launcher exits or is killed (orphaned tasks may hold them); 5s if 0.
	KillGrace time.Duration
	// Credential, when set, runs argv as that user (the caller is root).
	Credential *syscall.Credential
}

// Run starts argv and waits for it. It returns a Result and a nil error
// whatever the exit status; the error is non-nil only when the command
// cannot start or ctx ends first (then it wraps ErrTimeout, or ctx's error,
// and the Result holds the output so far).
//
// Unless opts.Env sets GOPMI_TEST_ALARM, Run sets it to 80% of the time left
// before ctx's deadline so the tasks fail by themselves, with a line saying
// so, before Run has to kill them.
func Run(ctx context.Context, argv []string, opts RunOptions) (Result, error) {
	res := Result{Argv: argv, ExitCode: -1}
	if len(argv) == 0 {
		return res, errors.New("run: empty command")
	}
	cmd := exec.Command(lookPathIn(argv[0], opts.Env), argv[1:]...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), opts.Env...)
	if !hasEnv(opts.Env, "GOPMI_TEST_ALARM") {
		if dl, ok := ctx.Deadline(); ok {
			secs := int(time.Until(dl).Seconds() * 0.8)
			cmd.Env = append(cmd.Env, "GOPMI_TEST_ALARM="+strconv.Itoa(max(secs, 2)))
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Own process group, so a kill reaches the launcher's direct helpers;
	// hydra's proxy calls setsid, so killTree walks /proc as well.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: opts.Credential}
	grace := opts.KillGrace
	if grace == 0 {
		grace = 5 * time.Second
	}
	cmd.WaitDelay = grace

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("run %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		killTree(cmd.Process.Pid)
		<-done // the timeout, not how the killed tree exited, is the news
		res.Wall = time.Since(start)
		fill(&res, cmd, &stdout, &stderr)
		res.TimedOut = true
		res.ExitCode = -1
		cause := ctx.Err()
		if errors.Is(cause, context.DeadlineExceeded) {
			cause = ErrTimeout
		}
		return res, fmt.Errorf("run %s: %w after %s", strings.Join(argv, " "), cause, res.Wall.Round(time.Millisecond))
	}
	res.Wall = time.Since(start)
	fill(&res, cmd, &stdout, &stderr)
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) && !errors.Is(werr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("run %s: %w", argv[0], werr)
	}
	// Tasks left in the launcher's group (a broken PM) must not outlive the
	// run. Only the group: the launcher's pid is reaped, so walking /proc
	// from it could reach an unrelated process that reused the number; a
	// process group id stays reserved while any member lives.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return res, nil
}

func fill(res *Result, cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	res.Stdout = stdout.String()
	res.Stderr = stderr.String()
	if ps := cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal()
		}
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.TreeCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// killTree SIGKILLs the process group of root and every process below root
// in the /proc parent links. root must not have been reaped yet. The tree is
// collected before anything is killed, so children are found before they
// are re-parented. Without /proc only the group is reached.
func killTree(root int) {
	victims, _ := proc.Descendants(root)
	_ = syscall.Kill(-root, syscall.SIGKILL)
	for _, p := range victims {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// Lines returns the lines of s that start with prefix.
func Lines(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Fields parses the "key=value" words of a line; other words are ignored.
func Fields(line string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TaskCPU sums the "cpu_us=N" lines of a run's stdout and counts them.
func TaskCPU(stdout string) (total time.Duration, count int) {
	for _, l := range Lines(stdout, "cpu_us=") {
		us, err := strconv.ParseInt(Fields(l)["cpu_us"], 10, 64)
		if err != nil {
			continue
		}
		total += time.Duration(us) * time.Microsecond
		count++
	}
	return total, count
}

// Summary is a one-line description of a failed run for reports: the exit
// status and the first line of stderr that names an error (or a fail line
// from the tasks).
func (r Result) Summary() string {
	var why string
	if l := Lines(r.Stdout, "fail "); len(l) > 0 {
		why = l[0]
	}
	if why == "" {
		for _, l := range strings.Split(r.Stderr, "\n") {
			lt := strings.ToLower(l)
			if strings.Contains(lt, "error") || strings.Contains(lt, "unrecognized") || strings.Contains(lt, "fail") {
				why = strings.TrimSpace(l)
				break
			}
		}
	}
	if why == "" {
		why = strings.TrimSpace(firstNonEmpty(r.Stderr))
	}
	if why == "" {
		why = "no error output"
	}
	if len(why) > 160 {
		why = why[:160] + "..."
	}
	if r.TimedOut {
		return fmt.Sprintf("timeout after %s: %s", r.Wall.Round(time.Second), why)
	}
	if r.Signal != 0 {
		return fmt.Sprintf("killed by signal %d (%v): %s", int(r.Signal), r.Signal, why)
	}
	return fmt.Sprintf("exit %d: %s", r.ExitCode, why)
}

func firstNonEmpty(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return ""
}

// lookPathIn is name found on the PATH env sets (a Slurm cluster of
// another release puts its commands first), else name as it is, for
// exec's own lookup.
func lookPathIn(name string, env []string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	path := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if p, err := exec.LookPath(filepath.Join(d, name)); err == nil {
			return p
		}
	}
	return name
}
