#!/usr/bin/env bash
# Installs the Debian packages zero needs that are missing (as root), or prints the apt-get line.
# Called by `make deps`, and so first by `make test` and `make demo`.
set -eu
# One package per line, so that branches adding packages merge cleanly.
pkgs="
gcc g++ make cmake pkg-config
openmpi-bin libopenmpi-dev
libopenblas-dev
libopenblas-openmp-dev
libcjson-dev
libpcre2-dev
libutf8proc-dev
liburing-dev
fortunes
python3 python3-numpy
iproute2
"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "zero: missing packages:$missing" >&2
  echo "zero: run as root: apt-get update && apt-get install -y$missing" >&2
  exit 1
fi
echo "zero: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
