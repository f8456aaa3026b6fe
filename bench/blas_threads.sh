#!/usr/bin/env bash
# bench/blas_threads.sh — does a second thread help? `zero train` step time on 1 rank with 1 and 2
# OpenMP threads, run with the pthread build of OpenBLAS (LD_LIBRARY_PATH over the binary's run
# path: the build before issue #20) and with the OpenMP build it links, interleaved over rounds.
# Prints the median step time of each (steps after the first) and the 2-thread speed-ups.
# Usage: bench/blas_threads.sh [BUILD_DIR] [STEPS] [ROUNDS] [extra zero-train flags...]
set -eu
build=${1:-build}
steps=${2:-6}
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
pthread_dir=/usr/lib/$arch/openblas-pthread
[ -e "$pthread_dir/libopenblas.so.0" ] || { echo "blas_threads.sh: $pthread_dir missing" >&2; exit 2; }
tmp=$(mktemp -d /tmp/blas_threads.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "blas_threads.sh: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq "$rounds"); do
  for blas in pthread openmp; do
    for t in 1 2; do
      env=(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t)
      [ "$blas" = pthread ] && env+=(LD_LIBRARY_PATH=$pthread_dir)
      env "${env[@]}" "$build/zero" train --model small --seq 128 --micro-batch 4 --steps "$steps" \
        --val-every 0 --val-batches 1 --log-json "$tmp/$blas.$t.$r.json" "$@" >/dev/null
    done
  done
done
echo "blas_threads.sh: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$tmp" <<'PY'
import glob, json, os, statistics, sys
ms = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    blas, t, _ = os.path.basename(f).split(".")[:3]
    steps = [json.loads(l) for l in open(f) if '"step"' in l and '"done"' not in l]
    ms.setdefault((blas, int(t)), []).extend(s["step_ms"] for s in steps[1:])
print("| OpenBLAS build | 1 thread ms/step | 2 threads ms/step | speed-up 2 vs 1 |")
print("| --- | --- | --- | --- |")
for blas in ("pthread", "openmp"):
    a, b = statistics.median(ms[blas, 1]), statistics.median(ms[blas, 2])
    print("| %s | %.0f | %.0f | %.2f |" % (blas, a, b, a / b))
PY
