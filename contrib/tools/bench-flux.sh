#!/bin/sh
# bench-flux.sh BINDIR PLUGIN [ROUNDS]: make bench's Flux rows. In Flux
# instances of 2 and 4 brokers on this host, flux run -o pmi=gopmi beside
# Flux's own PMI (the builtin pmi-simple, and flux-pmix's -o pmi=pmix for
# Open MPI) in one run, the commands interleaved (contrib/tools/cmp.py):
# MPICH's hello, a libpmi2 job that puts, fences and reads its peers' keys
# (Flux's own libpmi2.so serves it under pmi-simple), Open MPI's hello;
# and each instance's floor, the same launch of /bin/true. It prints each
# median and the paired ratio gopmi/Flux (new/old).
#   BINDIR: gopmi's binaries (make build's bin/); PLUGIN: gopmi_flux.so
#   (make flux-plugin); FLUX: the flux command (default: on PATH, else
#   /opt/flux/bin/flux).
set -eu
bindir=$(cd "$1" && pwd)
plugin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
rounds=${3:-21}
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../integration/testdata/src
flux=${FLUX:-$(command -v flux || echo /opt/flux/bin/flux)}
work=$(mktemp -d)
pids=
cleanup() {
	# An instance ends when its initial program does (flux-instance.sh's
	# sleep); flux start is killed if it has not ended 15 s later. (IFS
	# may be the newline cmp.py's arguments were split on.)
	IFS=' '
	for n in 2 4; do
		test -e "$work/uri.$n.pid" && kill "$(cat "$work/uri.$n.pid")" 2>/dev/null || true
	done
	i=0
	while [ $i -lt 150 ]; do
		alive=
		for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && break
		i=$((i + 1))
		sleep 0.1
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

mpicc.mpich -O2 -I"$src" -o "$work/mpi_hello" "$src/mpi_hello.c"
gcc -O2 -I"$src" -o "$work/pmi2_bench" "$src/pmi2_bench.c" -lpmi2
ompi=
if command -v mpicc.openmpi >/dev/null && test -x "$bindir/gopmi-slurm-pmix" && test -e "$(dirname "$flux")/../lib/flux/shell/plugins/pmix.so"; then
	mpicc.openmpi -O2 -I"$src" -o "$work/ompi_hello" "$src/mpi_hello.c"
	ompi=1
fi
echo "plugin.load { file = \"$plugin\" }" > "$work/gopmi.lua"

for n in 2 4; do
	PATH=$(dirname "$flux"):$PATH "$flux" start --test-size=$n /bin/sh "$here/flux-instance.sh" "$work/uri.$n" >"$work/flux.$n.log" 2>&1 &
	pids="$pids $!"
done
for n in 2 4; do
	i=0
	until test -e "$work/uri.$n"; do
		i=$((i + 1))
		if [ $i -gt 600 ]; then echo "bench-flux: the $n-broker instance did not start:"; cat "$work/flux.$n.log"; exit 1; fi
		sleep 0.1
	done
done
u2=$(cat "$work/uri.2") u4=$(cat "$work/uri.4")
own="-o cpu-affinity=off"
gopmi="-o cpu-affinity=off -o pmi=gopmi -o userrc=$work/gopmi.lua --env=GOPMI_BINDIR=$bindir"
bench="k=8 g=16 v=200 rounds=1"
row() { # row NAME URI NODES RANKS FLUXFLAGS PROG...
	name=$1 uri=$2 nodes=$3 ranks=$4 flags=$5; shift 5
	set -- "old-$name" "FLUX_URI=$uri $flux run -N$nodes -n$ranks $flags $*" "new-$name" "FLUX_URI=$uri $flux run -N$nodes -n$ranks $gopmi $*"
	printf '%s\n' "$@"
}
args=$(
	printf '%s\n' floor-2x8 "FLUX_URI=$u2 $flux run -N2 -n8 $own /bin/true" floor-4x16 "FLUX_URI=$u4 $flux run -N4 -n16 $own /bin/true"
	row hello-2x8 "$u2" 2 8 "$own" "$work/mpi_hello"
	row hello-4x16 "$u4" 4 16 "$own" "$work/mpi_hello"
	row pmi2-2x16 "$u2" 2 16 "$own" "$work/pmi2_bench $bench"
	row pmi2-4x32 "$u4" 4 32 "$own" "$work/pmi2_bench $bench"
	if [ -n "$ompi" ]; then
		row ompi-2x8 "$u2" 2 8 "$own -o pmi=pmix --env=OMPI_MCA_btl=self,tcp" "$work/ompi_hello"
		row ompi-4x8 "$u4" 4 8 "$own -o pmi=pmix --env=OMPI_MCA_btl=self,tcp" "$work/ompi_hello"
	fi
)
echo "bench: flux run -o pmi=gopmi (new) against Flux's own PMI (old: pmi-simple; pmix for Open MPI), $rounds rounds, paired new/old"
# One argument per line (no argument holds a newline).
IFS='
'
# shellcheck disable=SC2086
python3 "$here/cmp.py" "$rounds" $args
