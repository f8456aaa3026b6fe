#!/usr/bin/env bash
# A checkpoint's manifest.json altered at each field the engine relies on (a parameter's offset
# and shape, the stage, the precision, the loss scaler's delayed_shift, bytes after the JSON, the
# checksum itself) is refused, with one "zero: error:" line naming the field and no output, by
# every command that reads a manifest: inspect, train --resume, export, train --init-from. Each
# edit is tried twice: as is (the manifest's checksum no longer matches) and signed again
# (tests/manifest_tool.py: the validation of the engine's part catches it). The two faults that
# a fault campaign found before the checksum existed are among them: an offset edited by one
# (export wrote a wrong tensor) and a deleted delayed_shift (--resume crashed).
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TOOL="$(cd "$(dirname "$0")/.." && pwd)/manifest_tool.py"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
D="$TMP/d"
STEP="$D/step_00000002"
"$ZERO" train --model tiny --seq 32 --micro-batch 4 --steps 2 --val-every 0 --precision fp16 --save "$D" \
    >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; echo "FAIL cannot train"; exit 1; }
cp "$STEP/manifest.json" "$TMP/good.json"

# every command on the intact checkpoint: the baseline
run() { # run CMD: one of the four readers; sets rc, leaves stderr in $TMP/err
    rm -f "$TMP/x.safetensors"
    case $1 in
    inspect) "$ZERO" inspect "$D" ;;
    resume) "$ZERO" train --model tiny --seq 32 --micro-batch 4 --steps 3 --val-every 0 --precision fp16 --resume "$D" ;;
    export) "$ZERO" export "$D" -o "$TMP/x.safetensors" ;;
    init) "$ZERO" train --seq 32 --micro-batch 4 --steps 1 --val-every 0 --init-from "$D" ;;
    esac >"$TMP/out" 2>"$TMP/err"
    rc=$?
}
for cmd in inspect resume export init; do
    cp "$TMP/good.json" "$STEP/manifest.json"
    run $cmd
    check "intact: $cmd succeeds" test $rc -eq 0
done

# refused NAME NEEDLE: the last run refused the manifest with one line naming NEEDLE, no output
refused() {
    local name=$1 needle=$2
    check "$name: exit 1 (got $rc)" test $rc -eq 1
    check "$name: one error line" test "$(grep -c '^zero: error: ' "$TMP/err")" -eq 1 -a "$(wc -l <"$TMP/err")" -eq 1
    check "$name: names the manifest" grep -qF "manifest.json" "$TMP/err"
    check "$name: mentions '$needle'" grep -qF -- "$needle" "$TMP/err"
    check "$name: no exported file" test ! -e "$TMP/x.safetensors"
}
# corrupt NAME PYTHON NEEDLE: the edit unsigned (checksum) and signed again (the field's check)
corrupt() {
    local name=$1 edit=$2 needle=$3
    for cmd in inspect resume export init; do
        cp "$TMP/good.json" "$STEP/manifest.json"
        "$PY" "$TOOL" edit "$STEP/manifest.json" "$edit" --nosign
        run $cmd
        refused "$name, unsigned, $cmd" "checksum mismatch"
        cp "$TMP/good.json" "$STEP/manifest.json"
        "$PY" "$TOOL" edit "$STEP/manifest.json" "$edit"
        run $cmd
        refused "$name, signed again, $cmd" "$needle"
    done
}
corrupt "offset + 1" 'm["units"][1]["params"][1]["offset"] += 1' "offset 65: expected 64"
corrupt "offset - 1" 'm["units"][1]["params"][2]["offset"] -= 1' "an overlap"
corrupt "shape" 'm["units"][2]["params"][3]["shape"][0] += 1' "'h.1."
corrupt "stage" 'm["stage"] = 4' '"stage": expected 0, 1, 2 or 3'
corrupt "precision" 'm["precision"] = "fp8"' '"precision": expected'
corrupt "delayed_shift deleted" 'del m["loss_scaler"]["delayed_shift"]' '"loss_scaler.delayed_shift"'
corrupt "unit numel" 'm["units"][0]["numel"] += 16' "unit 'embeddings': its parameters cover"
corrupt "engine_step" 'm["engine_step"] = 5' '"engine_step" 5'

