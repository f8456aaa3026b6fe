#!/usr/bin/env bash
# Fine-tune, export, generate — against transformers at run time: zero fine-tunes the chat fixture
# (tests/data/finetune) 40 steps on 2 ranks at stage 3 from the JSONL, exports it, and for chat
# prompts (with and without a system turn, non-ASCII) and plain prompts transformers, from the
# exported directory with its own tokenizer and chat template, builds the same prompt ids and
# generates (greedy, stopping at <|im_end|>) the same tokens and text as `zero sample`. Needs PyPI
# torch and transformers (`python3`, or $ZERO_PYTHON); without them the test is SKIPPED (exit 77,
# reported as skipped, never as passed). And for every tokenizer family (byte-level: GPT-2 with a
# prefix space, Llama 3, SmolLM2; SentencePiece: Llama 2, Mistral, Metaspace) and chat format, on
# random models: zero's prompt ids are transformers' (tokenizer(TEXT), apply_chat_template with
# add_generation_prompt) and the text zero prints is transformers' decoding of the tokens zero drew.
# tests/cli/test_finetune.sh checks the committed golden.
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
fail=0

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
[ $? -eq 0 ] || fail=1

# --- every tokenizer family: prompt ids and printed text against transformers' tokenizer
"$PYT" -c "import json, sys; c = json.load(open('$FT/qwen2_chat/config.json')); c['vocab_size'] = 1024; json.dump(c, open('$TMP/v1024.json', 'w'))"
: >"$TMP/toks"
for t in llama2 metaspace mistral llama3 smollm2 gpt2_prefix; do
    mkdir -p "$TMP/tok_$t" && cp "$TMP/v1024.json" "$TMP/tok_$t/config.json" && cp "$SRC/tests/data/tokenizer/$t"/* "$TMP/tok_$t/"
    "$ZERO" train --model "$TMP/tok_$t" --data "$SRC/tests/data/tokenizer/fortunes.txt" --seq 32 --steps 0 \
        --save "$TMP/ck_$t" >/dev/null 2>"$TMP/err" || { echo "FAIL train $t"; cat "$TMP/err"; exit 1; }
    for chat in 0 1; do
        case $t in mistral|llama3|smollm2) ;; *) [ $chat = 1 ] && continue;; esac
        for p in "Hello, café 日本" "  two  spaces, then 12345 and an emoji 🎉"; do
            args=(--init-from "$TMP/ck_$t" --prompt "$p" --tokens 8 --seed 7 --json)
            [ $chat = 1 ] && args+=(--chat)
            "$ZERO" sample "${args[@]}" >"$TMP/z" 2>"$TMP/err" || { echo "FAIL zero sample $t ${args[*]}"; cat "$TMP/err"; exit 1; }
            "$PYT" -c 'import json, sys; print(json.dumps({"dir": sys.argv[1], "chat": sys.argv[2] == "1", "prompt": sys.argv[3], "zero": json.load(open(sys.argv[4]))}))' \
                "$TMP/tok_$t" "$chat" "$p" "$TMP/z" >>"$TMP/toks"
        done
    done
done
"$PYT" - "$TMP/toks" <<'PYEOF'
import json, os, sys
import transformers
# the built-in formats as Jinja, with the generation prompt (docs/TOKENIZER.md, Chat formats)
T = {"chatml": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "llama3": "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
               "m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
     "mistral": "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
                "{% else %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}"}
bad = 0
for line in open(sys.argv[1]):
    c = json.loads(line); z = c["zero"]
    # the tokenizer.json pipeline as it is (AutoTokenizer may rebuild a fixture's pipeline from a
    # tokenizer class's defaults when tokenizer_config.json names none), with the config's tokens
    cfg = json.load(open(os.path.join(c["dir"], "tokenizer_config.json")))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(c["dir"], "tokenizer.json"),
                                               **{k: v for k, v in cfg.items() if k.endswith("_token")})
    stop = z["stop"] == "eos"
    body = z["tokens"][:len(z["tokens"]) - stop]
    if c["chat"]:
        ids = list(tok.apply_chat_template([{"role": "user", "content": c["prompt"]}], chat_template=T[z["chat_template"]],
                                           add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
        text = tok.decode(body, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    else:
        ids = tok(c["prompt"])["input_ids"]
        pre = tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        full = tok.decode(ids + body, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        text = full[len(pre):] if full.startswith(pre) else tok.decode(body, skip_special_tokens=True,
                                                                        clean_up_tokenization_spaces=False)
    ok = ids == z["prompt"] and text == z["text"]
    print("%s %s %s %r: ids %s, text %r (zero %r)" % ("ok  " if ok else "FAIL", c["dir"].split("tok_")[-1],
          "chat" if c["chat"] else "plain", c["prompt"], "equal" if ids == z["prompt"] else
          "%s vs zero %s" % (ids, z["prompt"]), text, z["text"]))
    bad += not ok
sys.exit(1 if bad else 0)
PYEOF
[ $? -eq 0 ] || fail=1
exit $fail
