#!/usr/bin/env bash
# bench/lora_step.sh — a LoRA step against a full fine-tune step of the same model, in interleaved
# `zero train` runs: per round and stage one full run, then one with --lora SPEC, so that load from
# elsewhere falls on both. Prints per run the median step time over the steps after the first two
# and the per-rank model states, then per stage the median over the rounds and the ratio LoRA /
# full (docs/BENCHMARKS.md, LoRA).
#
# usage: bench/lora_step.sh [BUILD_DIR] [RANKS] [STAGES] [ROUNDS] [STEPS] [LORA_SPEC] [extra zero train flags...]
#        defaults: build 1 "0 3" 3 8 r=16,targets=c_attn,c_proj,c_fc (model small, micro-batch 4,
#        seq 256: zero train's defaults; give --model, --init-from DIR, --micro-batch, --seq after)
set -euo pipefail
build=${1:-build}; ranks=${2:-1}; stages=${3:-"0 3"}; rounds=${4:-3}; steps=${5:-8}
spec=${6:-r=16,targets=c_attn,c_proj,c_fc}
shift $(( $# < 6 ? $# : 6 ))
zero="$build/zero"
[ -x "$zero" ] || { echo "lora_step.sh: $zero not found: build first (make)" >&2; exit 2; }
py=${ZERO_PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "LoRA ($spec) against full fine-tuning: $ranks rank(s), stages $stages, $rounds rounds of $steps steps, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for st in $stages; do
    for kind in full lora; do
      log="$tmp/r$round.s$st.$kind.jsonl"
      extra=()
      [ "$kind" = lora ] && extra=(--lora "$spec")
      "$zero" train --ranks "$ranks" --stage "$st" --steps "$steps" --val-every 0 --log-json "$log" "${extra[@]}" "$@" \
        >"$tmp/out" 2>"$tmp/err" || { echo "run failed: $zero train --stage $st ${extra[*]} $*"; cat "$tmp/err"; exit 1; }
      "$py" - "$log" "$round" "$st" "$kind" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if "step_ms" in r and r.get("step", 0) > 2]
m = rows[-1]["mem"]
states = m["params"] + m["grads"] + m["master"] + m["optim"]
print("round %s stage %s %-4s step %8.1f ms  model states %10d B/rank  loss %.4f" % (
    sys.argv[2], sys.argv[3], sys.argv[4], statistics.median(r["step_ms"] for r in steps), states, steps[-1]["loss"]))
PY
    done
  done
done | tee "$tmp/all"
"$py" - "$tmp/all" <<'PY'
import collections, re, statistics, sys
t = collections.defaultdict(list)
mem = {}
for l in open(sys.argv[1]):
    m = re.match(r"round \d+ stage (\d) (\w+)\s+step\s+([\d.]+) ms\s+model states\s+(\d+)", l)
    if m:
        t[(m[1], m[2])].append(float(m[3]))
        mem[(m[1], m[2])] = int(m[4])
for st in sorted({k[0] for k in t}):
    f, l = statistics.median(t[(st, "full")]), statistics.median(t[(st, "lora")])
    print("stage %s: full %.1f ms, LoRA %.1f ms: LoRA / full %.3f; model states LoRA / full %.3f" % (
        st, f, l, l / f, mem[(st, "lora")] / mem[(st, "full")]))
PY
