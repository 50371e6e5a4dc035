#!/usr/bin/env bash
# Fetches and unpacks Debian's source package PKG at VERSION into DIR
# (apt-get source), adding deb-src lines for the release when apt has
# none (as root; otherwise it says what to add). The unpacked tree is
# DIR/<name>-<upstream version>; an existing one is kept.
#
# Usage: apt-source.sh PKG VERSION DIR    (PKG: the source package's name)
set -euo pipefail
[ $# = 3 ] || { echo "usage: apt-source.sh PKG VERSION DIR" >&2; exit 2; }
pkg=$1 v=$2 dir=$3
die() { echo "apt-source.sh: $*" >&2; exit 1; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cd "$dir"
if ! apt-get source --download-only "$pkg=$v" >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "apt has no deb-src for $pkg $v; add one (or run as root, which adds it)"
  . /etc/os-release
  cat > /etc/apt/sources.list.d/gopmi-deb-src.sources <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME $VERSION_CODENAME-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $VERSION_CODENAME-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -q >/dev/null
  apt-get source --download-only "$pkg=$v" >/dev/null 2>&1 || die "apt-get source $pkg=$v failed"
fi
dsc=${pkg}_${v#*:}.dsc
[ -f "$dsc" ] || die "no $dsc in $dir after apt-get source"
dpkg-source -x "$dsc" >/dev/null 2>"$dir/dpkg-source.log" || { cat "$dir/dpkg-source.log" >&2; die "dpkg-source -x $dsc failed"; }
