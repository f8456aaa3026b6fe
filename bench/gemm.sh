#!/usr/bin/env bash
# bench/gemm.sh — sgemm GFLOP/s of every BLAS installed here, on the model's GEMM shapes (512 rows:
# forward, backward-data, backward-weight of each linear layer of small, gpt2, SmolLM2-135M),
# and PyTorch 2's torch.mm on the same products where torch is installed (bench/gemm_torch.py),
# each backend in its own process, interleaved over rounds; prints the best of the rounds and each
# backend's geometric-mean ratio to the OpenMP build of OpenBLAS (docs/KERNELS.md, "BLAS").
# Usage: bench/gemm.sh [BUILD_DIR] [THREADS] [ROUNDS] [SECONDS_PER_SHAPE]
set -eu
build=${1:-build}
threads=${2:-1}
rounds=${3:-3}
secs=${4:-0.2}
bin=$build/bench/bench_gemm
[ -x "$bin" ] || { echo "gemm.sh: $bin missing (make build)" >&2; exit 2; }
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
backends=""
for v in openmp pthread; do
  lib=/usr/lib/$arch/openblas-$v/libopenblas.so.0
  [ -e "$lib" ] && backends="$backends cblas:$lib"
done
for lib in /usr/lib/$arch/blis-openmp/libblis.so.4 /usr/lib/$arch/blis-pthread/libblis.so.4; do
  [ -e "$lib" ] && { backends="$backends cblas:$lib"; break; }
done
for be in dnnl-sgemm dnnl-matmul dnnl-matmul-bf16 mk-bf16; do
  "$bin" "$be" 0.001 >/dev/null 2>&1 && backends="$backends $be"
done
# the peer users run: PyTorch 2 from PyPI (MKL), where it is installed
here=$(cd "$(dirname "$0")" && pwd)
if python3 -c 'import torch' 2>/dev/null; then backends="$backends torch"
else echo "gemm.sh: no torch: the PyTorch peer is left out" >&2; fi
out=$(mktemp /tmp/gemm_bench.XXXXXX)
trap 'rm -f "$out"' EXIT
echo "gemm.sh: $threads thread(s), $rounds rounds, backends:$backends" >&2
echo "gemm.sh: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq "$rounds"); do
  for be in $backends; do
    if [ "$be" = torch ]; then
      OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads python3 "$here/gemm_torch.py" "$secs" >>"$out"
      continue
    fi
    OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads BLIS_NUM_THREADS=$threads \
      "$bin" "$be" "$secs" >>"$out"
  done
done
echo "gemm.sh: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$out" <<'PY'
import math, sys, collections
best = collections.defaultdict(float)
order, backends = [], []
for line in open(sys.argv[1]):
    f = line.split()
    if f[-1] == "unsupported":
        continue
    be, shape, op = f[0], f[1], f[2]
    be = be.replace("cblas:/usr/lib/", "").split("/", 1)[-1].rsplit("/", 1)[0] if be.startswith("cblas:") else be
    key = (shape, op, f[3], f[4], f[5])
    if key not in order: order.append(key)
    if be not in backends: backends.append(be)
    best[be, key] = max(best[be, key], float(f[6]))
ref = "openblas-openmp" if "openblas-openmp" in backends else backends[0]
print("| shape | op | M x N x K | " + " | ".join(backends) + " |")
print("| --- | --- | --- | " + " | ".join("---" for _ in backends) + " |")
for key in order:
    cells = ["%.1f" % best[be, key] if (be, key) in best else "n/a" for be in backends]
    print("| %s | %s | %sx%sx%s | %s |" % (key[0], key[1], key[2], key[3], key[4], " | ".join(cells)))
for be in backends:
    rs = [best[be, k] / best[ref, k] for k in order if (be, k) in best and (ref, k) in best]
    if rs:
        print("geomean GFLOP/s ratio %s / %s: %.3f over %d products" % (be, ref, math.exp(sum(map(math.log, rs)) / len(rs)), len(rs)))
PY
