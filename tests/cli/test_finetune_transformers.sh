#!/usr/bin/env bash
# Fine-tune, export, generate — against transformers at run time: zero fine-tunes the chat fixture
# (tests/data/finetune) 40 steps on 2 ranks at stage 3 from the JSONL, exports it, and for chat
# prompts (with and without a system turn, non-ASCII) and plain prompts transformers, from the
# exported directory with its own tokenizer and chat template, builds the same prompt ids and
# generates (greedy, stopping at <|im_end|>) the same tokens and text as `zero sample`. Needs PyPI
# torch and transformers (`python3`, or $ZERO_PYTHON); without them the test is SKIPPED (exit 77,
# reported as skipped, never as passed). tests/cli/test_finetune.sh checks the committed golden.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PYT=${ZERO_PYTHON:-python3}
if ! "$PYT" -c 'import torch, transformers' 2>/dev/null; then
    echo "SKIP: $PYT cannot import torch and transformers (pip install torch transformers)"
    exit 77
fi
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
N=16

"$ZERO" train --init-from "$FT/qwen2_chat" --data "$FT/chats.jsonl" --seq 111 --steps 40 --lr 1e-2 --micro-batch 3 \
    --ranks 2 --stage 3 --save "$TMP/ck" >"$TMP/train.out" 2>&1 || { echo "FAIL train"; cat "$TMP/train.out"; exit 1; }
"$ZERO" export "$TMP/ck" -o "$TMP/ex" >/dev/null 2>"$TMP/err" || { echo "FAIL export"; cat "$TMP/err"; exit 1; }

# one JSON line per sample: chat (system or ""), prompt, zero's output
: >"$TMP/cases"
case_() { # case_ CHAT SYSTEM PROMPT
    local args=(--init-from "$TMP/ex" --prompt "$3" --temperature 0 --tokens $N --json)
    [ "$1" = 1 ] && args+=(--chat)
    [ -n "$2" ] && args+=(--system "$2")
    "$ZERO" sample "${args[@]}" >"$TMP/z" 2>"$TMP/err" || { echo "FAIL zero sample ${args[*]}"; cat "$TMP/err"; exit 1; }
    "$PYT" -c 'import json, sys; print(json.dumps({"chat": sys.argv[1] == "1", "system": sys.argv[2], "prompt": sys.argv[3], "zero": json.load(open(sys.argv[4]))}))' \
        "$1" "$2" "$3" "$TMP/z" >>"$TMP/cases"
}
case_ 1 "" "Give me a fortune."
case_ 1 "You are a fortune teller." "What is zero?"
case_ 1 "" "¿Qué hora es? 日本語 🎉"
case_ 1 "" "Tell me a joke."
case_ 0 "" "You will find"
case_ 0 "" "Around the corner, café"

"$PYT" - "$TMP/ex" "$TMP/cases" <<'PYEOF'
import json, sys
import torch, transformers
d = sys.argv[1]
tok = transformers.AutoTokenizer.from_pretrained(d)
m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
m.eval()
eos = tok.convert_tokens_to_ids("<|im_end|>")
bad = 0
for line in open(sys.argv[2]):
    c = json.loads(line); z = c["zero"]
    if c["chat"]:
        msgs = ([{"role": "system", "content": c["system"]}] if c["system"] else []) + [{"role": "user", "content": c["prompt"]}]
        ids = list(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
    else:
        ids = tok(c["prompt"])["input_ids"]
    with torch.no_grad():
        out = m.generate(torch.tensor([ids]), max_new_tokens=16,
                         do_sample=False, eos_token_id=eos, pad_token_id=eos)
    new = out[0, len(ids):].tolist()
    body = [t for t in new if t != eos]
    if c["chat"]:
        text = tok.decode(body, skip_special_tokens=True)
    else:
        text = tok.decode(ids + body, skip_special_tokens=True)[len(tok.decode(ids, skip_special_tokens=True)):]
    ok = ids == z["prompt"] and new == z["tokens"] and text == z["text"]
    print("%s %s %r: transformers %s %r, zero %s %r" % ("ok  " if ok else "FAIL", "chat" if c["chat"] else "plain",
                                                       c["prompt"], new, text, z["tokens"], z["text"]))
    bad += not ok
sys.exit(1 if bad else 0)
PYEOF
