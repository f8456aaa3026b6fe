#!/usr/bin/env bash
# bench/qlora_mem.sh — QLoRA's memory on a Llama-shaped directory of random bf16 weights: peak RSS
# of `zero train --lora SPEC` on the bf16 base against the same run with --quantize-base nf4 (and
# int8, and nf4 with --quantize-embeddings), on 1 rank and per rank on 2 ranks at stage 3, and the
# peak while loading against the formula (the rank's quantized share of the base plus the record
# of its largest quantized tensor, which a rank holds while its pieces are coded).
# Prints each run's figures and the ratios (docs/BENCHMARKS.md, "QLoRA's memory").
#
# usage: bench/qlora_mem.sh [BUILD_DIR] [PRESET] [WORK_DIR] [extra zero train flags...]
#        defaults: build llama-3.2-3b /tmp/zero-qlora-bench; the directory WORK_DIR/base is made
#        once (a random model of PRESET saved with its frozen base and exported as bf16: about
#        2 bytes a parameter of disk, twice while it is made) and reused
set -euo pipefail
build=${1:-build}; preset=${2:-llama-3.2-3b}; work=${3:-/tmp/zero-qlora-bench}
shift $(( $# < 3 ? $# : 3 ))
extra=("$@")
zero="$build/zero"
[ -x "$zero" ] || { echo "qlora_mem.sh: $zero not found: build first (make)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
data="$src/tests/data/decoder/tokens.bin"
py=${ZERO_PYTHON:-python3}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mkdir -p "$work"
base="$work/base"
if [ ! -f "$base/config.json" ]; then
  echo "making $base: a random $preset in bf16"
  rm -rf "$work/ck"
  "$zero" train --model "$preset" --data "$data" --seq 16 --steps 1 --micro-batch 1 --lr 0 --precision bf16 \
    --lora r=1 --save-frozen --save "$work/ck" --val-every 0 --val-batches 1 >/dev/null
  "$zero" export "$work/ck" --merge -o "$base" --dtype bf16 >/dev/null
  rm -rf "$work/ck"
fi
echo "QLoRA memory on $preset ($base), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # NAME RANKS STAGE QUANT [FLAG]
  local log="$work/$1.jsonl"
  "$zero" train --init-from "$base" --data "$data" --seq 64 --steps 2 --micro-batch 1 --precision bf16 \
    --lora r=16 --ranks "$2" --stage "$3" --quantize-base "$4" ${5:+"$5"} --val-every 0 --val-batches 1 --log-json "$log" \
    ${extra[@]+"${extra[@]}"} >/dev/null 2>"$work/err" || { echo "run failed: $1"; cat "$work/err"; exit 1; }
}
for q in none nf4 int8; do run "r1.$q" 1 0 "$q"; done
run r1.nf4e 1 0 nf4 --quantize-embeddings
for q in none nf4; do run "r2.$q" 2 3 "$q"; done
run r2.nf4e 2 3 nf4 --quantize-embeddings
"$py" - "$work" "$base" <<'PY'
import json, os, struct, sys
work, base = sys.argv[1], sys.argv[2]
def done(name):
    return [json.loads(l) for l in open(os.path.join(work, name + ".jsonl")) if '"done"' in l][-1]
G = 2.0 ** 30
rows = {}
for name in ("r1.none", "r1.nf4", "r1.int8", "r1.nf4e", "r2.none", "r2.nf4", "r2.nf4e"):
    r = done(name)
    rows[name] = r
    print("%-8s peak RSS %6.3f GiB (loading %6.3f GiB in %5.1f s); params %6.3f GiB, buffers %6.3f GiB, loss %.4f" % (
        name, r["rss_peak"] / G, r["init_rss_peak"] / G, r["init_s"], r["mem"]["params"] / G, r["mem"]["buffers"] / G,
        r["loss"]))
# the largest quantized tensor (a layer's linear weight; with the embeddings, those and lm_head), from
# the directory's index: a rank holds its record (and NF4's first-level scales) while its pieces are coded
idx = os.path.join(base, "model.safetensors.index.json")
files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
largest = {False: 0, True: 0}
for f in files:
    with open(os.path.join(base, f), "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = json.loads(fh.read(n))
    for k, v in h.items():
        if k == "__metadata__" or len(v["shape"]) != 2:
            continue
        e = v["shape"][0] * v["shape"][1]
        largest[True] = max(largest[True], e)
        if ".layers." in k:
            largest[False] = max(largest[False], e)
def record(q, e):  # bytes of a record of e values, the first-level scales NF4 holds beside it
    return e / 2 + e / 64 * 4 + e / 64 * 4 if q != "int8" else e + e / 64 * 4
for q in ("nf4", "int8", "nf4e"):
    r = rows["r1." + q]
    f = r["mem"]["params"] + record(q, largest[q == "nf4e"])
    print("r1.%-5s peak RSS / bf16 base's: %.3f; loading: %.3f GiB against params + the largest record being coded = "
          "%.3f GiB (+%.0f MiB)" % (q, r["rss_peak"] / rows["r1.none"]["rss_peak"], r["init_rss_peak"] / G, f / G,
                                    (r["init_rss_peak"] - f) / 2.0 ** 20))
for q in ("none", "nf4", "nf4e"):
    print("2 ranks at stage 3 / 1 rank, %-4s: %.3f" % (q, rows["r2." + q]["rss_peak"] / rows["r1." + q]["rss_peak"]))
PY
