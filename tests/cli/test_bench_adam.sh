#!/usr/bin/env bash
# `zero bench adam`: a small run's JSON (keys, positive figures, one object per dtype, torch
# compared whenever it imports) and the usage errors (one line, exit status 2).
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check NAME COMMAND...: runs the command, counts a failure when it fails
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

if "$PY" -c 'import torch' >/dev/null 2>&1; then HAVE_TORCH=1; else HAVE_TORCH=0; fi

"$ZERO" bench adam --n 100000 --json >"$TMP/all.json" 2>"$TMP/all.err"
check "small run: exit 0" test $? -eq 0
check "small run: keys, values, one object per dtype" "$PY" - "$TMP/all.json" "$HAVE_TORCH" <<'PYEOF'
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()]
have_torch = sys.argv[2] == "1"
rows = [json.loads(l) for l in lines]
assert [r["dtype"] for r in rows] == ["fp32", "bf16", "fp16"], rows
for r in rows:
    for k in ("n", "dtype", "effective_gbps", "copy_gbps", "ratio", "torch_ratio"):
        assert k in r, (k, r)
    assert r["n"] == 100000, r
    for k in ("effective_gbps", "copy_gbps", "ratio", "scalar_gbps", "ms"):
        assert isinstance(r[k], (int, float)) and r[k] > 0, (k, r)
    # ratio is effective / copy, as printed
    assert abs(r["ratio"] - r["effective_gbps"] / r["copy_gbps"]) <= 1e-9 * r["ratio"], r
    # effective bandwidth is the bytes the step must move over its time: 28 B/element, +2 with a write-back
    per = 28 + (0 if r["dtype"] == "fp32" else 2)
    assert abs(r["effective_gbps"] - per * r["n"] / (r["ms"] * 1e-3) / 1e9) <= 1e-6 * r["effective_gbps"], r
    if have_torch:
        assert isinstance(r["torch_ratio"], (int, float)) and r["torch_ratio"] > 0, r
        assert abs(r["torch_ratio"] - r["torch_ms"] / r["ms"]) <= 1e-6 * r["torch_ratio"], r
    else:
        assert r["torch_ratio"] is None, r
print("rows:", [(r["dtype"], round(r["effective_gbps"], 1), r["torch_ratio"]) for r in rows])
PYEOF

"$ZERO" bench adam --n 5000 --dtype bf16 --threads 1 --no-torch --json >"$TMP/one.json"
check "one dtype: exit 0" test $? -eq 0
check "one dtype: one bf16 object, torch skipped" "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 1 and rows[0]["dtype"] == "bf16" and rows[0]["n"] == 5000, rows
assert rows[0]["torch_ratio"] is None and rows[0]["threads"] == 1, rows' "$TMP/one.json"

"$ZERO" bench adam --n 3000 --dtype fp16 --no-torch >"$TMP/text.out"
check "text output: exit 0" test $? -eq 0
check "text output: a row for n=3000 fp16" grep -Eq '^ +3000 +fp16 ' "$TMP/text.out"

"$ZERO" bench adam --help >"$TMP/help.out"
check "--help: exit 0" test $? -eq 0
check "--help: usage" grep -q "usage: zero bench adam" "$TMP/help.out"

usage_error() { # usage_error NAME ARGS...: exit 2, nothing on stdout, one "zero: error:" line on stderr
    local name=$1; shift
    "$ZERO" bench adam "$@" >"$TMP/u.out" 2>"$TMP/u.err"
    local rc=$?
    check "$name: exit 2" test $rc -eq 2
    check "$name: one error line" test "$(wc -l <"$TMP/u.err")" -eq 1
    check "$name: zero: error: prefix" grep -q '^zero: error: ' "$TMP/u.err"
    check "$name: no output" test ! -s "$TMP/u.out"
}
usage_error "bad flag" --frobnicate
usage_error "bad dtype" --dtype int8
usage_error "fractional n" --n 2.5
usage_error "zero n" --n 0
usage_error "missing value" --n
usage_error "bad threads" --threads 0

[ $fail -eq 0 ] && echo "test_bench_adam: all passed" || echo "test_bench_adam: FAILED"
exit $fail
