#!/usr/bin/env bash
# Hostile files on the paths `zero train --data` and `zero sample` read (docs/SECURITY.md): each is
# refused with one `zero: error:` line naming the file, exit 1 or 2, at once — never a hang on a
# FIFO, never a read of a file larger than its kind may be (sparse files: nothing is allocated),
# never a symbolic link followed out of a model or tokenizer directory, never a JSON text parsed
# past its nesting limit — and a data directory's links are skipped. Byte-level and tokenized
# data, sample --tokenizer, generation_config.json, tokenizer_config.json (the chat template), a
# LoRA adapter directory (--lora-from: adapter_config.json, adapter_model.safetensors); and
# `zero export` into a directory where links were planted: replaced, never followed.
set -u
: "${ZERO:?set ZERO to the zero binary}"
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
# refused NAME STATUS NEEDLE... -- ARGS...: `zero ARGS` (at most 30 s) exits STATUS with one error
# line holding every NEEDLE
refused() {
    local name=$1 want=$2; shift 2
    local needles=()
    while [ "$1" != -- ]; do needles+=("$1"); shift; done
    shift
    timeout 30 "$ZERO" "$@" >out 2>err
    local rc=$?
    check "$name: exit $want, no hang (got $rc)" test "$rc" -eq "$want"
    check "$name: one 'zero: error:' line" test "$(grep -c . err)" -eq 1 -a "$(grep -c '^zero: error: ' err)" -eq 1
    for n in "${needles[@]}"; do check "$name: mentions '$n'" grep -qF -- "$n" err; done
    [ "$(grep -c . err)" -eq 1 ] && grep -q '^zero: error: ' err || cat err
}
cp -r "$FT/qwen2_chat" m
Q=(--prompt hi --tokens 3 --temperature 0)
TR=(--steps 1 --seq 16 --val-every 0)
"$ZERO" sample --init-from m "${Q[@]}" >out 2>err
check "the model directory samples as it is (exit $?)" test -s out -a ! -s err

# --- train --data: data files
truncate -s 5G big.txt
refused "a 5 GiB text file, bytes" 2 big.txt "5368709120 bytes" "refused before reading" -- train --model tiny --data big.txt "${TR[@]}"
refused "a 5 GiB text file, through the tokenizer" 2 big.txt "5368709120 bytes" -- train --init-from m --data big.txt "${TR[@]}"
truncate -s 100M big.jsonl # one line of 100 MiB (NUL bytes): refused after 64 MiB, not held whole
refused "a 100 MiB JSONL line" 2 "big.jsonl:1" "64 MiB" -- train --init-from m --data big.jsonl "${TR[@]}"
mkfifo fifo
refused "a FIFO as data, bytes" 2 "fifo" "not a regular file" -- train --model tiny --data fifo "${TR[@]}"
refused "a FIFO as data, through the tokenizer" 2 "fifo" "not a regular file" -- train --init-from m --data fifo "${TR[@]}"
refused "a FIFO as --init-from, train" 2 "fifo" "not a regular file" -- train --init-from fifo "${TR[@]}"
refused "a FIFO as --init-from, sample" 2 "fifo" "not a regular file" -- sample --init-from fifo "${Q[@]}"
python3 -c "print('{\"text\": ' + '[' * 100 + ']' * 100 + '}')" >deep.jsonl
refused "a JSONL line nested 101 deep" 2 "deep.jsonl:1" "nested more than 64" -- train --init-from m --data deep.jsonl "${TR[@]}"
# a data directory: its regular files; a link in it (here to a file outside) is skipped
mkdir d
for i in $(seq 200); do echo "line $i of some text to train on"; done >d/a.txt
echo "not part of the data" >outside.txt
ln -s "$TMP/outside.txt" d/b.txt
"$ZERO" train --model tiny --data d "${TR[@]}" >out 2>err
check "a data directory with a link to a file outside: trains on its one regular file" \
    grep -q "text, 1 file, $(wc -c <d/a.txt) tokens" out
[ -s err ] && cat err

# --- sample: generation_config.json beside the tokenizer
mkfifo m/generation_config.json
refused "generation_config.json a FIFO" 1 "m/generation_config.json" "not a regular file" -- sample --init-from m "${Q[@]}"
rm m/generation_config.json
ln -s "$TMP/outside.txt" m/generation_config.json
refused "generation_config.json a link out of the directory" 1 "m/generation_config.json" "outside" -- sample --init-from m "${Q[@]}"
rm m/generation_config.json
truncate -s 2M m/generation_config.json
refused "a 2 MiB generation_config.json" 1 "2097152 bytes" "refused before reading" -- sample --init-from m "${Q[@]}"
python3 -c "print('{\"eos_token_id\": ' + '[' * 100 + ']' * 100 + '}')" >m/generation_config.json
refused "generation_config.json nested 101 deep" 1 "nested more than 64" -- sample --init-from m "${Q[@]}"
echo '{"eos_token_id": 1e300}' >m/generation_config.json
"$ZERO" sample --init-from m "${Q[@]}" >out 2>err
check "an eos_token_id of 1e300 is no stop token (not converted): samples" test -s out -a ! -s err
rm m/generation_config.json

