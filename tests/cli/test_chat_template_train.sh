#!/usr/bin/env bash
# `zero train`, `zero tokenize` and `zero sample --chat` on a model directory whose chat template is
# not ChatML's: Qwen 2.5's (its default system prompt, tools in the system turn, <tool_call> blocks).
# The chats (tests/data/chat_template/conversations.jsonl: a plain one, one with tools and a tool
# call, one in OpenAI's form with arguments as a JSON string and content null) give the ids and loss
# masks of masks.jsonl (transformers' renders; scripts/make_chat_template_fixtures.py), zero train
# reads exactly those rows (bitwise the run on the token file zero tokenize packs), the checkpoint's
# run record holds the template, --resume and sample --chat with another template are refused in one
# line naming both, and sample --chat feeds the ids transformers renders with the recorded template.
set -u
: "${ZERO:?set ZERO to the zero binary}"
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
C="$SRC/tests/data/chat_template"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
expect_error() { # NAME STATUS NEEDLE...
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(wc -l <"$TMP/err")" -eq 1
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || cat "$TMP/err"
}
run() { "$ZERO" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }

# the fine-tune fixture's tiny Qwen 2 (RoPE: a longer context only lifts the bound) with Qwen 2.5's template
M="$TMP/model"
mkdir -p "$M"
cp "$SRC/tests/data/finetune/qwen2_chat/"{model.safetensors,tokenizer.json} "$M/"
sed 's/"max_position_embeddings": 128/"max_position_embeddings": 1024/' \
    "$SRC/tests/data/finetune/qwen2_chat/config.json" >"$M/config.json"
printf '{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": null}' >"$M/tokenizer_config.json"
cp "$C/qwen2.5.jinja" "$M/chat_template.jinja"
CONVS="1 13 15"
for c in $CONVS; do sed -n "$((c + 1))p" "$C/conversations.jsonl"; done >"$TMP/chats.jsonl"

# --- the ids and masks: masks.jsonl's, then EOS (<|im_end|>, id 2) trained after an assistant turn
run tokenize --tokenizer "$M" "$TMP/chats.jsonl" --print --json
check "tokenize --print --json: one line a chat" test "$rc" -eq 0 -a "$(wc -l <"$TMP/out")" -eq 3
k=0
for c in $CONVS; do
    k=$((k + 1))
    want=$(grep -F "\"template\": \"qwen2.5\", \"conv\": $c," "$C/masks.jsonl" |
        sed 's/.*"ids": \[\([^]]*\)\], "mask": \[\([^]]*\)\]}/{"ids": [\1, 2], "mask": [\2, 1]}/')
    check "conversation $c: ids and loss mask equal the fixture's (transformers' render, tool calls trained)" \
        test -n "$want" -a "$(sed -n "${k}p" "$TMP/out")" = "$want"
done
# the tool call's tokens are among the trained ones, the tools list and the tool result are not
ones=$(sed -n 2p "$TMP/out" | sed 's/.*"mask": \[\([^]]*\)\].*/\1/' | tr -d ' ' | tr ',' '\n' | grep -c 1)
check "conversation 13: 78 + EOS trained tokens of 584 (the call, the answer, their ends of turn)" test "$ones" -eq 79

# --- zero train reads those rows: bitwise the run on the token file zero tokenize packs from them
run tokenize --tokenizer "$M" "$TMP/chats.jsonl" --seq 600 -o "$TMP/chats.tok"
check "tokenize --seq 600 -o: packed" test "$rc" -eq 0
train() { # train NAME ARGS... (--init-from the model unless --resume)
    local name=$1; shift
    local from=(--init-from "$M")
    [ "$1" = --resume ] && from=()
    "$ZERO" train "${from[@]}" --lr 1e-2 --steps 2 --micro-batch 3 --log-json "$TMP/$name.json" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" || { echo "FAIL zero train $*"; cat "$TMP/$name.err"; exit 1; }
}
train jsonl --data "$TMP/chats.jsonl" --seq 600 --save "$TMP/ck"
train tokfile --data "$TMP/chats.tok"
steps() { grep '"step"' "$TMP/$1.json" | sed 's/,"step_ms.*//'; }
check "train on the JSONL: 3 rows of 601 tokens through the model's template" \
    grep -q "JSONL through the tokenizer (vocab 800, loss mask), 3 rows of 601 tokens" "$TMP/jsonl.out"
check "train on the JSONL = train on the packed token file, bitwise (the same ids and mask)" \
    test -n "$(steps jsonl)" -a "$(steps jsonl)" = "$(steps tokfile)"

# --- the run record holds the template (its name, and the text resume and sample compare byte for byte)
MAN=$(ls "$TMP"/ck/step_*/manifest.json)
check "the run record: chat_template model" grep -q '"chat_template":[[:space:]]*"model"' "$MAN"
check "the run record: the template's text" grep -qF '"chat_template_text":	"{%- if tools %}\n    {{- '"'"'<|im_start|>system\\n'"'"' }}' "$MAN"
train resumed --resume "$TMP/ck" --data "$TMP/chats.jsonl" --steps 3
check "--resume with the same template trains on" grep -q '"step":3,' "$TMP/resumed.json"

# --- sample --chat: the prompt rendered with the recorded template (Qwen 2.5's default system prompt)
P="Only a question, no answer yet?"
want=$(grep -F '"template": "qwen2.5", "conv": 5, "add_generation_prompt": true' "$C/expected.jsonl" |
    sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/ //g')
run sample --init-from "$TMP/ck" --chat --prompt "$P" --tokens 1 --temperature 0 --json
got=$(sed 's/.*"prompt":\[\([^]]*\)\].*/\1/' "$TMP/out")
check "sample --chat feeds transformers' ids (generation prompt, default system prompt)" test "$rc" -eq 0 -a -n "$want" -a "$got" = "$want"
check "sample --chat: the model's template" grep -q '"chat_template":"model"' "$TMP/out"

# --- another template in the model directory: resume and sample --chat refuse, naming both
printf '%s\n' '{#- a local edit #}' | cat - "$C/qwen2.5.jinja" >"$M/chat_template.jinja"
run train --resume "$TMP/ck" --data "$TMP/chats.jsonl" --steps 4
expect_error "--resume with another template" 2 "--resume $TMP/ck" "the tokenizer in $M" \
    "line 1: '{#- a local edit #}' here, '{%- if tools %}' in the record" "--chat-template NAME"
run sample --init-from "$TMP/ck" --chat --prompt "$P" --tokens 1
expect_error "sample --chat with another template" 2 "checkpoint $TMP/ck" "the tokenizer in $M" \
    "line 1: '{#- a local edit #}' here, '{%- if tools %}' in the record"
# a built-in format named on the command line is the user's choice: no refusal
run sample --init-from "$TMP/ck" --chat --chat-template chatml --prompt "$P" --tokens 1 --json
check "sample --chat --chat-template chatml: runs, other ids" test "$rc" -eq 0 -a "$(sed 's/.*"prompt":\[\([^]]*\)\].*/\1/' "$TMP/out")" != "$want"
# a built-in format refuses what only the model's template renders
run tokenize --tokenizer "$M" "$TMP/chats.jsonl" --print --chat-template chatml
expect_error "tools in the built-in chatml format" 1 "chats.jsonl:2" "a tools list in the built-in chat format chatml is not supported yet"
exit $fail