# bytes after the JSON, a checksum that is wrong, missing, or not hex
for cmd in inspect resume export init; do
    cp "$TMP/good.json" "$STEP/manifest.json"
    printf 'x' >>"$STEP/manifest.json"
    run $cmd
    refused "trailing byte, $cmd" "bytes after the JSON value"
    cp "$TMP/good.json" "$STEP/manifest.json"
    printf '\n{}' >>"$STEP/manifest.json"
    run $cmd
    refused "a second object, $cmd" "bytes after the JSON value"
    cp "$TMP/good.json" "$STEP/manifest.json"
    "$PY" "$TOOL" edit "$STEP/manifest.json" 'm["manifest_crc32c"] = "%08x" % (int(m["manifest_crc32c"], 16) ^ 1)' --nosign
    run $cmd
    refused "checksum one bit off, $cmd" "checksum mismatch"
    cp "$TMP/good.json" "$STEP/manifest.json"
    "$PY" "$TOOL" edit "$STEP/manifest.json" 'del m["manifest_crc32c"]' --nosign
    run $cmd
    refused "checksum deleted, $cmd" 'no "manifest_crc32c"'
    cp "$TMP/good.json" "$STEP/manifest.json"
    "$PY" "$TOOL" edit "$STEP/manifest.json" 'm["manifest_crc32c"] = "XYZ"' --nosign
    run $cmd
    refused "checksum not hex, $cmd" "8 lowercase hex digits"
done

# one changed byte anywhere (a digit, a letter, whitespace kept) is refused by the checksum
cp "$TMP/good.json" "$STEP/manifest.json"
"$PY" - "$STEP/manifest.json" "$TMP/good.json" <<'PY' >"$TMP/offsets"
import sys
b = open(sys.argv[2], "rb").read()
end = b.rindex(b'"manifest_crc32c"')
# every 97th byte before the checksum that can change into another printable byte and still parse
print(" ".join(str(i) for i in range(0, end, 97) if chr(b[i]).isalnum()))
PY
n=0
for off in $(cat "$TMP/offsets"); do
    cp "$TMP/good.json" "$STEP/manifest.json"
    "$PY" -c "import sys; p = sys.argv[1]; o = int(sys.argv[2]); b = bytearray(open(p, 'rb').read()); b[o] = ord('7') if b[o] != ord('7') else ord('8'); open(p, 'wb').write(b)" "$STEP/manifest.json" "$off"
    "$ZERO" inspect "$D" >/dev/null 2>"$TMP/err"; rc=$?
    if [ $rc -ne 1 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ]; then echo "FAIL byte $off: rc $rc: $(cat "$TMP/err")"; fail=1; fi
    n=$((n + 1))
done
check "$n single-byte edits all refused by inspect" test $n -gt 10
# the run's record, signed again with a value out of range: --resume names the field
for edit in "user.seq=0:m['user']['seq'] = 0" "user.seed=-1:m['user']['seed'] = -1" \
            "user.global_batch=0:m['user']['global_batch'] = 0" "user.global_batch=2^62:m['user']['global_batch'] = 2**62"; do
    cp "$TMP/good.json" "$STEP/manifest.json"
    "$PY" "$TOOL" edit "$STEP/manifest.json" "${edit#*:}"
    run resume
    field=${edit%%=*}
    check "$field out of range: resume exits 1 (got $rc)" test $rc -eq 1
    check "$field out of range: one line naming it" sh -c "test \$(wc -l <'$TMP/err') -eq 1 && grep -qF '$field: expected a whole number' '$TMP/err'"
done
cp "$TMP/good.json" "$STEP/manifest.json"
run inspect
check "restored: inspect succeeds" test $rc -eq 0
exit $fail
