#!/usr/bin/env bash
# Fine-tuning on chats, without torch, against tests/data/finetune/golden.json (scripts/
# make_finetune_fixture.py: transformers' chat template and masks, PyTorch's training in float64):
# the chat JSONL tokenized on the fly packs into the same rows and masks; 3 masked AdamW steps give
# PyTorch's losses and gradient norms on 1, 2 and 3 ranks at stages 0 and 3 (the mean over the
# global batch's counted targets); a resumed run and a token file of the same rows train bitwise alike; 40 steps,
# exported, `zero sample --chat` and a plain prompt give the greedy tokens and text transformers
# generated from PyTorch's weights, stopping at <|im_end|>; six tokenizers and the three chat formats
# print text; ZEROTOK2 ids past 65535 train; the new flags and every refusal (bad JSONL lines, a
# tokenizer larger than the model, no chat format, ...).
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
M="$FT/qwen2_chat"
CHATS="$FT/chats.jsonl"
GOLD="$FT/golden.json"
DOCS="$FT/golden_docs.json"
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
run() { # run NAME ARGS...: zero train on the chats, --log-json to $TMP/NAME.json; a failure ends the test
    local name=$1; shift
    "$ZERO" train --seq 111 --lr 1e-2 --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { echo "FAIL run $name: $ZERO train $*"; cat "$TMP/$name.err"; exit 1; }
}
ft() { local name=$1; shift; run "$name" --init-from "$M" --data "$CHATS" "$@"; }
# golden_match NAME TOL [N [GOLDEN]]: the first N (0, the default: the golden's 3) logged losses and
# gradient norms equal PyTorch's within relative TOL; prints the worst deviation. GOLDEN: golden.json
# (the default: the rows attending across their examples) or golden_docs.json (each example alone:
# the document mask's reference, scripts/make_finetune_docs_fixture.py)
golden_match() {
    "$PY" - "${4:-$GOLD}" "$TMP/$1.json" "$2" "${3:-0}" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1])); tol = float(sys.argv[3]); n = int(sys.argv[4])
steps = [json.loads(l) for l in open(sys.argv[2]) if '"step"' in l]
if n:
    ref = [(l, None) for l in g["e2e"]["losses"][:n]]
else:
    ref = list(zip(g["train"]["losses"], g["train"]["grad_norms"]))
assert len(steps) >= len(ref), (len(steps), len(ref))
worst = 0.0
for s, (l, gn) in zip(steps, ref):
    worst = max(worst, abs(s["loss"] - l) / l)
    if gn is not None: worst = max(worst, abs(s["grad_norm"] - gn) / gn)
print("    worst relative deviation from PyTorch: %.2g" % worst)
sys.exit(worst > tol)
EOF
}

# --- the rows: zero's on-the-fly tokenization and packing = transformers' template, masks, packing
"$ZERO" tokenize --tokenizer "$M" "$CHATS" --seq 111 -o "$TMP/chats.tok" >/dev/null 2>"$TMP/err"
check "the chats packed by zero are the golden rows, masks and starts (transformers' apply_chat_template)" \
    "$PY" - "$TMP/chats.tok" "$GOLD" "$DOCS" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); g = json.load(open(sys.argv[2])); d = json.load(open(sys.argv[3]))
vocab, count, tb, flags, row = struct.unpack("<IQIII", b[12:36])
toks = struct.unpack("<%d%s" % (count, "H" if tb == 2 else "I"), b[64:64 + tb * count])
mask, starts = b[64 + tb * count:64 + (tb + 1) * count], b[64 + (tb + 1) * count:]
assert row == g["seq"] + 1 and flags == 3, (row, flags)
R = row
assert [list(toks[i:i + R]) for i in range(0, count, R)] == g["rows"]
assert [list(mask[i:i + R]) for i in range(0, count, R)] == g["masks"]
assert [list(starts[i:i + R]) for i in range(0, count, R)] == d["starts"]
EOF

