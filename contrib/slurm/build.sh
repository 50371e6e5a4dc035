#!/usr/bin/env bash
# Builds mpi_gopmi.so (default bin/mpi_gopmi.so) for one Slurm release,
# 22.05 through 25.11: Slurm loads an MPI plugin only if it was built for
# its own version (plugin_version is compared in full), and the plugin
# needs Slurm's internal headers, which no -dev package ships. So it is
# built against a configured Slurm source tree of the release it runs in:
#
#   SLURM_SRC=DIR     a site's configured source tree (./configure was run
#                     in it); its install is the Makefile's prefix
#   SLURM_PREFIX=DIR  an install whose configured source is DIR/src (as
#                     ../shared/vendor/slurm/build.sh leaves /opt/slurm-*)
#   neither           Debian's installed slurm-wlm: this fetches Debian's
#                     source package of that release (contrib/tools/apt-
#                     source.sh) and configures it once, cached in $CACHE
#
# It refuses, in one line, a tree whose release is not the one the
# install's slurmd runs ($prefix/sbin/slurmd -V, else the slurmd on PATH).
# What differs between releases is in slurm_compat.h.
#
# Usage: build.sh [OUT]    env: SLURM_SRC, SLURM_PREFIX, CACHE (default
# .tools/slurm), BINDIR (where the plugin finds gopmi's binaries),
# GOPMI_VERSION (the gopmi release it goes with; gopmi-slurm check)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/mpi_gopmi.so}
cache=${CACHE:-$here/../../.tools/slurm}
bindir=${BINDIR:-/usr/local/bin}
version=${GOPMI_VERSION:-$(git -C "$here" describe --tags --always --dirty 2>/dev/null || echo dev)}

die() { echo "build.sh: $*" >&2; exit 1; }

slurm_src=${SLURM_SRC:-}
prefix=${SLURM_PREFIX:-}
if [ -z "$slurm_src" ] && [ -n "$prefix" ]; then
  slurm_src=$prefix/src
  [ -d "$slurm_src" ] || die "SLURM_PREFIX=$prefix has no configured source in $slurm_src: give its tree as SLURM_SRC"
fi

if [ -n "$slurm_src" ]; then
  src=$(cd "$slurm_src" 2>/dev/null && pwd) || die "SLURM_SRC=$slurm_src is not a directory"
  build=$src
  [ -f "$build/config.h" ] && [ -f "$build/slurm/slurm_version.h" ] ||
    die "$src is not a configured Slurm source tree (no config.h, slurm/slurm_version.h): run its ./configure first"
  if [ -z "$prefix" ]; then
    prefix=$(sed -n 's/^prefix = //p' "$build/Makefile" 2>/dev/null | head -1 || true)
  fi
else
  pkg=""
  for p in slurmd slurm-client slurmctld; do
    if v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) && [ -n "$v" ]; then pkg=$p; break; fi
  done
  [ -n "$pkg" ] || die "no Slurm found: install slurm-wlm, or give a site's configured source tree as SLURM_SRC= (or its install as SLURM_PREFIX=)"
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
  prefix=/usr
fi

# The headers must be the install's release, to the micro version.
num=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\)/\1/p' "$build/slurm/slurm_version.h")
[ -n "$num" ] || die "no SLURM_VERSION_NUMBER in $build/slurm/slurm_version.h"
have=$(printf '%02d.%02d.%d' $(( 0x$num >> 16 )) $(( (0x$num >> 8) & 255 )) $(( 0x$num & 255 )))
slurmd=""
if [ -n "$prefix" ] && [ -x "$prefix/sbin/slurmd" ]; then
  slurmd=$prefix/sbin/slurmd
elif command -v slurmd >/dev/null; then
  slurmd=$(command -v slurmd)
fi
if [ -n "$slurmd" ]; then
  running=$("$slurmd" -V 2>/dev/null | awk '{print $2}' || true)
  [ -n "$running" ] || die "$slurmd -V says no release: is it a working slurmd?"
  [ "$have" = "$running" ] || die "the source is Slurm $have but $slurmd is $running: build against the tree of the Slurm that runs (SLURM_SRC= or SLURM_PREFIX=)"
fi

mkdir -p "$(dirname "$out")"
gcc -shared -fPIC -O2 -Wall -Werror -Wno-unused-result -DHAVE_CONFIG_H \
  -DGOPMI_BINDIR="\"$bindir\"" -DGOPMI_VERSION="\"$version\"" -I"$build" -I"$src" -o "$out" "$here"/*.c -lpthread
echo "built $out for Slurm $have (gopmi binaries in $bindir)"
