#!/usr/bin/env bash
# bench/zeropp_curve.sh — ZeRO++'s quantized communication against the exact run over a training
# curve: `zero train` at stage 3 on RANKS local ranks with the shared-memory collectives off
# (ZERO_COMM_SHM=0: every collective over MPI, so qgZ quantizes every reduce-scatter as it would
# across machines), once plain and once with --quantized-weights --quantized-gradients, the same
# seed and data; prints the loss of both every 50 steps, the largest relative difference of the
# per-step losses, and of their means over windows of 25 steps.
# Usage: bench/zeropp_curve.sh [BUILD_DIR]; ZC_MODEL (small), ZC_STEPS (300), ZC_RANKS (2),
# ZC_ARGS (more flags for both runs, e.g. "--init-from DIR --lora r=16" or "--precision bf16").
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
zero=$(cd "${1:-$root/build}" 2>/dev/null && pwd)/zero
[ -x "$zero" ] || { echo "bench/zeropp_curve.sh: $zero not found" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=/usr/share/games/fortunes
[ -e "$data" ] && data_args=(--data "$data") || data_args=()
read -r -a extra <<<"${ZC_ARGS:-}"
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg) =="
for v in plain zeropp; do
    q=(); [ $v = zeropp ] && q=(--quantized-weights --quantized-gradients)
    ZERO_COMM_SHM=0 "$zero" train --model "${ZC_MODEL:-small}" --ranks "${ZC_RANKS:-2}" --stage 3 \
        --steps "${ZC_STEPS:-300}" --val-every 0 --val-batches 1 --log-json "$work/$v.json" "${data_args[@]}" \
        "${extra[@]}" "${q[@]}" >"$work/$v.out" 2>&1 || { echo "== $v failed: $(tail -2 "$work/$v.out")"; exit 1; }
done
python3 - "$work/plain.json" "$work/zeropp.json" <<'PY'
import json, sys
def losses(p): return [r["loss"] for r in (json.loads(l) for l in open(p)) if "step_ms" in r]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
n = min(len(a), len(b))
for s in range(0, n, 50): print("step %4d  plain %.4f  qwZ+qgZ %.4f" % (s + 1, a[s], b[s]))
print("step %4d  plain %.4f  qwZ+qgZ %.4f" % (n, a[n - 1], b[n - 1]))
rel = [abs(x - y) / abs(x) for x, y in zip(a, b)]
w = 25
win = [abs(sum(a[i:i + w]) - sum(b[i:i + w])) / abs(sum(a[i:i + w])) for i in range(0, n - w + 1, w)]
print("steps %d: per-step losses differ by at most %.2e (relative; median %.2e); means over %d steps by at most %.2e"
      % (n, max(rel), sorted(rel)[n // 2], w, max(win)))
PY
