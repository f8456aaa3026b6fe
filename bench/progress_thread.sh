#!/usr/bin/env bash
# bench/progress_thread.sh — the in-node progress thread (ZERO_COMM_ASYNC, docs/COMM.md) against
# the calling thread, in interleaved `zero train` runs: per round and stage one run with
# ZERO_COMM_ASYNC=0, then one with =1, so that load from elsewhere falls on both. Prints per run
# the median step time and exposed communication (comm_wait_ms) over the steps after the first
# two, and the last loss (the same bits either way), then per stage the median over the rounds
# and the ratio thread / calling thread.
#
# usage: bench/progress_thread.sh [BUILD_DIR] [RANKS] [STAGES] [ROUNDS] [STEPS] [extra zero train flags...]
#        defaults: build 2 "2 3" 3 8 (model small, micro-batch 4, seq 256: zero train's defaults)
set -euo pipefail
build=${1:-build}; ranks=${2:-2}; stages=${3:-"2 3"}; rounds=${4:-3}; steps=${5:-8}
shift $(( $# < 5 ? $# : 5 ))
zero="$build/zero"
[ -x "$zero" ] || { echo "progress_thread.sh: $zero not found: build first (make)" >&2; exit 2; }
py=${ZERO_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "progress thread A/B: $ranks ranks, stages $stages, $rounds rounds of $steps steps, $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-launcher default}"
for round in $(seq "$rounds"); do
  for st in $stages; do
    for a in 0 1; do
      log="$tmp/r$round.s$st.a$a.jsonl"
      ZERO_COMM_ASYNC=$a "$zero" train --ranks "$ranks" --stage "$st" --steps "$steps" --val-every 0 \
        --log-json "$log" "$@" > "$tmp/out" 2> "$tmp/err" || { echo "run failed:"; cat "$tmp/err"; exit 1; }
      "$py" - "$log" "$round" "$st" "$a" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if "step_ms" in r and r.get("step", 0) > 2]
med = lambda xs: sorted(xs)[len(xs) // 2]
print("round %s stage %s ZERO_COMM_ASYNC=%s: step %.0f ms, exposed comm %.1f ms, last loss %.9g"
      % (sys.argv[2], sys.argv[3], sys.argv[4], med([r["step_ms"] for r in rows]),
         med([r.get("comm_wait_ms", 0.0) for r in rows]), rows[-1]["loss"]))
PY
    done
  done
done | tee "$tmp/runs"
"$py" - "$tmp/runs" <<'PY'
import re, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ stage (\d) ZERO_COMM_ASYNC=(\d): step (\S+) ms, exposed comm (\S+) ms", line)
    if m: runs.setdefault((m[1], m[2]), []).append((float(m[3]), float(m[4])))
med = lambda xs: sorted(xs)[len(xs) // 2]
for st in sorted({k[0] for k in runs}):
    off, on = runs.get((st, "0"), []), runs.get((st, "1"), [])
    if not off or not on: continue
    s0, s1 = med([x[0] for x in off]), med([x[0] for x in on])
    c0, c1 = med([x[1] for x in off]), med([x[1] for x in on])
    print("stage %s: step %.0f -> %.0f ms (thread / calling thread %.3f), exposed comm %.1f -> %.1f ms"
          % (st, s0, s1, s1 / s0, c0, c1))
PY