# --- tokenizer_config.json (the chat template) and sample --tokenizer
cp m/tokenizer_config.json tc.json
python3 -c "print('[' * 100 + ']' * 100)" >m/tokenizer_config.json
refused "tokenizer_config.json nested 101 deep, sample --chat" 1 "m/tokenizer_config.json" "nested more than 64" -- \
    sample --init-from m --chat "${Q[@]}"
refused "tokenizer_config.json nested 101 deep, train on chats" 1 "m/tokenizer_config.json" "nested more than 64" -- \
    train --init-from m --data "$FT/chats.jsonl" "${TR[@]}"
truncate -s 20M m/tokenizer_config.json
refused "a 20 MiB tokenizer_config.json" 1 "20971520 bytes" "refused before reading" -- sample --init-from m --chat "${Q[@]}"
rm m/tokenizer_config.json
ln -s "$TMP/tc.json" m/tokenizer_config.json
refused "tokenizer_config.json a link out of the model directory" 1 "tokenizer_config.json" "outside" -- \
    sample --init-from m --chat "${Q[@]}"
rm m/tokenizer_config.json
cp tc.json m/tokenizer_config.json
mkdir t
ln -s "$TMP/m/tokenizer.json" t/tokenizer.json
refused "sample --tokenizer DIR whose tokenizer.json links out of it" 1 "t/tokenizer.json" "outside" -- \
    sample --init-from m --tokenizer t "${Q[@]}"
truncate -s 200M t2.json
refused "sample --tokenizer FILE of 200 MiB" 1 "209715200 bytes" "refused before reading" -- \
    sample --init-from m --tokenizer t2.json "${Q[@]}"

# --- train --lora-from: a PEFT adapter directory (adapter_config.json, adapter_model.safetensors)
LB=(--init-from "$SRC/tests/data/decoder/llama_gqa4" --data "$SRC/tests/data/decoder/tokens.bin" "${TR[@]}")
cp -r "$SRC/tests/data/lora/llama_gqa4" ad
"$ZERO" train "${LB[@]}" --lora-from ad >out 2>err
check "the adapter directory trains as it is (exit $?)" test ! -s err
[ -s err ] && cat err
cp ad/adapter_config.json ac.json
rm ad/adapter_config.json
ln -s "$TMP/ac.json" ad/adapter_config.json
refused "adapter_config.json a link out of the adapter directory" 2 "ad/adapter_config.json" "outside" -- \
    train "${LB[@]}" --lora-from ad
rm ad/adapter_config.json
truncate -s 2M ad/adapter_config.json
refused "a 2 MiB adapter_config.json" 2 "2097152 bytes" "refused before reading" -- train "${LB[@]}" --lora-from ad
python3 -c "print('{\"r\": ' + '[' * 100 + ']' * 100 + '}')" >ad/adapter_config.json
refused "adapter_config.json nested 101 deep" 2 "nested more than 64" -- train "${LB[@]}" --lora-from ad
cp ac.json ad/adapter_config.json
mv ad/adapter_model.safetensors am.safetensors
ln -s "$TMP/am.safetensors" ad/adapter_model.safetensors
refused "adapter_model.safetensors a link out of the adapter directory" 1 "adapter_model.safetensors" "outside" -- \
    train "${LB[@]}" --lora-from ad

# --- export: links planted in the output directory are replaced, never followed
"$ZERO" train --model tiny "${TR[@]}" --save ck >out 2>err || { echo "FAIL train --save"; cat err; exit 1; }
mkdir ex
echo precious >victim
for f in config.json model.safetensors model.safetensors.tmp config.json.tmp; do ln -s "$TMP/victim" "ex/$f"; done
(umask 027 && "$ZERO" export ck -o ex >out 2>err)
check "export into a directory with planted links: exit 0 (got $?)" test ! -s err
check "export: the links' target is untouched" test "$(cat victim)" = precious
check "export: config.json and model.safetensors are regular files of mode 0640 (umask 027)" \
    test "$(stat -c '%F %a' ex/config.json ex/model.safetensors | sort -u)" = "regular file 640"
check "export: no temporary file left" test -z "$(ls ex | grep '\.tmp$')"

[ "$fail" -eq 0 ] && echo "test_hostile_inputs: all checks passed"
exit "$fail"
