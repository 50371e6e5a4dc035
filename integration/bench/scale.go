package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gopmi/gopmi/hostrm/slurm/slurmtest"
)

// runScale is -scale: the Slurm backend's real code (coordinator, nodes,
// fence tree, authenticated links) at each size and width in this one
// process (package slurmtest), one line each. The *_ms figures are a lower
// bound of what a cluster of that many hosts would see, estimated from
// costs measured here uncontended (printed first); sim_*_ms are the
// simulation's own wall times, every node's work done in turn on this
// machine's cores.
func runScale(ctx context.Context, c *config, stdout, stderr io.Writer) int {
	costs, err := slurmtest.Calibrate(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bench: -scale: calibrate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "scale costs hop_us=%.1f part_us=%.1f read_us=%.1f dial_us=%.1f byte_ns=%.3f (measured here uncontended; see package slurmtest)\n",
		us(costs.Hop), us(costs.Part), us(costs.Read), us(costs.Dial), costs.ByteNs)
	// The model against the real thing: the lab's eight-node cluster at
	// width 2, one rank a node, pmi2_bench k=8 v=200 (about 1.7 KB of
	// KVS a node); docs/perf/slurm.md has the measured fence beside it.
	lab := slurmtest.Model(costs, 8, 2, 1700, 0)
	fmt.Fprintf(stdout, "scale model nodes=8 width=2 part_bytes=1700 collect_ms=%.1f (the lab's 8-node fence, docs/perf/slurm.md)\n", ms(lab.Collect))
	code := 0
	for _, w := range c.scaleWidths {
		for _, n := range c.scaleNs {
			o := slurmtest.Options{Nodes: n, Width: w, Rounds: 3}
			if c.quick {
				o.Rounds = 1
			}
			r, err := slurmtest.Run(ctx, o)
			if err != nil {
				fmt.Fprintf(stderr, "bench: -scale nodes=%d width=%d: %v\n", n, w, err)
				code = 1
				continue
			}
			e := slurmtest.Model(costs, n, w, 64, 4)
			fmt.Fprintf(stdout, "scale nodes=%d width=%d depth=%d barrier_ms=%.1f collect_ms=%.1f modex_ms=%.1f coord_conns=%d node_mib=%.2f node_files=%.1f sim_barrier_ms=%.1f sim_collect_ms=%.1f sim_modex_ms=%.1f sim_setup_ms=%.0f sim_cpu_us_node=%.0f\n",
				n, w, r.Depth, ms(e.Barrier), ms(e.Collect), ms(e.Modex), r.CoordConns, r.NodeMiB, r.NodeFiles,
				ms(r.Barrier), ms(r.Collect), ms(r.Modex), ms(r.Setup), us(r.CollectCPU))
		}
	}
	return code
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
