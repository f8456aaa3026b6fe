#!/usr/bin/env bash
# `zero sample` on a model trained a few steps: the same seed gives the same text and another
# seed another; greedy (temperature 0) ignores the seed, equals --top-k 1, and is the argmax path
# of an independent numpy forward (tests/data/gpt2_ref.py), also past the context length (with a
# note on stderr exactly when the context slides); --top-k
# draws only among the k most likely tokens; a checkpoint and its export sample alike; a
# non-byte vocabulary takes and prints token ids (--prompt-ids); a LoRA run's checkpoint samples as its
# merged export (tests/cli/test_lora.sh: on Hugging Face bases, and --lora-from); bad flags are
# refused with one line.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
DATA_DIR="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/data"
REF="$DATA_DIR/gpt2_ref.py"
"$PY" -c 'import numpy' || { echo "FAIL numpy is required (scripts/deps.sh installs python3-numpy)"; exit 1; }
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
expect_error() { # NAME STATUS NEEDLE...: exit STATUS, one stderr line "zero: error: ..." with every NEEDLE
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(wc -l <"$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
}
sample() { # sample OUT ARGS...: zero sample into $TMP/OUT; a failure ends the test
    local out=$1; shift
    "$ZERO" sample "$@" >"$TMP/$out" 2>"$TMP/err" || { echo "FAIL zero sample $*"; cat "$TMP/err"; exit 1; }
}
tokens() { "$PY" -c "import json, sys; print(*json.load(open(sys.argv[1]))['tokens'])" "$TMP/$1"; }
differ() { ! cmp -s "$1" "$2"; }
ids() { printf '%s' "$1" | od -An -tu1 -v; }

"$ZERO" train --model tiny --seq 32 --steps 30 --micro-batch 8 --lr 3e-3 --val-every 0 --save "$TMP/ck" \
    >"$TMP/train.out" 2>&1 || { echo "FAIL train"; cat "$TMP/train.out"; exit 1; }
"$ZERO" export "$TMP/ck" -o "$TMP/m.safetensors" >/dev/null || { echo "FAIL export"; exit 1; }
P="The "

# --- seeded sampling is deterministic
sample a --init-from "$TMP/ck" --prompt "$P" --tokens 64 --seed 7
sample b --init-from "$TMP/ck" --prompt "$P" --tokens 64 --seed 7
sample c --init-from "$TMP/ck" --prompt "$P" --tokens 64 --seed 8
check "prints the prompt, 64 bytes and a newline" test "$(wc -c <"$TMP/a")" -eq 69 -a "$(head -c 4 "$TMP/a")" = "$P"
check "same seed, same text" cmp -s "$TMP/a" "$TMP/b"
check "another seed, another text" differ "$TMP/a" "$TMP/c"
sample aj --init-from "$TMP/ck" --prompt "$P" --tokens 64 --seed 7 --json
check "--json tokens are the printed bytes" "$PY" - "$TMP/aj" "$TMP/a" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); text = open(sys.argv[2], "rb").read()
assert j["prompt"] == list(b"The ") and bytes(j["tokens"]) == text[4:-1], j
assert j["model"] == {"arch": "GPT2LMHeadModel", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_ctx": 64, "vocab": 256}, j["model"]
EOF
sample af --init-from "$TMP/m.safetensors" --prompt "$P" --tokens 64 --seed 7
check "the export samples as the checkpoint does" cmp -s "$TMP/a" "$TMP/af"

# --- greedy
sample g1 --init-from "$TMP/ck" --prompt "$P" --tokens 40 --temperature 0 --seed 1 --json
sample g2 --init-from "$TMP/ck" --prompt "$P" --tokens 40 --temperature 0 --seed 2 --json
sample k1 --init-from "$TMP/ck" --prompt "$P" --tokens 40 --top-k 1 --seed 3 --json
check "greedy ignores the seed" test "$(tokens g1)" = "$(tokens g2)"
check "top-k 1 is greedy" test "$(tokens g1)" = "$(tokens k1)"
"$PY" "$REF" greedy "$TMP/m.safetensors" 4 40 $(ids "$P") >"$TMP/ref.json"
check "greedy is numpy's argmax path" test "$(tokens g1)" = "$(tokens ref.json)"
check "greedy: no near-tie float32 could flip" "$PY" -c "import json; assert json.load(open('$TMP/ref.json'))['min_gap'] > 1e-4"
LONG="Fortune favors the bold, and the bold favor fortunes written in C with zero copies."
sample gl --init-from "$TMP/ck" --prompt "$LONG" --tokens 16 --temperature 0 --json
"$PY" "$REF" greedy "$TMP/m.safetensors" 4 16 $(ids "$LONG") >"$TMP/refl.json"
check "greedy past the context (${#LONG}-byte prompt, 64 positions)" test "$(tokens gl)" = "$(tokens refl.json)"
# past the positions the context slides: said once on stderr (${#LONG} + 16 tokens), never within them (4 + 40)
check "past the context: one note naming the prompt's ${#LONG} tokens, --tokens 16 and the 64 positions" test \
    "$(cat "$TMP/err")" = "zero: note: the prompt's ${#LONG} tokens and --tokens 16 reach past the model's 64 positions: each token is generated from the last 64 tokens only"
sample g3 --init-from "$TMP/ck" --prompt "$P" --tokens 40 --temperature 0
check "within the context: nothing on stderr" test ! -s "$TMP/err"
sample g4 --init-from "$TMP/ck" --prompt-ids "1 2 3 4" --tokens 61 --temperature 0
check "4 + 61 tokens: the last is drawn from 64, no note" test ! -s "$TMP/err"
sample g5 --init-from "$TMP/ck" --prompt-ids "1 2 3 4" --tokens 62 --temperature 0
check "4 + 62 tokens: the last is drawn from 65, a note" grep -qF "the prompt's 4 tokens and --tokens 62 reach past" "$TMP/err"
# through a tokenizer (a token a call; 60 words are 120 tokens of a model of 128 positions)
W=$("$PY" -c "print(' '.join(['word'] * 60))")
sample q9 --init-from "$DATA_DIR/finetune/qwen2_chat" --prompt "$W" --tokens 9 --temperature 0 --json
check "tokenizer, 120 + 9 tokens: the prompt is 120 tokens, no note" test "$("$PY" -c "import json; print(len(json.load(open('$TMP/q9'))['prompt']))")" = 120 -a ! -s "$TMP/err"
sample q10 --init-from "$DATA_DIR/finetune/qwen2_chat" --prompt "$W" --tokens 10 --temperature 0
check "tokenizer, 120 + 10 tokens: a note" grep -qF "the prompt's 120 tokens and --tokens 10 reach past the model's 128 positions" "$TMP/err"

# --- top-k: every token among the k most likely (numpy ranks), which plain sampling is not
sample t3 --init-from "$TMP/ck" --prompt "$P" --tokens 64 --top-k 3 --seed 11 --json
sample t0 --init-from "$TMP/ck" --prompt "$P" --tokens 64 --seed 11 --json
check "--top-k 3: every token ranks < 3; without it some rank >= 3" "$PY" - "$REF" "$TMP/m.safetensors" "$TMP/t3" "$TMP/t0" <<'EOF'
import json, subprocess, sys
def ranks(f):
    j = json.load(open(f))
    out = subprocess.run(["/usr/bin/python3", sys.argv[1], "ranks", sys.argv[2], "4", str(len(j["prompt"]))] +
                         [str(t) for t in j["prompt"] + j["tokens"]], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)
r3, r0 = ranks(sys.argv[3]), ranks(sys.argv[4])
assert max(r3) < 3, r3
assert max(r0) >= 3, r0
EOF
sample z --init-from "$TMP/ck" --prompt "$P" --tokens 0
check "--tokens 0 prints the prompt" test "$(cat "$TMP/z")" = "$P"

# --- a LoRA run's checkpoint samples the text of its `export --merge` (greedy, and a seeded draw),
# its base saved in it (--save-frozen) or the preset's random model made again from the recorded
# seed (the same run without --save-frozen: the same adapters, bitwise)
LR=(train --model tiny --seq 32 --steps 20 --micro-batch 8 --lr 1e-2 --val-every 0 --lora r=8,alpha=32,targets=c_attn,c_proj,c_fc)
{ "$ZERO" "${LR[@]}" --save "$TMP/lo" && "$ZERO" "${LR[@]}" --save "$TMP/lof" --save-frozen &&
    "$ZERO" export "$TMP/lof" -o "$TMP/lof.mg" --merge --dtype fp32; } >"$TMP/lora.out" 2>&1 ||
    { echo "FAIL LoRA run and export --merge"; cat "$TMP/lora.out"; exit 1; }
for how in "--temperature 0" "--seed 5"; do
    sample lm --init-from "$TMP/lof.mg" --prompt "$P" --tokens 40 $how
    sample lf --resume "$TMP/lof" --prompt "$P" --tokens 40 $how
    sample lp --resume "$TMP/lo" --prompt "$P" --tokens 40 $how
    check "LoRA ($how): sample --resume of the --save-frozen checkpoint = sample of its export --merge" cmp -s "$TMP/lf" "$TMP/lm"
    check "LoRA ($how): sample --resume with the preset base made from its seed = the same" cmp -s "$TMP/lp" "$TMP/lm"
done
check "LoRA: the seeded draw is not the prompt and spaces" test -n "$(tr -d ' \n' <"$TMP/lm" | sed "s/^The//")"

# --- refusals
"$ZERO" train --model tiny --vocab 300 --seq 32 --steps 1 --micro-batch 2 --val-every 0 --save "$TMP/v300" >/dev/null 2>&1 ||
    { echo "FAIL train vocab 300"; fail=1; }
"$ZERO" sample --init-from "$TMP/v300" --prompt "$P" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "vocabulary 300" 1 "vocabulary of 300 tokens" "give --prompt-ids"
# token ids in and out for any vocabulary: the prompt's ids, then the generated ones
sample ids --init-from "$TMP/v300" --prompt-ids "1, 2 299" --tokens 5 --seed 3
check "--prompt-ids: the prompt and 5 ids below 300 on one line" "$PY" -c "
import sys; t = open('$TMP/ids').read().split(); assert t[:3] == ['1', '2', '299'] and len(t) == 8, t
assert all(0 <= int(x) < 300 for x in t), t"
"$ZERO" sample --init-from "$TMP/v300" --prompt-ids "1 300" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "a prompt id past the vocabulary" 2 "--prompt-ids '1 300'" "[0, 300)"
"$ZERO" sample --init-from "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "no prompt" 2 "--prompt"
"$ZERO" sample --init-from "$TMP/ck" --prompt "" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "empty prompt" 2 "at least one byte"
"$ZERO" sample --prompt "$P" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "no model" 2 "--init-from"
"$ZERO" sample --init-from "$TMP/ck" --prompt "$P" --temperature -1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "negative temperature" 2 "--temperature '-1'"
"$ZERO" sample --init-from "$TMP/nothing" --prompt "$P" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "no such model" 2 "$TMP/nothing" "No such file"
"$ZERO" sample --init-from "$TMP/ck" --prompt "$P" --frobnicate >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "unknown flag" 2 "'--frobnicate'"
"$ZERO" sample --help >"$TMP/out" 2>"$TMP/err"; rc=$?
check "--help: exit 0 and usage" test $rc -eq 0 -a -n "$(grep 'usage: zero sample' "$TMP/out")"

exit $fail