# --- 3 masked steps: PyTorch's losses and gradient norms at every stage and world size (G = 6 rows),
# each example attending to itself only (the default for packed JSONL) against PyTorch's run of each
# chat in a row of its own; with --doc-mask off, against PyTorch's run of the packed rows as they are
ft r1s0 --steps 3 --micro-batch 6
check "on-the-fly JSONL: the header names the data and the tokenizer" grep -q "JSONL through the tokenizer (vocab 800, loss mask), 6 rows of 112 tokens" "$TMP/r1s0.out"
check "the start says each example attends to itself" grep -q "^epoch: .*each example attends to itself only" "$TMP/r1s0.out"
check "1 rank, stage 0: PyTorch's losses and gradient norms, each chat alone (1e-5)" golden_match r1s0 1e-5 0 "$DOCS"
ft cross --steps 3 --micro-batch 6 --doc-mask off
check "--doc-mask off: the start says so" grep -q "^epoch: .*examples attend across the row (--doc-mask off)" "$TMP/cross.out"
check "--doc-mask off: PyTorch's losses and gradient norms of the packed rows (1e-5)" golden_match cross 1e-5
ft half --steps 2 --micro-batch 6 --save "$TMP/ck_half"
run resumed --resume "$TMP/ck_half" --data "$CHATS" --steps 3 --micro-batch 6
step3() { grep '"step":3,' "$TMP/$1.json" | sed 's/,"step_ms.*//'; }
check "resumed after 2 steps: step 3 bitwise as the uninterrupted run (the epoch order is the seed's)" \
    test -n "$(step3 resumed)" -a "$(step3 resumed)" = "$(step3 r1s0)"
ft half_off --steps 2 --micro-batch 6 --save "$TMP/ck_half_off" --doc-mask off
run resumed_off --resume "$TMP/ck_half_off" --data "$CHATS" --steps 3 --micro-batch 6
check "a resumed run keeps its --doc-mask off (the run's configuration): step 3 bitwise the uninterrupted run's" \
    test -n "$(step3 resumed_off)" -a "$(step3 resumed_off)" = "$(step3 cross)"
ft r1acc --steps 3 --micro-batch 3 --grad-accum 2
check "1 rank, 2 micro-batches: the same (1e-5)" golden_match r1acc 1e-5 0 "$DOCS"
ft r2s3 --steps 3 --micro-batch 3 --ranks 2 --stage 3
check "2 ranks, stage 3: the same (1e-5)" golden_match r2s3 1e-5 0 "$DOCS"
ft r3s3 --steps 3 --micro-batch 2 --ranks 3 --stage 3
check "3 ranks, stage 3: the same (1e-5)" golden_match r3s3 1e-5 0 "$DOCS"
ft r3s0 --steps 3 --micro-batch 1 --grad-accum 2 --ranks 3 --stage 0
check "3 ranks x 2 micro-batches, stage 0: the same (1e-5)" golden_match r3s0 1e-5 0 "$DOCS"
run tokfile --init-from "$M" --data "$TMP/chats.tok" --steps 3 --micro-batch 6
check "the packed token file trains bitwise as the JSONL" test "$(sed 's/,"step_ms.*//' "$TMP/tokfile.json" | head -3)" = "$(sed 's/,"step_ms.*//' "$TMP/r1s0.json" | head -3)"
# without --seq the run takes the file's: it was packed for sequences of 111 (zero tokenize --seq 111)
"$ZERO" train --lr 1e-2 --init-from "$M" --data "$TMP/chats.tok" --steps 3 --micro-batch 6 --log-json "$TMP/tokseq.json" \
    >"$TMP/tokseq.out" 2>"$TMP/tokseq.err" || { echo "FAIL run tokseq"; cat "$TMP/tokseq.err"; fail=1; }
