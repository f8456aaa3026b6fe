#!/usr/bin/env bash
# `zero train --val-data FILE`: validation on a file of its own instead of the held-out end of
# --data. The validation loss it reports is the loss of that file's rows computed two other ways:
# PyTorch's (tests/data/finetune/golden.json: the first training loss, at the initial weights, over
# the same 6 rows) and zero's own training loss at lr 0 with the file as --data; on 1 and 2 ranks.
# --data then trains whole; any form --data takes is read (here ShareGPT as one JSON array, a token
# file beside text); refusals name --val-data.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
M="$FT/qwen2_chat"
CHATS="$FT/chats.jsonl"
GOLD="$FT/golden.json"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
expect_error() { # NAME STATUS NEEDLE...: exit STATUS, one stderr line "zero: error: ..." with every NEEDLE
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(grep -c . "$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
    [ "$(grep -c . "$TMP/err")" -eq 1 ] || cat "$TMP/err"
}
run() { # run NAME ARGS...: zero train, --log-json to $TMP/NAME.json; a failure ends the test
    local name=$1; shift
    "$ZERO" train --seq 111 --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { echo "FAIL run $name: $ZERO train $*"; cat "$TMP/$name.err"; exit 1; }
}
field() { # field NAME STEP KEY: KEY of step STEP's record in $TMP/NAME.json (empty when absent)
    "$PY" -c "import json, sys
for l in open('$TMP/$1.json'):
    j = json.loads(l)
    if j.get('step') == $2 and '$3' in j: print(repr(j['$3']))"
}
near() { "$PY" -c "import sys; a, b, t = float('$1'), float('$2'), float('$3'); sys.exit(not abs(a - b) <= t * abs(b))"; }

# the validation file: the fine-tuning chats as ShareGPT, one JSON array (FastChat's form): zero
# packs it into the golden's 6 rows of 112 tokens
"$PY" - "$CHATS" "$TMP/val.json" <<'PYEOF'
import json, sys
frm = {"user": "human", "assistant": "gpt", "system": "system"}
rows = [{"conversations": [{"from": frm[m["role"]], "value": m["content"]} for m in json.loads(l)["messages"]]}
        for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=2)
PYEOF
G0=$("$PY" -c "import json; print(json.load(open('$GOLD'))['train']['losses'][0])")

# --- the validation loss with --val-data, at lr 0 (the weights stay the initial ones)
run val1 --init-from "$M" --data "$SRC/tests/data/tokenizer/fortunes.txt" --val-data "$TMP/val.json" --lr 0 \
    --steps 1 --micro-batch 6 --val-batches 1
check "the header names the validation file: 6 rows, all for validation" \
    grep -qF "validation: $TMP/val.json, JSONL through the tokenizer (vocab 800, loss mask), 6 rows of 112 tokens, all for validation" "$TMP/val1.out"
check "--data trains whole: no held-out split" grep -q "text through the tokenizer (vocab 800), [0-9]* tokens (train [0-9]*, val 0)" "$TMP/val1.out"
V1=$(field val1 1 val_loss)
check "a validation loss is reported ($V1)" test -n "$V1"
check "it is PyTorch's loss of those 6 rows at the initial weights ($G0, 1e-5)" near "$V1" "$G0" 1e-5
# (--data a text stream: the document mask is off, as for the training; with --data the file
# itself it is on unless turned off)
run asdata --init-from "$M" --data "$TMP/val.json" --lr 0 --steps 1 --micro-batch 6 --val-every 0 --doc-mask off
T1=$(field asdata 1 loss)
check "it is the training loss at lr 0 of the same file as --data ($T1, 1e-6)" near "$V1" "$T1" 1e-6
check "(with 6 rows, --data alone holds none out: no validation loss)" test -z "$(field asdata 1 val_loss)"
run val2 --init-from "$M" --data "$CHATS" --val-data "$TMP/val.json" --lr 0 --steps 1 --micro-batch 3 --ranks 2 \
    --stage 3 --val-batches 1 --doc-mask off
check "on 2 ranks at stage 3: the same validation loss ($(field val2 1 val_loss), 1e-6)" near "$(field val2 1 val_loss)" "$V1" 1e-6
# the document mask: each chat attends to itself, the validation as the training (PyTorch's loss of
# each chat in a row of its own: tests/data/finetune/golden_docs.json)
D0=$("$PY" -c "import json; print(json.load(open('$FT/golden_docs.json'))['train']['losses'][0])")
run val3 --init-from "$M" --data "$CHATS" --val-data "$TMP/val.json" --lr 0 --steps 1 --micro-batch 3 --ranks 2 \
    --stage 3 --val-batches 1
check "document mask on 2 ranks at stage 3: PyTorch's loss of each chat alone ($(field val3 1 val_loss), $D0, 1e-5)" \
    near "$(field val3 1 val_loss)" "$D0" 1e-5
run val4 --init-from "$M" --data "$SRC/tests/data/tokenizer/fortunes.txt" --val-data "$TMP/val.json" --lr 0 \
    --steps 1 --micro-batch 6 --val-batches 1 --doc-mask on
check "--doc-mask on over a text stream: its validation file's chats alone too" near "$(field val4 1 val_loss)" "$D0" 1e-5

# --- without --val-data: the last 5% of --data, as before (here a stream: its last tokens)
run held --init-from "$M" --data "$SRC/tests/data/tokenizer/fortunes.txt" --steps 1 --micro-batch 2 --seq 32
check "without --val-data: --data's held-out split" grep -q "tokens (train [0-9]*, val [1-9][0-9]*)" "$TMP/held.out"
check "without --val-data: its validation loss" test -n "$(field held 1 val_loss)"

# --- any form --data takes: a token file beside a text validation file, bytes without a tokenizer
"$ZERO" tokenize --tokenizer "$M" "$CHATS" --seq 111 -o "$TMP/chats.tok" >/dev/null 2>&1
run tok --init-from "$M" --data "$TMP/chats.tok" --val-data "$TMP/val.json" --lr 0 --steps 1 --micro-batch 6 \
    --val-batches 1
check "--data a token file, --val-data ShareGPT: the tokenizer is loaded for it, the same loss" \
    near "$(field tok 1 val_loss)" "$D0" 1e-5
run bytes --model tiny --data "$SRC/tests/data/tokenizer/fortunes.txt" --val-data "$SRC/tests/data/tokenizer/unicode.txt" \
    --seq 16 --steps 2 --micro-batch 2 --val-every 1
check "a preset reads both as bytes, validates every step" test -n "$(field bytes 1 val_loss)" -a -n "$(field bytes 2 val_loss)"

# --- refusals: each names --val-data
bad() { "$ZERO" train --seq 111 --steps 1 --micro-batch 2 --init-from "$M" --data "$CHATS" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
bad --val-data "$TMP/none.json"
expect_error "a missing file" 2 "--val-data '$TMP/none.json'"
printf '[\n{"conversations": [{"from": "tool", "value": "x"}]}\n]\n' >"$TMP/badval.json"
bad --val-data "$TMP/badval.json"
expect_error "a bad example" 2 "--val-data: $TMP/badval.json:2:" "from 'tool'"
"$ZERO" tokenize --tokenizer "$M" "$CHATS" --seq 99 -o "$TMP/rows100.tok" >/dev/null 2>&1
bad --val-data "$TMP/rows100.tok"
expect_error "packed rows of another length" 2 "--val-data: '$TMP/rows100.tok' holds packed rows of 100 tokens" "--seq 99"
printf 'short' >"$TMP/short.txt"
bad --val-data "$TMP/short.txt"
expect_error "shorter than a sequence" 2 "--val-data: sequence length 111 is longer than the data"
bad --val-data "$TMP/val.json" --log-json "$TMP/val.json"
expect_error "--log-json over it" 2 "--log-json '$TMP/val.json' is the file --val-data"
exit $fail
