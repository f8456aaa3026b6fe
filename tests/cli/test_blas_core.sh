#!/usr/bin/env bash
# The BLAS in use: `zero --version --verbose` names the BLAS and its core, the bf16 products' path
# and the kernels; a core named in OPENBLAS_CORETYPE stands; where it is an AVX2 core on an AVX-512
# CPU, --verbose notes it and the GEMM benchmarks warn (once), and OpenBLAS's own choice is an
# AVX-512 core with no note; a stray argument is a one-line usage error.
set -u
: "${ZERO:?set ZERO to the zero binary}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...

OPENBLAS_CORETYPE=Haswell "$ZERO" --version --verbose >"$TMP/named.txt"
check "--version --verbose: exit 0" test $? -eq 0
for k in "blas: OpenBLAS" "bf16 products: " "kernels: " "device backends: cpu,fake"; do
    check "--version --verbose: a '$k' line" grep -q "^$k" "$TMP/named.txt"
done
check "a named core stands (Haswell)" grep -q "^blas: .*, core Haswell$" "$TMP/named.txt"
"$ZERO" --version >"$TMP/plain.txt"
check "--version alone: one line" test "$(wc -l <"$TMP/plain.txt")" -eq 1
"$ZERO" --version --verbos >"$TMP/bad.out" 2>"$TMP/bad.err"
check "a stray argument: exit 2" test $? -eq 2
check "a stray argument: one line naming it" test "$(grep -c "error: .*'--verbos'" "$TMP/bad.err")" -eq 1

env -u OPENBLAS_CORETYPE "$ZERO" --version --verbose >"$TMP/own.txt"
check "OpenBLAS's own choice: no note" sh -c "! grep -q '^note:' '$TMP/own.txt'"
if grep -q "^kernels: avx512$" "$TMP/named.txt" && grep -q "DYNAMIC_ARCH" "$TMP/named.txt"; then
    check "AVX-512 CPU, Haswell named: the note names it and SkylakeX" \
        grep -q "^note: .*(OPENBLAS_CORETYPE=Haswell).*(SkylakeX)" "$TMP/named.txt"
    check "AVX-512 CPU, OpenBLAS's own choice: not an AVX2 core" sh -c "! grep -Eq 'core (Haswell|Zen)$' '$TMP/own.txt'"
    OPENBLAS_CORETYPE=Haswell "$ZERO" bench rates --model tiny --iters 1 -o "$TMP/rates.json" >/dev/null 2>"$TMP/rates.err"
    check "bench rates under Haswell: exit 0" test $? -eq 0
    check "bench rates under Haswell: one warning line" test "$(grep -c "^zero: warning: OpenBLAS runs AVX2 kernels" "$TMP/rates.err")" -eq 1
else
    echo "note: no AVX-512 or no DYNAMIC_ARCH OpenBLAS here: the note cannot show"
    check "no AVX-512: no note under Haswell" sh -c "! grep -q '^note:' '$TMP/named.txt'"
fi
env -u OPENBLAS_CORETYPE "$ZERO" bench rates --model tiny --iters 1 -o "$TMP/rates2.json" >/dev/null 2>"$TMP/rates2.err"
check "bench rates, OpenBLAS's own choice: no warning" sh -c "! grep -q 'warning: OpenBLAS' '$TMP/rates2.err'"
exit $fail
