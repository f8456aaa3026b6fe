#!/usr/bin/env bash
# `zero inspect`: the summary of a checkpoint written by the ckpt layer (tests/unit/test_ckpt
# --write), file sizes against the disk, and exit 1 with one line naming the file and tensor for
# a flipped byte, a missing or truncated file, no COMMIT, and an I/O fault injected by ZERO_FAULT.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
MAKER="${ZERO_BUILD_DIR:-$(dirname "$ZERO")}/tests/test_ckpt"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check NAME COMMAND...: runs the command, counts a failure when it fails
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
# expect_error NAME STATUS NEEDLE...: the last run exited with STATUS and printed exactly one
# stderr line "zero: error: ..." containing every NEEDLE
expect_error() {
    local name=$1 want=$2; shift 2
    check "$name: exit $want" test "$rc" -eq "$want"
    check "$name: one error line" test "$(wc -l <"$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
}
fresh() { rm -rf "$TMP/ck"; "$MAKER" --write "$TMP/ck" || { echo "FAIL cannot write a checkpoint"; exit 1; }; }
STEP="$TMP/ck/step_00000042"

# --- a good checkpoint
fresh
"$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "good: exit 0" test $rc -eq 0
check "good: no stderr" test ! -s "$TMP/err"
check "good: step" grep -q '^step  *42$' "$TMP/out"
check "good: world" grep -q '^world  *2 ranks$' "$TMP/out"
check "good: stage" grep -q '^stage  *2$' "$TMP/out"
check "good: dtypes" grep -q '^tensors  *7 sharded (8047 elements): 5 F32, 1 BF16, 1 I64$' "$TMP/out"
check "good: units and params" grep -q '^params  *3 (6037 elements)$' "$TMP/out"
check "good: checksums" grep -q '^checksums  *ok (14 tensors in 2 files verified)$' "$TMP/out"
"$ZERO" inspect "$STEP" --json >"$TMP/j" 2>"$TMP/err"; rc=$?
check "json: exit 0" test $rc -eq 0
check "json: fields and sizes on disk" "$PY" - "$TMP/j" "$STEP" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1])); step = sys.argv[2]
assert d["step"] == 42 and d["world"] == 2 and d["stage"] == 2 and d["verified"] is True, d
assert d["precision"] == "bf16" and d["optimizer"] == "AdamW" and d["units"] == 3, d
assert d["dtypes"] == {"F32": 5, "BF16": 1, "I64": 1}, d["dtypes"]
names = [t["name"] for t in d["tensors"]]
assert names[0] == "h.0/master" and "wte/params" in names and len(names) == 7, names
sizes = {f["name"]: f["bytes"] for f in d["files"]}
assert sizes == {n: os.path.getsize(os.path.join(step, n)) for n in ("rank_00000.safetensors", "rank_00001.safetensors")}, sizes
assert d["total_bytes"] == sum(sizes.values())
m = json.load(open(os.path.join(step, "manifest.json")))
assert m["format_version"] == 2 and len(m["save_id"]) == 32 and m["world"] == 2 and m["step"] == 42
EOF

# --- usage
"$ZERO" inspect --help >"$TMP/out" 2>"$TMP/err"; rc=$?
check "help: exit 0" test $rc -eq 0
check "help: usage" grep -q 'usage: zero inspect CKPT' "$TMP/out"
"$ZERO" inspect >"$TMP/out" 2>"$TMP/err"; rc=$?
check "no argument: exit 2" test $rc -eq 2
check "no argument: says what is expected" grep -q '^zero: error: inspect: expected a checkpoint directory (zero inspect --help)$' "$TMP/err"
"$ZERO" inspect "$TMP/ck" --frobnicate >"$TMP/out" 2>"$TMP/err"; rc=$?
check "unknown flag: exit 2" test $rc -eq 2
check "unknown flag: named" grep -q "'--frobnicate'" "$TMP/err"
"$ZERO" inspect "$TMP/ck" "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "two checkpoints: exit 2" test $rc -eq 2
"$ZERO" inspect "$TMP/nothing" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "no such path" 2 "$TMP/nothing" "No such file"
"$ZERO" inspect "$TMP" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "not a checkpoint" 1 "neither a step directory"

# --- one flipped byte inside the bf16 tensor of rank 1's file
"$PY" - "$STEP/rank_00001.safetensors" <<'EOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
lo, hi = h["wte/params"]["data_offsets"]
b[8 + n + (lo + hi) // 2] ^= 0x10
open(p, "wb").write(b)
EOF
"$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "flipped byte" 1 "rank_00001.safetensors" "'wte/params'" "checksum mismatch"
check "flipped byte: summary still printed" grep -q '^checksums  *FAILED$' "$TMP/out"
"$ZERO" inspect "$TMP/ck" --json >"$TMP/j" 2>"$TMP/err"; rc=$?
expect_error "flipped byte, json" 1 "'wte/params'"
check "flipped byte, json: verified false" "$PY" -c "import json,sys; d=json.load(open('$TMP/j')); assert d['verified'] is False and 'wte/params' in d['error']"

# --- a missing rank file, a truncated one, no COMMIT
fresh
rm "$STEP/rank_00000.safetensors"
"$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "missing file" 1 "rank_00000.safetensors" "missing"
fresh
truncate -s -1 "$STEP/rank_00001.safetensors"
"$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "truncated file" 1 "rank_00001.safetensors" "truncated"
fresh
rm "$STEP/COMMIT"
"$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "no COMMIT" 1 "no COMMIT" "$STEP"

# --- an I/O error injected into a real run through the environment
fresh
ZERO_FAULT="read:4:eio:once" "$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "injected read fault" 1 "Input/output error" "injected fault read:4:eio:once" ".safetensors"
ZERO_FAULT="write:1:eio" "$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "fault on an operation inspect never does: exit 0" test $rc -eq 0
ZERO_FAULT="read:x:eio" "$ZERO" inspect "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "bad ZERO_FAULT" 1 "read:x:eio" "expected OP:N:ERR"

exit $fail
