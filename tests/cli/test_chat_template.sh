#!/usr/bin/env bash
# `zero tokenize` with the model's own chat template: a tokenizer directory whose chat_template.jinja
# (or tokenizer_config.json's chat_template) is Qwen 2.5's renders chats with it by default — the ids
# equal transformers' (tests/data/chat_template/expected.jsonl, scripts/make_chat_template_fixtures.py)
# — and --chat-template chatml forces the built-in format; a template outside the subset or one that
# raises is one error line.
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
}
run() { "$ZERO" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
# the ids transformers gave for TEMPLATE over conversation CONV (without the generation prompt)
want_ids() {
    grep -F "\"template\": \"$1\", \"conv\": $2, \"add_generation_prompt\": false" "$C/expected.jsonl" |
        sed 's/.*"ids": \[\([^]]*\)\].*/\1/; s/,//g'
}

T="$TMP/qwen"
mkdir -p "$T"
cp "$SRC/tests/data/tokenizer/qwen2/tokenizer.json" "$T/"
printf '{"eos_token": "<|im_end|>"}' >"$T/tokenizer_config.json"
cp "$C/qwen2.5.jinja" "$T/chat_template.jinja"
for conv in 1 2 3 6; do
    sed -n "$((conv + 1))p" "$C/conversations.jsonl" >"$TMP/c.jsonl"
    run tokenize --tokenizer "$T" "$TMP/c.jsonl" --print
    want="$(want_ids qwen2.5 "$conv") 2" # then EOS (<|im_end|>, id 2)
    check "conversation $conv: the model's template gives transformers' ids" test "$rc" -eq 0 -a "$(cat "$TMP/out")" = "$want"
done
# the default system prompt is the template's: the built-in chatml, forced, has none
sed -n 2p "$C/conversations.jsonl" >"$TMP/c.jsonl"
run tokenize --tokenizer "$T" "$TMP/c.jsonl" --print --chat-template chatml
check "--chat-template chatml forces the built-in format (other ids)" test "$rc" -eq 0 -a "$(cat "$TMP/out")" != "$(want_ids qwen2.5 1) 2"
run tokenize --tokenizer "$T" "$TMP/c.jsonl" --print --chat-template model
check "--chat-template model is the template" test "$rc" -eq 0 -a "$(cat "$TMP/out")" = "$(want_ids qwen2.5 1) 2"
# a template outside the subset: one line naming the construct and its line
printf 'line one\n{{ messages|wordwrap(3) }}' >"$T/chat_template.jinja"
run tokenize --tokenizer "$T" "$TMP/c.jsonl" -o "$TMP/x.tok"
expect_error "unsupported filter" 1 "chat template line 2: filter 'wordwrap' is not supported yet" "--chat-template"
# raise_exception: the example is bad (skippable), with the template's message
cp "$C/gemma-2.jinja" "$T/chat_template.jinja"
sed -n 1p "$C/conversations.jsonl" >"$TMP/c.jsonl"
run tokenize --tokenizer "$T" "$TMP/c.jsonl" -o "$TMP/x.tok"
expect_error "raise_exception" 1 "c.jsonl:1" "System role not supported"
exit $fail
