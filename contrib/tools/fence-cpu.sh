#!/bin/sh
# fence-cpu.sh MPI NODES [ROUNDS] - what one PMI-2 fence costs a Slurm
# cluster on this machine: the wall time and the whole machine's CPU
# (/proc/stat, every process) per fence, from pmi2_bench at ROUNDS rounds
# against 1 round, one rank a node. Run it against the tests' lab
# (go run ./integration/internal/slurmlab/lab -bin bin -nodes 8
# -mpi-conf GopmiTreeWidth=2; export the SLURM_CONF it prints), for
# --mpi=gopmi or pmi2. Each round is two fences: the data fence and a
# barrier; the fence time printed is the data fence's.
set -eu
mpi=$1 nodes=$2 rounds=${3:-101}
bench=${BENCH:-integration/testdata/bin/pmi2_bench}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
run() {
	b0=$(busy)
	t0=$(date +%s%N)
	out=$(srun --mpi="$mpi" -N"$nodes" -n"$nodes" "$bench" k=8 g=1 v=200 rounds="$1" | grep '^bench')
	t1=$(date +%s%N)
	b1=$(busy)
	fence=$(echo "$out" | sed 's/.*fence_us=\([0-9]*\).*/\1/')
	echo "$fence $(((b1 - b0) * 1000000 / $(getconf CLK_TCK))) $(((t1 - t0) / 1000))"
}
set -- $(run 1) $(run "$rounds")
tick=$((rounds - 1))
awk -v f="$4" -v c1="$2" -v c2="$5" -v w1="$3" -v w2="$6" -v r="$rounds" -v d="$tick" -v n="$nodes" 'BEGIN {
	cpu = (c2 - c1) / d / 2 / 1000; # ms of CPU per fence, two fences a round
	printf "nodes=%d fence_ms=%.2f cpu_ms_per_fence=%.2f cpu_ms_per_node_fence=%.2f wall_ms_per_round=%.2f\n",
		n, f / r / 1000, cpu, cpu / n, (w2 - w1) / d / 1000
}'
