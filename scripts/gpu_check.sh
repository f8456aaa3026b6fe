#!/usr/bin/env bash
# The cuda backend on a real GPU, in one run of at most 8 minutes (docs/DEVICE.md, "The cuda
# backend"): probe the card; build with what the machine has (cmake and the CUDA toolkit; MPI and
# the rest where found); the kernels' resources per architecture; the GPU kernels' bodies on the
# host; the device layer's test on the cuda backend (every kernel against the CPU reference,
# bitwise where the formula is elementwise, NaN payloads aside); compute-sanitizer memcheck and
# racecheck over it; the engine on the cuda device against the cpu backend on one rank (the self
# communicator: no MPI needed); `ZERO_DEVICE=cuda zero train`. Prints one JSON summary at the end
# (and writes it, with every step's log, to --out).
#
# usage: scripts/gpu_check.sh [--dry-run] [--build DIR] [--no-build] [--jobs N] [--out DIR]
#   --dry-run   no GPU expected: every step runs, the GPU steps in their no-GPU form (they must
#               skip, exit 77, or report the refusal) and are reported as "dry-run"
#   --build     the build folder (default build-gpu); --no-build: use it as it is
#   --out       where the summary (gpu_check.json) and the logs go (default BUILD/gpu_check)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DRY=0
BUILD=build-gpu
NOBUILD=0
JOBS=$(nproc 2>/dev/null || echo 4)
OUT=
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) DRY=1 ;;
    --build) BUILD=$2; shift ;;
    --no-build) NOBUILD=1 ;;
    --jobs) JOBS=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "zero: error: gpu_check: unknown argument '$1' (usage: scripts/gpu_check.sh [--dry-run] [--build DIR] [--no-build] [--jobs N] [--out DIR])" >&2; exit 2 ;;
    esac
    shift
done
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${OUT:-$BUILD/gpu_check}
mkdir -p "$OUT" || exit 1
T0=$SECONDS
DEADLINE=$((T0 + 470)) # 8 minutes, less a margin for the summary

json_str() { # a JSON string of $1
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/ }
    printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\010\013-\037')"
}

STEPS=()
FAILED=0
# step NAME GPU(0/1) LIMIT_S COMMAND...: runs COMMAND with a time limit, its output to OUT/NAME.log;
# its status: ok, fail, skipped (exit 77), dry-run (a GPU step in a dry run that behaved as it
# must without a GPU), timeout
step() {
    local name=$1 gpu=$2 limit=$3
    shift 3
    local left=$((DEADLINE - SECONDS)) status detail rc t=$SECONDS
    if [ $left -le 5 ]; then
        STEPS+=("{\"name\": $(json_str "$name"), \"gpu\": $gpu, \"status\": \"skipped\", \"seconds\": 0, \"detail\": \"out of time (8 minutes)\"}")
        echo "=== gpu_check: $name: skipped, out of time"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "=== gpu_check: $name$([ "$gpu" = 1 ] && echo " (GPU)"): $*"
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    detail=$(grep -v '^\s*$' "$OUT/$name.log" | tail -n 3)
    if [ $rc -eq 124 ]; then status=timeout
    elif [ $rc -eq 77 ]; then status=skipped
    elif [ $rc -ne 0 ]; then status=fail
    elif [ "$gpu" = 1 ] && [ $DRY = 1 ]; then status=dry-run
    else status=ok; fi
    if [ "$status" = skipped ] && [ "$gpu" = 1 ] && [ $DRY = 1 ]; then status=dry-run; fi
    if [ "$status" = fail ] || [ "$status" = timeout ] || { [ "$status" = skipped ] && [ "$gpu" = 1 ]; }; then
        FAILED=$((FAILED + 1)) # on a GPU, a GPU step that skips did not check anything
    fi
    echo "    $status in $((SECONDS - t)) s: $(tail -n 1 <<<"$detail")"
    STEPS+=("{\"name\": $(json_str "$name"), \"gpu\": $gpu, \"status\": \"$status\", \"exit\": $rc, \"seconds\": $((SECONDS - t)), \"detail\": $(json_str "$detail")}")
}

# ---------------------------------------------------------------- probe
GPU_ENV=1
[ $DRY = 1 ] && GPU_ENV=0
card="none"
driver="none"
if command -v nvidia-smi >/dev/null; then
    step probe 1 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
    card=$(head -n 1 "$OUT/probe.log")
    driver=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -n 1)
else
    STEPS+=("{\"name\": \"probe\", \"gpu\": 1, \"status\": \"$([ $DRY = 1 ] && echo dry-run || echo fail)\", \"seconds\": 0, \"detail\": \"nvidia-smi not found\"}")
    [ $DRY = 1 ] || FAILED=$((FAILED + 1))