check "a packed token file without --seq: seq 111, the file's" grep -q '^zero train: .*, seq 111, ' "$TMP/tokseq.out"
check "... and the same steps as with --seq 111" test "$(sed 's/,"step_ms.*//' "$TMP/tokseq.json" | head -3)" = "$(sed 's/,"step_ms.*//' "$TMP/tokfile.json" | head -3)"

# --- end to end: 40 steps on 2 ranks at stage 3, exported, sampled: transformers' greedy tokens (the
# golden's 40 steps trained the packed rows as they are: --doc-mask off)
ft e2e --steps 40 --micro-batch 3 --ranks 2 --stage 3 --chat-template chatml --save "$TMP/ck" --doc-mask off
check "40 steps: PyTorch's losses all the way (fp32 against float64: 1e-3)" golden_match e2e 1e-3 40
"$ZERO" export "$TMP/ck" -o "$TMP/ex" >/dev/null 2>"$TMP/err"
check "the export carries the tokenizer files" cmp -s "$M/tokenizer.json" "$TMP/ex/tokenizer.json"
sample() { # sample OUT ARGS...: zero sample into $TMP/OUT; a failure ends the test
    local out=$1; shift
    "$ZERO" sample "$@" >"$TMP/$out" 2>"$TMP/err" || { echo "FAIL zero sample $*"; cat "$TMP/err"; exit 1; }
}
gold_sample() { # gold_sample FILE KEY: the JSON sample output against golden[KEY]
    "$PY" - "$GOLD" "$TMP/$1" "$2" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))[sys.argv[3]]; z = json.load(open(sys.argv[2]))
assert z["prompt"] == g["prompt"], (z["prompt"], g["prompt"])
assert z["tokens"] == g["tokens"], (z["tokens"], g["tokens"])
assert z["text"] == g["text"], (z["text"], g["text"])
EOF
}
P=$("$PY" -c "import json; print(json.load(open('$GOLD'))['chat']['prompt_text'])")
Q=$("$PY" -c "import json; print(json.load(open('$GOLD'))['plain']['prompt_text'])")
N=$("$PY" -c "import json; print(json.load(open('$GOLD'))['new_tokens'])")
sample chat.json --init-from "$TMP/ex" --chat --prompt "$P" --temperature 0 --tokens "$N" --json
check "sample --chat of the export: transformers' prompt ids, greedy tokens and text" gold_sample chat.json chat
check "sample --chat stops at <|im_end|>, with the export's own chat template" "$PY" -c "import json; j = json.load(open('$TMP/chat.json')); assert j['stop'] == 'eos' and j['tokens'][-1] == 2 and len(j['tokens']) < $N and j['chat_template'] == 'model', j"
sample chat.txt --init-from "$TMP/ck" --chat --prompt "$P" --temperature 0 --tokens "$N"
check "sample --chat of the checkpoint prints the reply" test "$(cat "$TMP/chat.txt")" = "$("$PY" -c "import json; print(json.load(open('$GOLD'))['chat']['text'])")"
sample plain.json --init-from "$TMP/ex" --prompt "$Q" --temperature 0 --tokens "$N" --json
check "sample a plain prompt: transformers' greedy tokens and text" gold_sample plain.json plain
sample plain.txt --resume "$TMP/ck" --prompt "$Q" --temperature 0 --tokens "$N"
check "the text printed is the prompt and its continuation" test "$(cat "$TMP/plain.txt")" = "$Q$("$PY" -c "import json; print(json.load(open('$GOLD'))['plain']['text'])")"
sample s1 --init-from "$TMP/ex" --chat --prompt "$P" --tokens 30 --seed 5 --json
sample s2 --init-from "$TMP/ex" --chat --prompt "$P" --tokens 30 --seed 5 --json
check "seeded chat sampling is deterministic" cmp -s "$TMP/s1" "$TMP/s2"
sample sys.json --init-from "$TMP/ex" --chat --system "You are a fortune teller." --prompt "$P" --temperature 0 --tokens 4 --json
check "--system: the system turn first, then the user's" "$PY" -c "
import json; j = json.load(open('$TMP/sys.json')); g = json.load(open('$GOLD'))
assert j['prompt'][0] == 1 and j['prompt'][-len(g['chat']['prompt']):] == g['chat']['prompt'] and len(j['prompt']) > len(g['chat']['prompt']), j"
sample ids --init-from "$TMP/ex" --prompt-ids "1 2 3" --tokens 3 --temperature 0
check "--prompt-ids still prints ids" test "$(wc -w <"$TMP/ids")" -eq 6

