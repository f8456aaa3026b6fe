#!/usr/bin/env bash
# The cuda backend seen from `zero` (docs/DEVICE.md, "The cuda backend"): `zero --version
# --verbose` names the CUDA stack where the backend is built; neither `zero` nor the backend's
# module needs a CUDA library to start (the module is loaded when asked for, its runtime is
# static); where there is no GPU, `ZERO_DEVICE=cuda zero train` ends at once with one line, exit 1,
# nothing trained or written; a module that is not there is one line too, and the cpu backend
# still trains. On a GPU (ZERO_TEST_GPU=1, or /dev/nvidiactl present) the same train command
# trains instead.
set -uo pipefail
Z=${ZERO:?set ZERO to the zero binary}
BUILD=$(dirname "$Z")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

"$Z" --version --verbose >"$tmp/v.txt" 2>&1
check "--version --verbose: exit 0" test $? -eq 0
if ! grep -q "^device backends: cpu,fake,cuda " "$tmp/v.txt"; then
    # a CPU build: no cuda line, and asking for cuda says the build has none
    check "a CPU build: no cuda line" sh -c "! grep -q '^cuda:' '$tmp/v.txt'"
    (cd "$tmp" && ZERO_DEVICE=cuda timeout 60 "$Z" train --model tiny --steps 1 >"$tmp/out" 2>"$tmp/err")
    check "a CPU build: ZERO_DEVICE=cuda exits 2 (bad input: docs/CLI.md)" test $? -eq 2
    check "a CPU build: one line naming it" grep -q "^zero: error: .*no cuda backend" "$tmp/err"
    exit $((fails > 0))
fi
check "a cuda line: runtime, driver, cuBLASLt, NCCL" \
    grep -Eq "^cuda: runtime [0-9]+\.[0-9]+ .*, driver (none|CUDA [0-9.]+), .*cuBLASLt ([0-9.]+ \(.*\)|none), NCCL ([0-9.]+ \(.*\)|none)$" "$tmp/v.txt"
check "the cuda line names sm_80..sm_120 (what this nvcc has)" grep -Eq "^cuda: .*built for sm_80,86,89,90(,120)?\)" "$tmp/v.txt"
# nothing of CUDA is a dependency of zero or of the module: a machine without CUDA libraries starts
check "zero needs no CUDA library" sh -c "! readelf -d '$Z' | grep NEEDED | grep -qi 'cuda\|cublas\|nccl'"
check "the module's runtime is static" sh -c "! readelf -d '$BUILD/libzero-cuda.so' | grep NEEDED | grep -qi 'cuda\|cublas\|nccl'"

gpu=0
if [ -n "${ZERO_TEST_GPU:-}" ]; then [ "$ZERO_TEST_GPU" != 0 ] && gpu=1; elif [ -e /dev/nvidiactl ]; then gpu=1; fi
mkdir "$tmp/run"
(cd "$tmp/run" && ZERO_DEVICE=cuda timeout 120 "$Z" train --model tiny --steps 2 >"$tmp/out" 2>"$tmp/err")
code=$?
if [ $gpu = 0 ]; then
    check "no GPU: ZERO_DEVICE=cuda zero train exits 1" test $code -eq 1
    check "no GPU: one line on stderr" test "$(grep -c . "$tmp/err")" -eq 1
    check "no GPU: it names cudaGetDeviceCount's error" \
        grep -Eq "^zero: error: .*no CUDA device \(cudaGetDeviceCount: .*\((cudaError[A-Za-z]+) [0-9]+\)\)$" "$tmp/err"
    check "no GPU: nothing trained" sh -c "! grep -q '^step ' '$tmp/out'"
    check "no GPU: nothing written" test -z "$(ls -A "$tmp/run")"
    sed 's/^/    /' "$tmp/err"
else
    check "GPU: ZERO_DEVICE=cuda zero train exits 0" test $code -eq 0
    check "GPU: two steps" test "$(grep -c '^step ' "$tmp/out")" -eq 2
    cat "$tmp/err"
fi

# the module missing: one line at the create, and --version still starts
ZERO_CUDA_MODULE=/nonexistent/libzero-cuda.so "$Z" --version --verbose >"$tmp/v2.txt" 2>&1
check "a missing module: --version --verbose exits 0" test $? -eq 0
check "a missing module: the cuda line says so" grep -q "^cuda: ZERO_CUDA_MODULE '/nonexistent/libzero-cuda.so': no such file" "$tmp/v2.txt"
(cd "$tmp/run" && ZERO_CUDA_MODULE=/nonexistent/libzero-cuda.so ZERO_DEVICE=cuda timeout 60 "$Z" train --model tiny --steps 1 >"$tmp/out" 2>"$tmp/err")
check "a missing module: exit 1" test $? -eq 1
check "a missing module: one line naming it" sh -c "test \$(grep -c . '$tmp/err') -eq 1 && grep -q 'no such file' '$tmp/err'"
(cd "$tmp/run" && ZERO_CUDA_MODULE=/nonexistent/libzero-cuda.so timeout 120 "$Z" train --model tiny --steps 1 >"$tmp/out" 2>"$tmp/err")
check "a missing module: the cpu backend trains" sh -c "test $? -eq 0 && grep -q '^step 1/1' '$tmp/out'"
exit $((fails > 0))