fi
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || echo "")
nvcc_version=$([ -n "$nvcc" ] && "$nvcc" --version | grep -o 'release [0-9.]*' | head -n 1)
sanitizer=$(command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; } || echo "")
mpi=$(command -v mpiexec >/dev/null && echo true || echo false)

# ---------------------------------------------------------------- build
if [ $NOBUILD = 0 ]; then
    [ -n "$nvcc" ] && export PATH="$(dirname "$nvcc"):$PATH"
    step configure 0 120 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
    step build 0 300 cmake --build "$BUILD" -j "$JOBS" --target zero_cli test_device test_cuda_bodies test_engine_on_device \
        test_device_gemm
    if [ ! -x "$BUILD/tests/test_device" ] || [ ! -f "$BUILD/libzero-cuda.so" ]; then
        # a GPU run is rare: where this machine's compilers warn where CI's do not, build again
        # with the warnings kept but not errors (the failed try stays in the summary)
        step configure_nowerror 0 60 cmake -S "$ROOT" -B "$BUILD" -DZERO_CUDA_WERROR=OFF
        step build_nowerror 0 300 cmake --build "$BUILD" -j "$JOBS" --target zero_cli test_device test_cuda_bodies \
            test_engine_on_device test_device_gemm
    fi
fi
built=$(grep -o 'zero: CUDA backend .*' "$OUT/configure.log" 2>/dev/null | head -n 1)
[ $NOBUILD = 1 ] && built="$BUILD as it was (--no-build)"
cuda_line=$("$BUILD/zero" --version --verbose 2>/dev/null | grep '^cuda:' | head -n 1)

# ---------------------------------------------------------------- checks without a GPU
step resources 0 120 bash scripts/cuda_resources.sh
step bodies 0 60 "$BUILD/tests/test_cuda_bodies"
step device_host 0 120 env ZERO_BUILD_DIR="$BUILD" ZERO_TEST_GPU=$GPU_ENV "$BUILD/tests/test_device"

# ---------------------------------------------------------------- on the GPU
step device_cuda 1 120 env ZERO_TEST_DEVICE=cuda ZERO_TEST_GPU=$GPU_ENV "$BUILD/tests/test_device"
# the GEMM through cuBLASLt: every transpose, leading dimension, alpha, beta and bias, and the
# models' linear layers as column-major GEMMs, against the CPU reference of the same descriptions
step gemm_cuda 1 60 env ZERO_TEST_DEVICE=cuda "$BUILD/tests/test_device_gemm"
if [ -n "$sanitizer" ]; then
    # the same test under the sanitizer: any error is exit 99
    step memcheck 1 180 env ZERO_TEST_SMALL=1 ZERO_TEST_DEVICE=cuda ZERO_TEST_GPU=$GPU_ENV "$sanitizer" --tool memcheck --error-exitcode 99 \
        "$BUILD/tests/test_device"
    step racecheck 1 180 env ZERO_TEST_SMALL=1 ZERO_TEST_DEVICE=cuda ZERO_TEST_GPU=$GPU_ENV "$sanitizer" --tool racecheck --error-exitcode 99 \
        "$BUILD/tests/test_device"
else
    STEPS+=("{\"name\": \"memcheck\", \"gpu\": 1, \"status\": \"skipped\", \"seconds\": 0, \"detail\": \"compute-sanitizer not found\"}")
fi
step engine_cuda 1 180 env ZERO_TEST_DEVICE=cuda ZERO_TEST_GPU=$GPU_ENV "$BUILD/tests/test_engine_on_device"
step cli_cuda 1 120 env ZERO="$BUILD/zero" ZERO_TEST_GPU=$GPU_ENV bash tests/cli/test_device_cuda.sh

# ---------------------------------------------------------------- the summary
{
    printf '{"script": "gpu_check", "dry_run": %s, "ok": %s, "seconds": %d,\n' \
        "$([ $DRY = 1 ] && echo true || echo false)" "$([ $FAILED = 0 ] && echo true || echo false)" $((SECONDS - T0))
    printf ' "host": %s, "card": %s, "driver": %s, "nvcc": %s, "compute_sanitizer": %s, "mpi": %s,\n' \
        "$(json_str "$(hostname)")" "$(json_str "$card")" "$(json_str "$driver")" "$(json_str "$nvcc_version")" \
        "$(json_str "${sanitizer:-none}")" "$mpi"
    printf ' "build": %s, "zero_cuda": %s,\n "steps": [\n' "$(json_str "$built")" "$(json_str "$cuda_line")"
    for i in "${!STEPS[@]}"; do
        printf '  %s%s\n' "${STEPS[$i]}" "$([ "$i" -lt $((${#STEPS[@]} - 1)) ] && echo ,)"
    done
    printf ' ]}\n'
} >"$OUT/gpu_check.json"
cat "$OUT/gpu_check.json"
[ $FAILED = 0 ]
