#!/usr/bin/env bash
# Builds OpenPMIx's own test clients (test/simple in Debian's pmix source
# package, of the libpmix installed here) into OUT, against the installed
# libpmix: simpclient, simppub, simpdyn, simptool, simpdmodex unless
# named. They include libpmix's internal headers, which Debian's
# libpmix-dev ships under <includedir>/pmix, and "include/pmix.h", which
# OUT/include (a link to <includedir>) provides.
#
# Usage: pmix-simple.sh OUT [PROG...]    env: CACHE (default .tools/pmix)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: pmix-simple.sh OUT [PROG...]" >&2; exit 2; }
out=$1; shift
progs=${*:-simpclient simppub simpdyn simptool simpdmodex}
cache=${CACHE:-$here/../../.tools/pmix}
die() { echo "pmix-simple.sh: $*" >&2; exit 1; }

# The source package's version (a binary rebuild adds +bN to the binary's).
v=$(dpkg-query -W -f='${source:Version}' libpmix-dev 2>/dev/null) || die "libpmix-dev is not installed (make deps)"
upstream=${v%%-*}
upstream=${upstream#*:}
src=$cache/pmix-$upstream
if [ ! -d "$src/test/simple" ]; then
  "$here/apt-source.sh" pmix "$v" "$cache"
  [ -d "$src/test/simple" ] || die "the source package did not unpack into $src"
fi
inc=$(pkg-config --variable=includedir pmix) || die "pkg-config knows no pmix (libpmix-dev)"
mkdir -p "$out"
ln -sfn "$inc" "$out/include"
# Built for another libpmix: build again.
[ "$(cat "$out/.pmix-version" 2>/dev/null)" = "$v" ] || rm -f "$out/.pmix-version"
for p in $progs; do
  [ -f "$out/.pmix-version" ] && [ -x "$out/$p" ] && continue
  # shellcheck disable=SC2046 # pkg-config's flags are words
  gcc -O1 -w -I"$out" -I"$inc/pmix" -o "$out/$p" "$src/test/simple/$p.c" $(pkg-config --cflags --libs pmix) \
    || die "gcc $p failed"
done
echo "$v" > "$out/.pmix-version"
echo "built $progs in $out from pmix $v"
