package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// find returns the cell of a launcher at a size of a section.
func (r *report) find(section string, n int, launcher string) *cell {
	for _, c := range r.Cells {
		if c.Section == section && c.N == n && c.Launcher == launcher {
			return c
		}
	}
	return nil
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func failText(c *cell) string {
	return "fail (" + shorten(c.Fail, 70) + ")"
}

func ok(c *cell) bool { return c != nil && c.Fail == "" && len(c.Samples) > 0 }

// okPerf is whether a cell has CPU measured under perf.
func okPerf(c *cell) bool {
	return c != nil && c.Fail == "" && c.PerfFail == "" && len(c.PerfRuns) > 0
}

// ratio formats other/ref (lower is better for times) and ref/other as the
// speedup.
func ratio(ref, other float64) (string, string) {
	if ref <= 0 || other <= 0 {
		return "-", "-"
	}
	return fmt.Sprintf("%.2f", other/ref), fmt.Sprintf("%.2fx", ref/other)
}

// ratioCols is, for each launcher in others, the two ratio columns of one
// measure against ref at a size of a section ("-" where either failed).
func (r *report) ratioCols(section string, n int, ref string, others []string, measure func(*cell) float64) []string {
	return r.ratioColsIf(section, n, ref, others, ok, measure)
}

// ratioColsIf is ratioCols for the cells where has holds.
func (r *report) ratioColsIf(section string, n int, ref string, others []string, has func(*cell) bool, measure func(*cell) float64) []string {
	a := r.find(section, n, ref)
	var cols []string
	for _, o := range others {
		if b := r.find(section, n, o); has(a) && has(b) {
			x, y := ratio(measure(a), measure(b))
			cols = append(cols, x, y)
		} else {
			cols = append(cols, "-", "-")
		}
	}
	return cols
}

func printReport(w io.Writer, cfg *config, r *report) {
	ref := r.Reference
	var names, others []string
	for _, l := range cfg.launchers {
		names = append(names, l.Name)
		if l.Name != ref && l.Name != cfg.floorLauncher {
			others = append(others, l.Name)
		}
	}
	fmt.Fprintf(w, "gopmi benchmark %s on %s: %s CPUs, Linux %s, MPICH %s\n",
		r.Started.Format("2006-01-02 15:04"), r.Host["hostname"], r.Host["cpus"], r.Host["kernel"], r.Host["mpich"])
	fmt.Fprintf(w, "launchers (taking turns run by run; ratios are against %s):\n", ref)
	for _, n := range names {
		fmt.Fprintf(w, "  %-6s %s\n", n, r.Launchers[n])
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if cfg.quick {
		fmt.Fprintln(w, "note: -quick smoke run: one run per cell, numbers are not comparable")
	}

	// (a) launch floor and hello wall time.
	mpi := "MPICH"
	if cfg.openmpi {
		mpi = "Open MPI (gopmi: through its PMIx face, gopmi-pmix or gopmi-slurm-pmix)"
	}
	fmt.Fprintf(w, "\n(a) launch: /bin/true (no PMI), %s hello (MPI_Init + Allreduce + Finalize): wall ms, median (min)\n", mpi)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"workload", "N", "runs"}
	head = append(head, names...)
	for _, o := range others {
		head = append(head, o+"/"+ref, "speedup")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, sec := range []cpuSection{{"true", "/bin/true", cfg.trueNs}, {"hello", "hello", cfg.helloNs}} {
		for _, n := range sec.ns {
			runs, _ := cfg.runsFor(n)
			row := []string{sec.label, fmt.Sprint(n), fmt.Sprint(runs)}
			for _, name := range names {
				row = append(row, wallText(r.find(sec.name, n, name)))
			}
			row = append(row, r.ratioCols(sec.name, n, ref, others, func(c *cell) float64 { return c.Median.WallMS })...)
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	tw.Flush()

	// (b) PMI-2 job.
	job := "a PMI-2 job on Slurm's libpmi2"
	if cfg.openmpi {
		job = "a PMIx job on OpenPMIx's client (pmix_bench: put, commit, collecting fence, get)"
	}
	fmt.Fprintf(w, "\n(b) %s, launch included: k=%d keys x %d B put per rank, fence, reads of g=%d peers' keys, %d rounds\n",
		job, cfg.k, cfg.v, cfg.g, cfg.r)
	fmt.Fprintf(w, "    rank 0's fence / get times summed over rounds; launcher wall; floor: the same job with no keys (init, fences, finalize);\n")
	fmt.Fprintf(w, "    data = wall - floor, the job's PMI data part; ms, medians\n")
	fl := cfg.floorLauncher
	if fl != "" {
		fmt.Fprintf(w, "    pmi = wall - %s's /bin/true at the same N: the whole PMI part of the step\n", fl)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := "N\tlauncher\truns\tfence\tget\twall\tfloor\tdata\twall vs " + ref + "\tdata vs " + ref
	if fl != "" {
		hdr += "\tpmi\tpmi vs " + ref
	}
	fmt.Fprintln(tw, hdr)
	for _, n := range cfg.pmi2Ns {
		for _, name := range names {
			if name == fl {
				continue
			}
			c := r.find("pmi2", n, name)
			if c == nil {
				continue
			}
			if !ok(c) {
				// Not tab-terminated: the reason must not widen a column.
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", n, name, len(c.Samples), failText(c))
				continue
			}
			floor, data := "-", "-"
			if f := r.find("pmi2floor", n, name); ok(f) {
				floor, data = fmt.Sprintf("%.1f", f.Median.WallMS), fmt.Sprintf("%.1f", c.Median.WallMS-f.Median.WallMS)
			}
			wall, dataRatio := "", ""
			if name != ref {
				if a := r.find("pmi2", n, ref); ok(a) {
					x, y := ratio(a.Median.WallMS, c.Median.WallMS)
					wall = x + " (" + y + ")"
					if da, db := r.dataMS(n, ref), r.dataMS(n, name); da > 0 && db > 0 {
						x, y = ratio(da, db)
						dataRatio = x + " (" + y + ")"
					}
				}
			}
			pmiCols := ""
			if fl != "" {
				pmi, pmiRatio := "-", ""
				if p := r.pmiMS(n, name, fl); p > 0 {
					pmi = fmt.Sprintf("%.1f", p)
					if pa := r.pmiMS(n, ref, fl); name != ref && pa > 0 {
						x, y := ratio(pa, p)
						pmiRatio = x + " (" + y + ")"
					}
				}
				pmiCols = "\t" + pmi + "\t" + pmiRatio
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s%s\n", n, name, len(c.Samples),
				float64(c.Median.FenceUS)/1000, float64(c.Median.GetUS)/1000, c.Median.WallMS, floor, data, wall, dataRatio, pmiCols)
		}
	}
	tw.Flush()

	// (c) process-manager CPU.
	bench := "pmi2_bench"
	if cfg.openmpi {
		bench = "pmix_bench"
	}
	cpuSections := []cpuSection{{"true", "/bin/true", cfg.trueNs}, {"hello", "hello", cfg.helloNs}, {"pmi2", bench, cfg.pmi2Ns}}
	if cfg.perf != nil {
		printPerfCPU(w, cfg, r, cpuSections, names, others)
	} else {
		fmt.Fprintf(w, "\n(c) process-manager CPU by process: not measured (perf not used: %s)\n", r.PerfNote)
	}
	if cfg.slurm {
		fmt.Fprintf(w, "\n(c') not measured under Slurm: the step daemons are not in srun's wait4 tree\n")
	} else {
		fmt.Fprintf(w, "\n(c') process-manager CPU estimate: launcher's wait4 tree user+sys minus the tasks' own\n")
		fmt.Fprintf(w, "     getrusage; includes each task's teardown after its report (end of MPI_Finalize, exit);\n")
		fmt.Fprintf(w, "     ms, medians of the timed runs\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head = []string{"workload", "N"}
		head = append(head, names...)
		for _, o := range others {
			head = append(head, o+"/"+ref, ref+"/"+o)
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for _, sec := range cpuSections {
			for _, n := range sec.ns {
				row := []string{sec.label, fmt.Sprint(n)}
				for _, name := range names {
					c := r.find(sec.name, n, name)
					switch {
					case ok(c):
						row = append(row, fmt.Sprintf("%.1f", c.Median.PMCPUMS))
					case c != nil && c.Fail != "":
						row = append(row, "fail")
					default:
						row = append(row, "-")
					}
				}
				row = append(row, r.ratioCols(sec.name, n, ref, others, func(c *cell) float64 { return c.Median.PMCPUMS })...)
				fmt.Fprintln(tw, strings.Join(row, "\t"))
			}
		}
		tw.Flush()
	}

	// (d) many small jobs at once.
	if cfg.burst > 0 {
		fmt.Fprintf(w, "\n(d) %d MPICH hello jobs of %d ranks started at once (a parameter sweep): wall ms until the last ended, median (min)\n", cfg.burst, cfg.burstN)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head = append([]string{"jobs", "runs"}, names...)
		for _, o := range others {
			head = append(head, o+"/"+ref, "speedup")
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		row := []string{fmt.Sprint(cfg.burst), fmt.Sprint(cfg.burstRuns)}
		for _, name := range names {
			row = append(row, wallText(r.find("burst", cfg.burst, name)))
		}
		row = append(row, r.ratioCols("burst", cfg.burst, ref, others, func(c *cell) float64 { return c.Median.WallMS })...)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		tw.Flush()
	}

	// (e) gopmi's binaries' start-up.
	if len(r.Startup) > 0 {
		fmt.Fprintf(w, "\n(e) start-up of gopmi's binaries, next to /bin/true: medians of %d runs; init = package init (GODEBUG=inittrace=1),\n", cfg.startRuns)
		fmt.Fprintf(w, "    page faults of the whole process\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "binary\ttimed\twall ms\tx /bin/true\tinit ms\tpage faults")
		floor := r.Startup[0].WallMS
		for _, row := range r.Startup {
			if row.Fail != "" {
				fmt.Fprintf(tw, "%s\t%s\tfail (%s)\n", row.Binary, row.What, shorten(row.Fail, 70))
				continue
			}
			x := "-"
			if floor > 0 {
				x = fmt.Sprintf("%.1f", row.WallMS/floor)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%.2f\t%.0f\n", row.Binary, row.What, row.WallMS, x, row.InitMS, row.Faults)
		}
		tw.Flush()
	}

	var fails []string
	for _, c := range r.Cells {
		if c.Fail != "" && !strings.HasPrefix(c.Fail, "not run:") {
			fails = append(fails, fmt.Sprintf("  %s N=%d %s: %s", c.Section, c.N, c.Launcher, shorten(c.Fail, 300)))
		}
		if c.PerfFail != "" {
			fails = append(fails, fmt.Sprintf("  %s N=%d %s under perf: %s", c.Section, c.N, c.Launcher, shorten(c.PerfFail, 300)))
		}
	}
	if len(fails) > 0 {
		slices.Sort(fails)
		fmt.Fprintln(w, "\nfailures:")
		for _, f := range fails {
			fmt.Fprintln(w, f)
		}
	}
	if cfg.jsonPath != "" {
		fmt.Fprintf(w, "\nJSON: %s\n", cfg.jsonPath)
	}
}

// wallText is a cell's wall time as the tables show it.
func wallText(c *cell) string {
	switch {
	case ok(c):
		return fmt.Sprintf("%.1f (%.1f)", c.Median.WallMS, c.MinMS)
	case c != nil && c.Fail != "":
		return failText(c)
	}
	return "-"
}

// dataMS is a launcher's PMI data part of the (b) job at n: its wall minus
// its floor's; 0 when either is missing.
func (r *report) dataMS(n int, launcher string) float64 {
	c, f := r.find("pmi2", n, launcher), r.find("pmi2floor", n, launcher)
	if !ok(c) || !ok(f) {
		return 0
	}
	return c.Median.WallMS - f.Median.WallMS
}

// pmiMS is a launcher's whole PMI part of the (b) job at n: its wall
// minus the floor launcher's /bin/true at n; 0 when either is missing.
func (r *report) pmiMS(n int, launcher, floor string) float64 {
	c, f := r.find("pmi2", n, launcher), r.find("true", n, floor)
	if !ok(c) || !ok(f) {
		return 0
	}
	return c.Median.WallMS - f.Median.WallMS
}

// cpuSection is a workload's rows in the (c) tables.
type cpuSection struct {
	name, label string
	ns          []int
}

// printPerfCPU is the (c) table: each launcher's process-manager CPU from
// perf samples, with ratios against the reference.
func printPerfCPU(w io.Writer, cfg *config, r *report, secs []cpuSection, names, others []string) {
	ref := r.Reference
	runs := fmt.Sprintf("%d runs", cfg.cpuRunsFor(1))
	if cfg.cpuRunsFor(1) == 1 {
		runs = "1 run"
	}
	for _, sec := range secs {
		if slices.ContainsFunc(sec.ns, func(n int) bool { return cfg.cpuRunsFor(n) != cfg.cpuRunsFor(1) }) {
			runs += ", N >= 512: 1"
			break
		}
	}
	fmt.Fprintf(w, "\n(c) process-manager CPU by process (perf task-clock samples, %s): ms, medians\n", runs)
	var pm []string
	for _, name := range names {
		pm = append(pm, name+" = "+strings.Join(r.Roles[name].PM, " + "))
	}
	fmt.Fprintf(w, "    process manager: %s\n", strings.Join(pm, "; "))
	fmt.Fprintf(w, "    a task's fork and exec count for the process that starts it\n")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := append([]string{"workload", "N"}, names...)
	for _, o := range others {
		head = append(head, o+"/"+ref)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, sec := range secs {
		for _, n := range sec.ns {
			row := []string{sec.label, fmt.Sprint(n)}
			for _, name := range names {
				c := r.find(sec.name, n, name)
				switch {
				case okPerf(c):
					row = append(row, fmt.Sprintf("%.1f", c.PMProperCPUMS))
				case c != nil && (c.Fail != "" || c.PerfFail != ""):
					row = append(row, "fail")
				default:
					row = append(row, "-")
				}
			}
			ratios := r.ratioColsIf(sec.name, n, ref, others, okPerf, func(c *cell) float64 { return c.PMProperCPUMS })
			for i := 0; i < len(ratios); i += 2 {
				row = append(row, joinRatio(ratios[i], ratios[i+1]))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	tw.Flush()
}

// joinRatio puts ratio's two forms in one column: "1.50 (0.67x)".
func joinRatio(x, y string) string {
	if x == "-" {
		return "-"
	}
	return x + " (" + y + ")"
}
