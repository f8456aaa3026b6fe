#!/usr/bin/env bash
# bench/cpu_targets.sh — issue #20's step measurements on this CPU in one go: for small, gpt2 and
# SmolLM2-135M, 1 rank on 1 and 2 threads (small at stages 0 and 3) and 2 ranks on 1 thread at
# stages 0-3, each against PyTorch 2 on the same threads when python3 imports torch; where the CPU
# multiplies bf16 (`zero --version --verbose`: "bf16 products: native"), the bf16 step of gpt2 and
# SmolLM2-135M on 1 rank × 1 thread and bench_working's share of the weights' conversions. Every
# run's JSON lands in OUT_DIR, and the tables of docs/BENCHMARKS.md are printed from it
# (bench/step_table.py). A CPU kind measured once needs this once: the figures go to
# docs/BENCHMARKS.md with the machine, the date, the commit and the load it prints.
#
# usage: bench/cpu_targets.sh [BUILD_DIR] [OUT_DIR] [MODELS]
#        defaults: build, a new directory under /tmp, "small gpt2 smollm2-135m"
#        about 40 minutes on a 2-core AVX2 CPU with torch; --no-torch runs when torch is missing.
set -euo pipefail
build=${1:-build}
out=${2:-$(mktemp -d /tmp/cpu_targets.XXXXXX)}
models=${3:-"small gpt2 smollm2-135m"}
zero="$build/zero"
[ -x "$zero" ] || { echo "cpu_targets.sh: $zero not found: build first (make build)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
py=${ZERO_PYTHON:-python3}
mkdir -p "$out"
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
peer=(--torch-script "$here/torch_step.py")
"$py" -c 'import torch' 2>/dev/null || { peer=(--no-torch); echo "cpu_targets.sh: $py does not import torch: no PyTorch peer (pip install torch)"; }
cores=$(nproc)
threads=1; [ "$cores" -ge 2 ] && threads=1,2

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($cores cores; family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' '))"
  echo "flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  "$zero" --version --verbose
  [ "${peer[0]}" = --no-torch ] || echo "torch: $("$py" -c 'import torch; print(torch.__version__)')"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
} | tee "$out/machine.txt"

run() { # run NAME ARGS...: one zero bench step into OUT_DIR/NAME.json, load noted
  local name=$1; shift
  echo "== $name: zero bench step $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
  nice -n -10 "$zero" bench step "$@" --json >"$out/$name.json" 2>"$out/$name.err" ||
    { echo "cpu_targets.sh: $name failed:"; cat "$out/$name.err"; exit 1; }
  "$py" "$here/step_table.py" "$out/$name.json"
  echo "(load after: $(cut -d' ' -f1-3 /proc/loadavg))"
}

for m in $models; do
  stages=0; repeat=2
  [ "$m" = small ] && { stages=0,3; repeat=3; }
  run "$m.1rank" --model "$m" --ranks-list 1 --stages "$stages" --threads-list "$threads" --repeat "$repeat" "${peer[@]}"
done
if [ "$cores" -ge 2 ]; then
  for m in $models; do
    repeat=2; [ "$m" = small ] && repeat=3
    run "$m.2ranks" --model "$m" --ranks-list 2 --stages 0,1,2,3 --threads-list 1 --repeat "$repeat" "${peer[@]}"
  done
fi
if "$zero" --version --verbose | grep -q '^bf16 products: native'; then
  for m in $models; do
    [ "$m" = small ] && continue
    run "$m.bf16" --model "$m" --ranks-list 1 --stages 0 --threads-list 1 --repeat 2 --precision bf16 "${peer[@]}"
    if [ -x "$build/bench/bench_working" ]; then
      echo "== $m: bench_working (bf16 micro-batch, working copy vs fp32 view)"
      OMP_NUM_THREADS=1 nice -n -10 "$build/bench/bench_working" "$m" 5 128 4 | tee "$out/$m.working.txt"
    fi
  done
else
  echo "== no bf16 products on this CPU: the bf16 rows are not measured"
fi
echo "cpu_targets.sh: the runs' JSON and logs are in $out"
