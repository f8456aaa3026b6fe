#!/usr/bin/env bash
# Installs the Debian packages zero needs that are missing (as root), or prints the apt-get line.
# Called by `make deps`, and so first by `make test` and `make demo`. With the argument `ci`, also
# what CI's other steps need: clang with libFuzzer and OpenMP (make fuzz), clang-format and
# clang-tidy (scripts/lint.sh); `make fuzz` and `make lint` pass it. (g++ is only nvcc's host
# compiler for the CUDA parts; the project itself is C.)
set -eu
# One package per line, so that branches adding packages merge cleanly.
pkgs="
gcc g++ make cmake pkg-config
openmpi-bin libopenmpi-dev
libopenblas-dev
libopenblas-openmp-dev
libdnnl-dev
libcjson-dev
libpcre2-dev
libutf8proc-dev
liburing-dev
libcairo2-dev
fortunes
python3 python3-numpy
iproute2
"
if [ "${1:-}" = ci ]; then
    pkgs="$pkgs clang-14 libclang-rt-14-dev libomp-14-dev clang-format-14 clang-tidy-14"
fi
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
