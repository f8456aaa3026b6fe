#!/usr/bin/env bash
# bench/determ_step.sh — the cost of `zero train --deterministic` (docs/ENGINE.md §11) against the
# default mode, in interleaved runs (per round and stage: default, deterministic with atoms of one
# sequence, deterministic with atoms of DET_ATOM sequences (default 4, the micro-batch), so that
# load from elsewhere falls on all three): the median step time over the steps after the first
# two, the peak gradient memory (grads, with the grids) and transient buffers (buffers: the
# mode's seen bytes, masses and exchange buffers) of the largest rank, and the ratios deterministic / default per stage.
#
# usage: [DET_ATOM=A] bench/determ_step.sh [BUILD_DIR] [RANKS] [STAGES] [ROUNDS] [STEPS] [extra zero train flags...]
#        defaults: build 2 "0 1 2 3" 3 8 (model small, micro-batch 4, seq 256: zero train's defaults)
set -euo pipefail
build=${1:-build}; ranks=${2:-2}; stages=${3:-"0 1 2 3"}; rounds=${4:-3}; steps=${5:-8}
shift $(( $# < 5 ? $# : 5 ))
zero="$build/zero"
[ -x "$zero" ] || { echo "determ_step.sh: $zero not found: build first (make)" >&2; exit 2; }
py=${ZERO_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "deterministic A/B (atoms of 1 and ${DET_ATOM:-4} sequences): $ranks ranks, stages $stages, $rounds rounds of $steps steps, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    for s in $stages; do
        for mode in default det detA; do
            flag=(); [ "$mode" = det ] && flag=(--deterministic)
            [ "$mode" = detA ] && flag=(--deterministic --det-atom "${DET_ATOM:-4}")
            "$zero" train --ranks "$ranks" --stage "$s" --steps "$steps" --val-every 0 --val-batches 1 \
                --log-json "$tmp/$mode.s$s.r$r.json" "${flag[@]}" "$@" >/dev/null 2>"$tmp/err" ||
                { cat "$tmp/err"; exit 1; }
        done
    done
done
"$py" - "$tmp" "$stages" "$rounds" <<'PY'
import json, statistics, sys
tmp, stages, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
redone = {}
def one(path, mode):
    recs = [json.loads(l) for l in open(path)]
    steps = [d for d in recs if "step" in d]
    ms = statistics.median(d["step_ms"] for d in steps[2:] or steps)
    grads = max(d["mem"]["grads"] for d in steps); bufs = max(d["mem"]["buffers"] for d in steps)
    redone.setdefault(mode, []).append(sum(1 for d in steps if d.get("redone")))
    return ms, grads, bufs
print(f"{'stage':>5} {'default ms':>11} {'det ms':>9} {'time x':>7} {'detA ms':>9} {'time x':>7} {'grads B':>12} {'buffers B (def)':>16} {'buffers B (det)':>16} {'(grads+buf) x':>14}")
for s in stages:
    d, x, y = ([one(f"{tmp}/{m}.s{s}.r{r}.json", m) for r in range(1, rounds + 1)] for m in ("default", "det", "detA"))
    dm, xm, ym = (statistics.median(a[0] for a in v) for v in (d, x, y))
    g, bd, bx = d[0][1], d[0][2], x[0][2]
    print(f"{s:>5} {dm:>11.1f} {xm:>9.1f} {xm / dm:>7.2f} {ym:>9.1f} {ym / dm:>7.2f} {g:>12} {bd:>16} {bx:>16} {(x[0][1] + bx) / (g + bd):>14.2f}")
print("steps redone per run (deterministic, atoms of 1 / of A):", redone.get("det"), "/", redone.get("detA"))
PY
