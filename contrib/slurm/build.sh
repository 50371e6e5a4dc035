#!/usr/bin/env bash
# Builds mpi_gopmi.so (default bin/mpi_gopmi.so) against the exact Slurm release
# installed here: Slurm loads an MPI plugin only if it was built for its
# own version (plugin_version is compared in full), and the plugin needs
# Slurm's internal headers, which no Debian -dev package ships. So this
# fetches Debian's source package of the installed release
# (contrib/tools/apt-source.sh), configures it once (cached in $CACHE),
# and compiles the one file.
#
# Usage: build.sh [OUT]    env: CACHE (default .tools/slurm), BINDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/mpi_gopmi.so}
cache=${CACHE:-$here/../../.tools/slurm}
bindir=${BINDIR:-/usr/local/bin}

die() { echo "build.sh: $*" >&2; exit 1; }

pkg=""
for p in slurmd slurm-client slurmctld; do
  if v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) && [ -n "$v" ]; then pkg=$p; break; fi
done
[ -n "$pkg" ] || die "no Slurm installed (apt-get install slurm-wlm): the plugin must be built for the Slurm it runs in"
upstream=${v%%-*}
upstream=${upstream#*:}

src=$cache/slurm-wlm-$upstream
build=$cache/build-$v
mkdir -p "$cache"
if [ ! -d "$src" ]; then
  "$here/../tools/apt-source.sh" slurm-wlm "$v" "$cache"
  [ -d "$src" ] || die "the source package did not unpack into $src"
fi
if [ ! -f "$build/slurm/slurm_version.h" ]; then
  mkdir -p "$build"
  ( cd "$build" && "$src/configure" --prefix=/usr --libdir=/usr/lib/x86_64-linux-gnu \
      --sysconfdir=/etc/slurm --without-rpath --disable-debug --enable-multiple-slurmd \
      > configure.log 2>&1 ) || die "configure failed: see $build/configure.log"
fi

# The headers must be the installed release's, to the micro version.
num=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\)/\1/p' "$build/slurm/slurm_version.h")
[ -n "$num" ] || die "no SLURM_VERSION_NUMBER in $build/slurm/slurm_version.h"
have=$(( 0x$num >> 16 )).$(( (0x$num >> 8) & 255 )).$(( 0x$num & 255 ))
have=$(printf '%02d.%02d.%d' ${have//./ })
for d in slurmd slurmctld; do
  if command -v $d >/dev/null; then
    running=$($d -V | awk '{print $2}')
    [ "$have" = "$running" ] || die "source is Slurm $have but $d is $running: the plugin must match the installed Slurm exactly"
  fi
done

mkdir -p "$(dirname "$out")"
gcc -shared -fPIC -O2 -Wall -Werror -Wno-unused-result -DHAVE_CONFIG_H \
  -DGOPMI_BINDIR="\"$bindir\"" -I"$build" -I"$src" -o "$out" "$here"/*.c -lpthread
echo "built $out for Slurm $have (gopmi binaries in $bindir)"
