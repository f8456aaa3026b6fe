#!/usr/bin/env bash
# examples/finetune.c: a program that fine-tunes a model directory through the library's training
# loop (models/trainer) trains the same steps as `zero train` with the same settings: the chat
# fixture (tests/data/finetune) for 4 steps, every loss and gradient norm bitwise equal, at stage 1
# on 1 rank, with LoRA (r 4) at stage 2, with DPO on preference pairs, and at stage 3 on 3 ranks
# (the example through mpirun); a checkpoint it
# saves is read by `zero inspect`; a model directory that is not one fails with one line.
set -u
: "${ZERO:?set ZERO to the zero binary}"
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
M="$FT/qwen2_chat"
D="$FT/chats.jsonl"
EX="$(dirname "$ZERO")/examples/finetune"
[ -x "$EX" ] || { echo "SKIP: $EX is not built (the model layer needs OpenBLAS)"; exit 77; }
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# the CLI's records as the example prints them: "step N loss L grad_norm G"
cli_steps() { sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*"grad_norm":\([^,]*\),.*/step \1 loss \2 grad_norm \3/p' "$1"; }
ex_steps() { sed -n 's/^\(step [0-9]* loss [^ ]* grad_norm [^ ]*\) .*/\1/p' "$1"; }
compare() { # NAME RANKS STAGE MICRO_BATCH [FLAG VALUE (zero train's) FLAG VALUE (the example's)]
    local name=$1 n=$2 stage=$3 mb=$4; shift 4
    local cflags=() eflags=()
    [ $# -ge 4 ] && cflags=("$1" "$2") && eflags=("$3" "$4")
    "$ZERO" train --init-from "$M" --data "$D" --seq 111 --steps 4 --lr 1e-2 --micro-batch "$mb" --stage "$stage" \
        --ranks "$n" --val-every 0 --log-json "$TMP/$name.json" "${cflags[@]}" >"$TMP/$name.cli" 2>&1 ||
        { echo "FAIL $name: zero train"; cat "$TMP/$name.cli"; fail=1; return; }
    local launch=()
    [ "$n" -gt 1 ] && launch=(mpirun --oversubscribe -np "$n")
    "${launch[@]}" "$EX" "$M" "$D" --steps 4 --seq 111 --lr 1e-2 --micro-batch "$mb" --stage "$stage" \
        "${eflags[@]}" >"$TMP/$name.ex" 2>&1 || { echo "FAIL $name: the example"; cat "$TMP/$name.ex"; fail=1; return; }
    check "$name: 4 steps" test "$(ex_steps "$TMP/$name.ex" | wc -l)" -eq 4
    check "$name: the example's losses and gradient norms are zero train's, bitwise" \
        test "$(ex_steps "$TMP/$name.ex")" = "$(cli_steps "$TMP/$name.json")"
    [ "$(ex_steps "$TMP/$name.ex")" = "$(cli_steps "$TMP/$name.json")" ] ||
        diff <(ex_steps "$TMP/$name.ex") <(cli_steps "$TMP/$name.json")
}
compare s1 1 1 4
compare lora 1 2 4 --lora r=4 --lora 4
check "LoRA trains otherwise than the full fine-tune" test "$(ex_steps "$TMP/lora.ex" | sed -n 2p)" != "$(ex_steps "$TMP/s1.ex" | sed -n 2p)"
# a preference objective through the trainer's table: DPO on the pairs, zero train's steps bitwise
P="$FT/pairs.jsonl"
"$ZERO" train --init-from "$M" --data "$P" --seq 63 --steps 3 --lr 1e-2 --micro-batch 4 --stage 1 --objective dpo --val-every 0 \
    --log-json "$TMP/dpo.json" >"$TMP/dpo.cli" 2>&1 || { echo "FAIL dpo: zero train"; cat "$TMP/dpo.cli"; fail=1; }
"$EX" "$M" "$P" --seq 63 --steps 3 --lr 1e-2 --micro-batch 4 --objective dpo >"$TMP/dpo.ex" 2>&1 ||
    { echo "FAIL dpo: the example"; cat "$TMP/dpo.ex"; fail=1; }
check "dpo: 3 steps, the first at ln 2" grep -q "^step 1 loss 0.6931471" "$TMP/dpo.ex"
check "dpo: the example's losses and gradient norms are zero train's, bitwise" \
    test "$(ex_steps "$TMP/dpo.ex")" = "$(cli_steps "$TMP/dpo.json")" -a "$(ex_steps "$TMP/dpo.ex" | wc -l)" -eq 3
if command -v mpirun >/dev/null && "$ZERO" train --help 2>&1 | grep -q -- --ranks; then
    compare s3r3 3 3 2
    check "3 ranks x 2 and 1 rank x 4 train differently (the runs are not one run twice)" \
        test "$(ex_steps "$TMP/s3r3.ex" | head -1)" != "$(ex_steps "$TMP/s1.ex" | head -1)"
else
    echo "SKIP: 3 ranks (no mpirun in this build)"
fi
"$EX" "$M" "$D" --steps 2 --seq 111 --save "$TMP/ck" >"$TMP/save.out" 2>&1
check "--save: the example saves its last step" grep -q "^saved step 2$" "$TMP/save.out"
"$ZERO" inspect "$TMP/ck" >"$TMP/inspect.out" 2>&1
check "zero inspect reads the example's checkpoint (step 2)" grep -Eq "^step +2$" "$TMP/inspect.out"
"$EX" "$TMP" "$D" --steps 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "not a model directory: exit 1" test "$rc" -eq 1
check "not a model directory: one line naming it" test "$(grep -c . "$TMP/err")" -eq 1
check "... 'finetune: error:' and the path" grep -qF "finetune: error: " "$TMP/err"
"$EX" "$M" "$D" --steps x >"$TMP/out" 2>"$TMP/err"
check "--steps x: exit 2, named" test $? -eq 2 -a "$(grep -c "'x'" "$TMP/err")" -eq 1
exit $fail
