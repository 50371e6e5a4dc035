package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopmi/gopmi/integration/clients"
	"github.com/gopmi/gopmi/integration/internal/proc"
)

// lateRuns is how many runs each host and fence mode of the late read
// gets.
const lateRuns = 10

// Data put in a job stays readable until the job ends, whichever node
// finishes first (PMI-2 says so, and every KVS-based server keeps it):
// the ranks of a two-node job put and fence; the second node's ranks
// finalize and exit, and its PMI server with them; only then, each
// first-node rank reads one of theirs. In every fence mode (lazy: the
// fence was answered at once, and the second node still owed its part),
// under gopmi run -ppn 2 and srun -N 2 at fence-tree widths 16 (the
// nodes exchange) and 1 (the second node's fences go through the first),
// with Slurm's libpmi2; and the same with a PMIx client, whose data the
// node's PMIx server hands its backend, read by direct modex. The test
// sees, by pid, that the second node's ranks and server have exited
// before it lets the reads go.
func TestLateRead(t *testing.T) {
	begin(t)
	if err := pmixShim(); err != nil {
		t.Fatal(err)
	}
	pmi2 := prog(t, clients.PMI2Test)
	depart := buildPMIxClientFrom(t, filepath.Join("testdata", "src"), "pmix_depart")
	type host struct {
		name string
		argv func(prog []string) []string
		env  []string
	}
	hosts := []host{{
		name: "gopmi run",
		argv: func(prog []string) []string {
			return gopmiArgv(append([]string{"-timeout", "20s", "-ppn", "2", "-n", "4"}, prog...)...)
		},
	}}
	if !testing.Short() {
		c := slurm(t)
		for _, width := range []int{16, 1} {
			hosts = append(hosts, host{
				name: fmt.Sprintf("srun width=%d", width),
				argv: func(prog []string) []string {
					return append([]string{c.Bin("srun"), "--mpi=gopmi", "-N2", "--ntasks-per-node=2", "-n4"}, prog...)
				},
				env: append(c.Env(), "GOPMI_TREE_WIDTH="+strconv.Itoa(width), "GOPMI_TIMEOUT=20"),
			})
		}
	}
	for _, h := range hosts {
		slurm := h.env != nil
		for _, mode := range []string{"collect", "lazy", "modex", "pmix"} {
			c := lateCase{server: "gopmi-shim", gone: "step=late-gone", read: "step=late-read"}
			env := append(slices.Clone(h.env), "GOPMI_FENCE_MODE="+mode)
			c.prog = func(hold, wait string) []string {
				p := []string{pmi2, "late", "hold=" + hold, "wait=" + wait}
				if !slurm {
					p = append([]string{"-fence-mode", mode}, p...)
				}
				return h.argv(p)
			}
			switch {
			case mode == "pmix":
				c = lateCase{server: "gopmi-pmix", gone: "step=gone", read: "step=read",
					prog: func(hold, wait string) []string {
						p := []string{depart, "hold=" + hold, "wait=" + wait}
						if !slurm {
							p = append([]string{"-pmix"}, p...)
						}
						return h.argv(p)
					}}
				env = append(slices.Clone(h.env), "GOPMI_PMIX=1")
				if slurm {
					// It serves no task fds: its step directory names
					// its node.
					c.server, c.serves = "gopmi-slurm-pmi", regexp.MustCompile(`TMPDIR=[^\x00]*/gopmi-step-\d+\.\d+\.1-`)
				}
			case slurm:
				c.server = "gopmi-slurm"
			}
			t.Run(h.name+"/"+mode, func(t *testing.T) {
				for run := range lateRuns {
					c.once(t, run, env)
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// lateCase is one program of the late read under one host.
type lateCase struct {
	prog       func(hold, wait string) []string
	server     string         // the node server's command name
	serves     *regexp.Regexp // in its environment: it is the second node's; nil: it serves rank2:rank3
	gone, read string         // the words of a second-node rank's pid line, and of a read
}

var pidWord = regexp.MustCompile(` pid=(\d+)$`)

// once runs the late read once: it waits for the second node's ranks to
// say their pids, finds that node's server (it serves rank2:rank3), lets
// the ranks finalize and exit (hold), waits for all three processes to
// end, then lets the first node's ranks read (wait).
func (c lateCase) once(t *testing.T, run int, env []string) {
	t.Helper()
	dir := t.TempDir()
	hold, wait := filepath.Join(dir, "hold"), filepath.Join(dir, "wait")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := c.prog(hold, wait)
	cmd := exec.CommandContext(ctx, a[0], a[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "GOPMI_TEST_ALARM=60")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var all []string
	fail := func(format string, args ...any) {
		t.Helper()
		cancel()
		for l := range lines {
			all = append(all, l)
		}
		_ = cmd.Wait()
		t.Fatalf("run %d: %s\nstdout:\n%s\nstderr:\n%s", run, fmt.Sprintf(format, args...), strings.Join(all, "\n"), stderr.String())
	}
	var pids []int
	for len(pids) < 2 {
		l, ok := <-lines
		if !ok {
			fail("the job ended before ranks 2 and 3 said their pids")
		}
		all = append(all, l)
		if m := pidWord.FindStringSubmatch(l); m != nil && strings.Contains(l, c.gone) {
			pid, _ := strconv.Atoi(m[1])
			pids = append(pids, pid)
		}
	}
	// The second node's server: up while its ranks hold. gopmi run's
	// servers are its children; a stepd's, the one step's.
	serves := c.serves
	if serves == nil {
		serves = regexp.MustCompile(`LISTEN_FDNAMES=rank2:rank3\x00`)
	}
	var servers []int
	for _, pid := range processesOf(c.server, "") {
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if p, ok := proc.Stat(pid); ok && serves.Match(environ) && (!strings.HasPrefix(a[0], gopmiBin) || p.PPID == cmd.Process.Pid) {
			servers = append(servers, pid)
		}
	}
	if len(servers) != 1 {
		fail("found %d %s processes serving rank2:rank3 (%v), want 1", len(servers), c.server, servers)
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gone := append(pids, servers[0])
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range gone {
		for {
			if p, ok := proc.Stat(pid); !ok || !p.Alive() {
				break
			}
			if time.Now().After(deadline) {
				fail("process %d (a rank or the server of the second node) has not exited", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := os.WriteFile(wait, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		all = append(all, l)
	}
	err = cmd.Wait()
	reads := 0
	for _, l := range all {
		if strings.Contains(l, c.read) {
			reads++
		}
	}
	if err != nil || reads != 2 {
		fail("%d of 2 late reads, exit %v", reads, err)
	}
}
