package main

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
	"time"

	"github.com/gopmi/gopmi/integration/clients"
)

// perfPeriodNS is the task-clock sampling period: one sample per 0.1 ms of
// CPU a thread uses, so a comm's CPU is its sample count times 0.1 ms.
const perfPeriodNS = 100000

// commLen is how much of a process name the kernel keeps (TASK_COMM_LEN
// less the NUL).
const commLen = 15

// perfComms are perf's own processes: perf record, and its child until the
// child has exec'd the launcher.
var perfComms = map[string]bool{"perf": true, "perf-exec": true}

// roles is which processes of a launcher, by comm, are its process
// manager. The key is the base name of the launcher's command. For hydra,
// mpiexec and its proxies; for gopmi, `gopmi run`, which serves a job on
// one node itself and, with -ppn, starts a gopmi-shim and its
// gopmi-rm-local backend per simulated node (for a PMIx job, a gopmi-pmix
// on every node, with that backend in its own process). srun's step daemon runs
// under slurmd, outside the launcher's tree: under Slurm perf samples the
// whole machine (perfCPU.all), and srun's PM is srun, every slurmstepd
// (which launches the tasks under any --mpi, and runs mpi/pmi2's agent
// threads) and gopmi's processes under --mpi=gopmi (gopmi-slurm, or
// gopmi-slurm-pmix for a PMIx step).
var roles = map[string]roleSplit{
	"mpiexec.hydra": {PM: []string{"mpiexec.hydra", "hydra_pmi_proxy"}},
	"gopmi":         {PM: []string{"gopmi", "gopmi-shim", "gopmi-rm-local", "gopmi-pmix"}},
	"srun":          {PM: []string{"srun", "slurmstepd", "gopmi-slurm", comm("gopmi-slurm-pmix")}},
}

// roleSplit names, by comm, the processes of a launcher's process
// manager.
type roleSplit struct {
	PM []string `json:"pm_proper"`
}

// comm is the name the kernel gives a process that executes file.
func comm(file string) string {
	b := filepath.Base(file)
	if len(b) > commLen {
		b = b[:commLen]
	}
	return b
}

// rolesOf is the role split of l; a launcher not in roles is all PM,
// under the name of its command.
func rolesOf(l clients.Launcher) roleSplit {
	c := comm(l.Template[0])
	if r, ok := roles[c]; ok {
		return r
	}
	return roleSplit{PM: []string{c}}
}

// sum adds the ms of the given comms.
func sum(cpu map[string]float64, comms []string) float64 {
	var t float64
	for _, c := range comms {
		t += cpu[c]
	}
	return t
}

// perfCPU samples the CPU of a command's processes with perf.
type perfCPU struct {
	bin string // the perf command
	dir string // where sample files go; the caller removes it
	seq int    // numbers the sample files
	all bool   // sample every CPU (perf record -a), not only argv's tree
}

// record is argv under `perf record`, writing to data: task-clock samples of
// every thread of argv and its descendants (with all, of every process
// while argv runs).
func (p *perfCPU) record(data string, argv []string) []string {
	out := []string{p.bin, "record", "-q", "-e", "task-clock", "-c", strconv.Itoa(perfPeriodNS), "-o", data}
	if p.all {
		out = append(out, "-a")
	}
	out = append(out, "--")
	return append(out, argv...)
}

// run runs argv under perf record with the time-out given and returns the
// run's result with its CPU ms by comm (perf's own left out). A nil error
// with a nil map means the run itself went wrong: the caller checks res.
func (p *perfCPU) run(ctx context.Context, argv []string, timeout time.Duration) (clients.Result, map[string]float64, error) {
	p.seq++
	data := filepath.Join(p.dir, fmt.Sprintf("run-%d.data", p.seq))
	defer os.Remove(data)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	res, err := clients.Run(rctx, p.record(data, argv), clients.RunOptions{})
	cancel()
	if err != nil || res.ExitCode != 0 {
		return res, nil, err
	}
	cpu, err := p.report(ctx, data)
	return res, cpu, err
}

// report reads a sample file: CPU ms by comm, perf's own left out.
func (p *perfCPU) report(ctx context.Context, data string) (map[string]float64, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, p.bin, "report", "-i", data, "--sort", "comm", "-n", "--stdio", "--no-children", "-g", "none")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("perf report: %w: %s", err, shorten(strings.TrimSpace(stderr.String()), 200))
	}
	samples, err := parsePerfReport(stdout.String())
	if err != nil {
		return nil, err
	}
	return cpuMS(samples), nil
}

// cpuMS turns sample counts by comm into CPU ms, perf's own left out.
func cpuMS(samples map[string]int) map[string]float64 {
	cpu := map[string]float64{}
	for c, n := range samples {
		if !perfComms[c] {
			cpu[c] = float64(n) * perfPeriodNS / 1e6
		}
	}
	return cpu
}

// probe records a trivial command and reads it back: nil when perf works.
func (p *perfCPU) probe(ctx context.Context) error {
	if _, err := exec.LookPath(p.bin); err != nil {
		return fmt.Errorf("%w (install linux-perf)", err)
	}
	data := filepath.Join(p.dir, "probe.data")
	defer os.Remove(data)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	argv := p.record(data, []string{"true"})
	var stderr bytes.Buffer
	cmd := exec.CommandContext(rctx, argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = "no error output"
		}
		return fmt.Errorf("perf record: %w: %s", err, shorten(why, 200))
	}
	_, err := p.report(ctx, data)
	return err
}

// parsePerfReport reads the output of `perf report --sort comm -n --stdio`:
// sample counts by comm. Lines starting with '#' and blank lines are
// headers; every other line must be "percent% samples comm". Lost samples
// are an error, since they would go uncounted.
func parsePerfReport(out string) (map[string]int, error) {
	samples := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		if lost, ok := strings.CutPrefix(t, "# Total Lost Samples:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(lost)); err != nil || n != 0 {
				return nil, fmt.Errorf("perf report: lost samples: %q", t)
			}
		}
		if t == "" || t[0] == '#' {
			continue
		}
		pct, rest, _ := strings.Cut(t, " ")
		count, name, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		name = strings.TrimSpace(name)
		n, err := strconv.Atoi(count)
		if !strings.HasSuffix(pct, "%") || err != nil || n < 0 || name == "" {
			return nil, fmt.Errorf("perf report: unexpected line %q", line)
		}
		samples[name] += n
	}
	if len(samples) == 0 {
		return nil, errors.New("perf report: no samples")
	}
	return samples, nil
}

// perfDecision is whether (c) samples with perf given the -perf mode and
// the probe's outcome (nil: perf works; ignored for off), and if not, why.
func perfDecision(mode string, probeErr error) (use bool, note string, err error) {
	switch {
	case mode == "off":
		return false, "-perf off", nil
	case probeErr == nil:
		return true, "", nil
	case mode == "on":
		return false, "", fmt.Errorf("-perf on: perf does not work here: %w", probeErr)
	default:
		return false, "perf does not work here: " + probeErr.Error(), nil
	}
}