# --- every tokenizer family and chat format: random models of vocabulary 1024 from a config.json
# (--model DIR --steps 0: the checkpoint records the directory and its tokenizer)
"$PY" -c "import json, sys; c = json.load(open('$M/config.json')); c['vocab_size'] = 1024; json.dump(c, open('$TMP/v1024.json', 'w'))"
for t in llama2 metaspace mistral llama3 smollm2 gpt2_prefix; do
    mkdir -p "$TMP/tok_$t" && cp "$TMP/v1024.json" "$TMP/tok_$t/config.json" && cp "$SRC/tests/data/tokenizer/$t"/* "$TMP/tok_$t/"
    run "rnd_$t" --model "$TMP/tok_$t" --data "$SRC/tests/data/tokenizer/fortunes.txt" --seq 32 --steps 0 --save "$TMP/ck_$t"
    sample "rnd_$t.txt" --init-from "$TMP/ck_$t" --prompt "Hello, café 日本" --tokens 6 --seed 3
    sample "rnd_$t.json" --init-from "$TMP/ck_$t" --prompt "Hello, café 日本" --tokens 6 --seed 3 --json
    check "$t: prints the prompt, then the text --json gives" "$PY" - "$TMP/rnd_$t.txt" "$TMP/rnd_$t.json" <<'EOF2'
import json, sys
out = open(sys.argv[1], encoding="utf-8").read(); j = json.load(open(sys.argv[2]))
assert out == "Hello, café 日本" + j["text"] + "\n", (out, j["text"])
assert 1 <= len(j["tokens"]) <= 6 and j["stop"] in ("eos", "length"), j
EOF2
done
for t in mistral llama3 smollm2; do
    sample "chat_$t.json" --init-from "$TMP/ck_$t" --chat --prompt "Hi there" --tokens 4 --json
    want=$(case $t in mistral) echo mistral;; llama3) echo llama3;; *) echo chatml;; esac)
    check "$t: --chat in the tokenizer's format ($want), the prompt opens as it does" "$PY" - "$TMP/chat_$t.json" "$want" "$TMP/tok_$t/tokenizer.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1])); t = {a["content"]: a["id"] for a in json.load(open(sys.argv[3]))["added_tokens"]}
first = {"mistral": "<s>", "llama3": "<|begin_of_text|>", "chatml": "<|im_start|>"}[sys.argv[2]]
assert j["chat_template"] == sys.argv[2] and j["prompt"][0] == t[first], (j, first, t)
EOF2
done

# --- other data: a text file through the tokenizer (a stream), ZEROTOK2 ids past 65535
run text --init-from "$M" --data "$SRC/tests/data/tokenizer/fortunes.txt" --seq 32 --steps 2 --micro-batch 2
check "a text file through the tokenizer trains (a stream)" grep -q "text through the tokenizer (vocab 800)" "$TMP/text.out"
"$PY" - "$TMP/big.tok" <<'EOF'
import struct, sys
n, V = 4000, 70000
toks = [(i * 7919) % V for i in range(n)]; mask = [0 if i % 5 == 0 else 1 for i in range(n)]
hdr = b"ZEROTOK2" + struct.pack("<IIQIII", 2, V, n, 4, 1, 0) + bytes(28)
open(sys.argv[1], "wb").write(hdr + struct.pack("<%dI" % n, *toks) + bytes(mask))
EOF
run big --model tiny --vocab 70000 --dim 16 --heads 2 --data "$TMP/big.tok" --seq 16 --steps 2 --micro-batch 2 --lr 1e-3
check "ZEROTOK2 with 4-byte ids up to 69999 and a mask trains (loss ~ ln 70000)" "$PY" -c "
import json, math; s = [json.loads(l) for l in open('$TMP/big.json') if '\"step\"' in l]
assert abs(s[0]['loss'] - math.log(70000)) < 0.5, s[0]['loss']"

# --- refusals
bad() { "$ZERO" train --seq 111 --steps 1 --micro-batch 2 "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
printf '%s\n' "$(head -1 "$CHATS")" '{"messages": [{"role": "robot", "content": "beep"}]}' 'not json' "$(sed -n 2p "$CHATS")" >"$TMP/bad.jsonl"
bad --init-from "$M" --data "$TMP/bad.jsonl"
expect_error "a JSONL with bad lines" 2 "$TMP/bad.jsonl:2:" "robot" "--skip-bad-examples"
run skip --init-from "$M" --data "$TMP/bad.jsonl" --skip-bad-examples --steps 1 --micro-batch 2
check "--skip-bad-examples: trains and warns once with the count and the first" grep -q "^zero: warning: $TMP/bad.jsonl: skipped 2 bad examples (first: $TMP/bad.jsonl:2: " "$TMP/skip.err"
check "--skip-bad-examples: the header counts them" grep -q "2 bad examples skipped" "$TMP/skip.out"
"$PY" -c "import json; print(json.dumps({'text': 'word ' * 200}))" >"$TMP/long.jsonl"
bad --model tiny --data "$SRC/tests/data/tokenizer/fortunes.txt" --seq 16 --doc-mask on
expect_error "--doc-mask on for text read as bytes" 2 "--doc-mask on:" "does not record where its examples start"
bad --init-from "$M" --data "$CHATS" --doc-mask yes
expect_error "--doc-mask yes" 2 "--doc-mask 'yes'" "expected on, off or auto"
printf '{"zero_extensions": {"document_mask": "sometimes"}}' >"$TMP/dm.json"
bad --init-from "$M" --data "$CHATS" --config "$TMP/dm.json"
expect_error "document_mask \"sometimes\" in the config" 2 "document_mask" "true, false or \"auto\""
bad --init-from "$M" --data "$TMP/long.jsonl"
expect_error "an example longer than a row" 2 "$TMP/long.jsonl:1:" "longer than a sequence"
mkdir -p "$TMP/small" && cp "$SRC/tests/data/decoder/qwen2"/* "$TMP/small/" && cp "$M/tokenizer.json" "$TMP/small/"
bad --init-from "$TMP/small" --data "$CHATS" --seq 32
expect_error "a tokenizer larger than the model's vocabulary (train)" 1 "ids up to 799 (800 tokens)" "vocabulary of 64"
"$ZERO" sample --init-from "$TMP/small" --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "a tokenizer larger than the model's vocabulary (sample)" 1 "ids up to 799" "vocabulary of 64"
bad --init-from "$SRC/tests/data/decoder/qwen2" --data "$CHATS" --seq 32
expect_error "text for a model directory without a tokenizer" 2 "has no tokenizer.json" "zero tokenize"
mkdir -p "$TMP/nochat" && cp "$M"/config.json "$M"/model.safetensors "$TMP/nochat/" && cp "$SRC/tests/data/tokenizer/gpt2"/* "$TMP/nochat/"
"$ZERO" sample --init-from "$TMP/nochat" --chat --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--chat without a chat format" 2 "--chat: the tokenizer in $TMP/nochat has no chat format" "--chat-template chatml|llama3|mistral"
"$ZERO" sample --init-from "$TMP/nochat" --chat --chat-template chatml --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--chat-template chatml for a tokenizer without its tokens" 2 "chatml" "<|im_start|>"
bad --init-from "$TMP/nochat" --data "$CHATS"
expect_error "chats for a tokenizer without a chat format" 2 "$CHATS:1:" "chat format"
"$ZERO" sample --init-from "$TMP/nochat" --prompt "You will" --tokens 3 --temperature 0 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "a plain prompt through another tokenizer that fits: text" test $rc -eq 0 -a "$(head -c 8 "$TMP/out")" = "You will"
bad --init-from "$M" --data "$CHATS" --chat-template chatgpt
expect_error "train --chat-template unknown" 2 "--chat-template 'chatgpt'" "chatml, llama3, mistral"
"$ZERO" sample --init-from "$M" --chat --chat-template vicuna --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "sample --chat-template unknown" 2 "--chat-template 'vicuna'" "chatml, llama3, mistral"
bad --init-from "$M" --data "$TMP/chats.tok" --chat-template chatml
expect_error "--chat-template with a token file" 2 "--chat-template" "token file"
bad --model tiny --seq 32 --data "$SRC/tests/data/tokenizer/fortunes.txt" --skip-bad-examples
expect_error "--skip-bad-examples for a byte-level model" 2 "--skip-bad-examples" "read as bytes"
bad --init-from "$M" --data "$TMP/chats.tok" --seq 100
expect_error "a packed token file at another --seq" 2 "rows of 112 tokens" "--seq 111 (got 100)"
"$ZERO" sample --init-from "$M" --chat --prompt-ids "1 2" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--chat with --prompt-ids" 2 "--chat" "--prompt TEXT"
"$ZERO" sample --init-from "$M" --system "x" --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--system without --chat" 2 "--system" "--chat"
"$ZERO" sample --init-from "$M" --tokenizer "$TMP/nowhere" --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--tokenizer that does not exist" 2 "--tokenizer '$TMP/nowhere'"
"$ZERO" train --model tiny --seq 32 --steps 1 --micro-batch 2 --save "$TMP/ck_tiny" --val-every 0 >/dev/null 2>&1
"$ZERO" sample --init-from "$TMP/ck_tiny" --chat --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--chat for a byte-level model" 2 "--chat needs the model's tokenizer"
# a relative model directory: the checkpoint records it absolute, so sample finds the tokenizer from anywhere
(cd "$FT" && "$ZERO" train --init-from qwen2_chat --data chats.jsonl --seq 111 --steps 0 --save "$TMP/ck_rel" >/dev/null 2>"$TMP/err") ||
    { echo "FAIL train from a relative directory"; cat "$TMP/err"; fail=1; }
(cd / && "$ZERO" sample --init-from "$TMP/ck_rel" --prompt "You will" --tokens 2 --temperature 0 >"$TMP/rel.txt" 2>"$TMP/err")
check "a checkpoint of a relative model directory samples text from another directory" test "$(head -c 8 "$TMP/rel.txt")" = "You will"
check "the epoch line: 6 rows, one step of 6 rows" grep -q "^epoch: 6 train rows, 1.00 steps of 6 rows" "$TMP/r1s0.out"
# the model's directory gone: the checkpoint's recorded source no longer has the tokenizer
cp -r "$M" "$TMP/moved"
run moved --init-from "$TMP/moved" --data "$CHATS" --steps 1 --micro-batch 2 --save "$TMP/ck_moved"
rm -rf "$TMP/moved"
"$ZERO" sample --init-from "$TMP/ck_moved" --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "the source directory gone" 1 "$TMP/moved (with the tokenizer) is gone" "--tokenizer DIR"
sample moved.txt --init-from "$TMP/ck_moved" --tokenizer "$M" --prompt "You will" --tokens 2 --temperature 0
check "--tokenizer DIR stands in for it" test "$(head -c 8 "$TMP/moved.txt")" = "You will"

exit $fail
