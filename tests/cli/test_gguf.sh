#!/usr/bin/env bash
# `zero export --format gguf`: checkpoints of five tiny models — the Qwen2 chat fixture
# (tests/data/finetune: q/k/v biases), a Llama with Llama 3's tokenizer (GQA, q/k biases, Llama 3.1
# RoPE scaling: rope_freqs, an untied head), a Qwen3 (per-head q/k norms, head_dim != hidden/heads),
# GPT-2 (Conv1D weights, learned positions), a SmolLM-shaped Llama (tied) and a Llama with a SentencePiece
# tokenizer (Llama 2's form: llama.cpp's "llama" tokenizer, pieces scored) — exported as f32, f16,
# bf16 and q8_0 GGUF files and read back by tests/cli/gguf_check.py (standard library only): every
# tensor is the parameter of the safetensors export in llama.cpp's layout (q/k rows interleaved per
# head for the llama architecture, GPT-2's Conv1D transposed), f32 exactly, f16/bf16 rounded to
# nearest even, q8_0 bitwise ggml's reference blocks (within half a step); the hyperparameters are
# config.json's and the tokenizer's tokens, types, merges, special ids and chat template are
# tokenizer.json's and tokenizer_config.json's; and the f32 files' keys and tensor lists equal what
# llama.cpp's own converter wrote for the same models (tests/data/gguf, made by
# scripts/make_gguf_fixtures.py), key by key. Where the `gguf` package (llama.cpp's reader) is
# installed it reads every file back to the same values; where `llama_cpp` (llama-cpp-python) is, the
# exported models tokenize the prompt to zero's ids and generate zero sample's greedy tokens
# ($ZERO_PYTHON names a Python that has them; each part says SKIP without them). A LoRA run on the
# Llama (every projection, rsLoRA) exports as llama.cpp's adapter — PEFT's A and B in llama.cpp's
# layout — and merged; with llama.cpp, the base plus the adapter and the merged file both generate
# the LoRA checkpoint's greedy tokens. Then every refusal: an architecture, a tokenizer or a sliding
# window GGUF cannot express (a SentencePiece tokenizer whose merges are not SentencePiece's, or whose
# metaspace rule llama.cpp does not follow), GPT-2's adapters, a LoRA checkpoint without --merge or --adapter, bad
# flags, a model without a tokenizer — and a link planted at the temporary file is removed, never
# followed.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
PYT=${ZERO_PYTHON:-python3}
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
CHECK="$SRC/tests/cli/gguf_check.py"
TOK="$SRC/tests/data/tokenizer"
DEC="$SRC/tests/data/decoder"
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

# model DIR TOKENIZER CONFIG_JSON: a model directory of a config.json and a tokenizer's files
model() {
    mkdir -p "$TMP/$1"
    cp "$TOK/$2/tokenizer.json" "$TOK/$2/tokenizer_config.json" "$TMP/$1/"
    printf '%s\n' "$3" >"$TMP/$1/config.json"
}
# the four random models of tests/data/gguf/models.json (scripts/make_gguf_fixtures.py converts the same)
for m in llama qwen3 gpt2 smollm; do
    model "$m" "$("$PY" -c "import json; print(json.load(open('$SRC/tests/data/gguf/models.json'))['$m']['tokenizer'])")" \
        "$("$PY" -c "import json; print(json.dumps(json.load(open('$SRC/tests/data/gguf/models.json'))['$m']['config']))")"
done
DATA="$SRC/tests/data/tokenizer/fortunes.txt"
for m in llama qwen3 gpt2 smollm; do
    "$ZERO" train --model "$TMP/$m" --data "$DATA" --seq 32 --steps 0 --save "$TMP/$m.ck" >"$TMP/out" 2>&1 ||
        { echo "FAIL train $m"; cat "$TMP/out"; exit 1; }
done
"$ZERO" train --init-from "$SRC/tests/data/finetune/qwen2_chat" --data "$DATA" --seq 32 --steps 0 --save "$TMP/qwen2.ck" \
    >"$TMP/out" 2>&1 || { echo "FAIL train qwen2"; cat "$TMP/out"; exit 1; }
cp -r "$SRC/tests/data/finetune/qwen2_chat" "$TMP/qwen2"

have_pkg=1
for m in qwen2 llama qwen3 gpt2 smollm; do
    "$ZERO" export "$TMP/$m.ck" -o "$TMP/$m.safetensors" --dtype fp32 >/dev/null 2>"$TMP/err" ||
        { echo "FAIL export $m safetensors"; cat "$TMP/err"; exit 1; }
    for t in f32 f16 bf16 q8_0; do
        "$ZERO" export "$TMP/$m.ck" -o "$TMP/$m.$t.gguf" --type "$t" --json >"$TMP/$m.$t.json" 2>"$TMP/err" ||
            { echo "FAIL export $m $t"; cat "$TMP/err"; fail=1; continue; }
        check "$m $t: tensors and metadata as llama.cpp reads them" \
            "$PY" "$CHECK" values "$TMP/$m.$t.gguf" "$TMP/$m.safetensors" "$TMP/$m" "$t"
        [ "$t" = f32 ] && check "$m f32: the keys and tensors llama.cpp's converter writes (tests/data/gguf/$m.json)" \
            "$PY" "$CHECK" fixture "$TMP/$m.$t.gguf" "$SRC/tests/data/gguf/$m.json"
        if [ "$have_pkg" = 1 ]; then
            "$PYT" "$CHECK" package "$TMP/$m.$t.gguf" "$TMP/$m.safetensors" >"$TMP/pkg" 2>&1
            case $? in
                0) echo "ok   $m $t: the gguf package reads the same values"; cat "$TMP/pkg" ;;
                77) have_pkg=0; cat "$TMP/pkg" ;;
                *) echo "FAIL $m $t: the gguf package"; cat "$TMP/pkg"; fail=1 ;;
            esac
        fi
    done
done
check "the summary: format gguf, the type, the file's size" "$PY" -c "
import json, os; j = json.load(open('$TMP/llama.q8_0.json'))
assert j['format'] == 'gguf' and j['type'] == 'Q8_0' and j['bytes'] == os.path.getsize('$TMP/llama.q8_0.gguf'), j"
"$ZERO" export "$TMP/qwen2.ck" --format gguf -o "$TMP/default" --json >"$TMP/def.json" 2>"$TMP/err"
check "--format gguf without the suffix; the default type of an fp32 model is F16" \
    "$PY" -c "import json; j = json.load(open('$TMP/def.json')); assert j['type'] == 'F16', j"

# --- a model directory converted directly: the same file as its checkpoint's export
"$ZERO" export "$SRC/tests/data/finetune/qwen2_chat" -o "$TMP/qwen2.dir.gguf" --type f32 >"$TMP/out" 2>"$TMP/err"
check "zero export MODEL_DIR --format gguf: bitwise the export of its checkpoint" cmp -s "$TMP/qwen2.dir.gguf" "$TMP/qwen2.f32.gguf"
"$ZERO" export "$TMP/qwen2" -o "$TMP/x_dir" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "a model directory to a model directory" 2 "is a model directory, not a checkpoint" "--format gguf"

# --- LoRA: adapters trained on the Llama (every projection: q/k rows interleaved in lora_b too),
# exported as llama.cpp's adapter (--adapter) and merged (--merge)
"$ZERO" export "$TMP/llama.ck" -o "$TMP/llama_hf" --dtype fp32 >/dev/null 2>"$TMP/err" || { echo "FAIL export llama_hf"; cat "$TMP/err"; }
"$ZERO" train --init-from "$TMP/llama_hf" --data "$DATA" --seq 32 --steps 6 --micro-batch 4 --lr 1e-2 \
    --lora r=4,alpha=8,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,rslora --val-every 0 \
    --save "$TMP/llora.ck" >"$TMP/out" 2>&1 || { echo "FAIL train llama LoRA"; cat "$TMP/out"; exit 1; }
"$ZERO" export "$TMP/llora.ck" --adapter -o "$TMP/llora.gguf" >/dev/null 2>"$TMP/err" || { echo "FAIL export --adapter gguf"; cat "$TMP/err"; fail=1; }
"$ZERO" export "$TMP/llora.ck" --adapter -o "$TMP/llora_peft" >/dev/null 2>"$TMP/err" || { echo "FAIL export --adapter"; cat "$TMP/err"; fail=1; }
"$ZERO" export "$TMP/llora.ck" --merge -o "$TMP/lmerged.gguf" --type f32 >/dev/null 2>"$TMP/err" || { echo "FAIL export --merge gguf"; cat "$TMP/err"; fail=1; }
check "--adapter: llama.cpp's LoRA adapter, PEFT's A and B in llama.cpp's layout, alpha for the rsLoRA scale" \
    "$PY" "$CHECK" adapter "$TMP/llora.gguf" "$TMP/llora_peft" "$TMP/llama"
"$ZERO" export "$TMP/gpt2.ck" -o "$TMP/gpt2_hf" --dtype fp32 >/dev/null 2>&1
"$ZERO" train --init-from "$TMP/gpt2_hf" --data "$DATA" --seq 32 --steps 1 --micro-batch 2 --lora r=2,alpha=4,targets=c_attn \
    --save "$TMP/glora.ck" >/dev/null 2>&1
bad() { "$ZERO" export "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
bad "$TMP/glora.ck" --adapter -o "$TMP/x.gguf"
expect_error "a GGUF adapter of GPT-2" 2 "--adapter of GPT2LMHeadModel (Conv1D weights) is not supported yet"

# --- a SentencePiece tokenizer (Llama 2's and Mistral v0.1's form, trained by sentencepiece itself:
# tests/data/tokenizer/llama2_spm, scripts/make_gguf_tokenizer_fixtures.py) as llama.cpp's "llama"
# tokenizer: pieces scored by their first merge, no merges
model spm llama2_spm '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
  "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 128, "vocab_size": 704, "rms_norm_eps": 1e-5, "initializer_range": 0.3}'
"$ZERO" train --model "$TMP/spm" --data "$DATA" --seq 32 --steps 0 --save "$TMP/spm.ck" >"$TMP/out" 2>&1 ||
    { echo "FAIL train spm"; cat "$TMP/out"; exit 1; }
"$ZERO" export "$TMP/spm.ck" -o "$TMP/spm.safetensors" --dtype fp32 >/dev/null 2>&1
for t in f32 q8_0; do
    "$ZERO" export "$TMP/spm.ck" -o "$TMP/spm.$t.gguf" --type "$t" >/dev/null 2>"$TMP/err" ||
        { echo "FAIL export spm $t"; cat "$TMP/err"; fail=1; }
    check "SentencePiece $t: tensors, and the tokenizer as llama.cpp's llama model (scores, byte and unknown types)" \
        "$PY" "$CHECK" values "$TMP/spm.$t.gguf" "$TMP/spm.safetensors" "$TMP/spm" "$t"
    if [ "$have_pkg" = 1 ]; then
        check "SentencePiece $t: the gguf package reads the same values" \
            "$PYT" "$CHECK" package "$TMP/spm.$t.gguf" "$TMP/spm.safetensors"
    fi
done

# --- Mistral Nemo's pre-tokenizer ("tekken": tests/data/tokenizer/tekken, the same script), on a
# Mistral whose head_dim is not hidden/heads, as Nemo's
model tekken tekken '{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 64,
  "head_dim": 32, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "max_position_embeddings": 128, "vocab_size": 800, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0,
  "initializer_range": 0.3}'
"$ZERO" train --model "$TMP/tekken" --data "$DATA" --seq 32 --steps 0 --save "$TMP/tekken.ck" >"$TMP/out" 2>&1 ||
    { echo "FAIL train tekken"; cat "$TMP/out"; exit 1; }
"$ZERO" export "$TMP/tekken.ck" -o "$TMP/tekken.safetensors" --dtype fp32 >/dev/null 2>&1
"$ZERO" export "$TMP/tekken.ck" -o "$TMP/tekken.f32.gguf" --type f32 >/dev/null 2>"$TMP/err" ||
    { echo "FAIL export tekken"; cat "$TMP/err"; fail=1; }
check "tekken: tensors, and the tokenizer with pre 'tekken'" \
    "$PY" "$CHECK" values "$TMP/tekken.f32.gguf" "$TMP/tekken.safetensors" "$TMP/tekken" f32
check "tekken: tokenizer.ggml.pre is llama.cpp's name, tekken" "$PY" -c "
import sys; sys.path.insert(0, '$SRC/tests/cli'); import gguf_check
assert gguf_check.read_gguf('$TMP/tekken.f32.gguf')[0]['tokenizer.ggml.pre'] == b'tekken'"

# --- llama.cpp itself: zero's prompt ids, and zero sample's greedy tokens
if "$PYT" -c 'import llama_cpp' 2>/dev/null; then
    for f in fortunes unicode; do
        check "SentencePiece: llama.cpp tokenizes every line of $f.txt to tokenizers' ids" \
            "$PYT" "$CHECK" tokenize_ids "$TMP/spm.f32.gguf" "$TOK/$f.txt" "$TOK/llama2_spm.$f.ids"
        # llama.cpp's tekken approximates the regex's letter classes in ASCII, without the marks
        check "tekken: llama.cpp tokenizes every line of $f.txt without a combining mark to tokenizers' ids" \
            "$PYT" "$CHECK" tokenize_ids "$TMP/tekken.f32.gguf" "$TOK/$f.txt" "$TOK/tekken.$f.ids" --skip-marks
    done
    for m in qwen2 llama qwen3 gpt2 smollm spm tekken; do
        "$ZERO" sample --init-from "$TMP/$m.ck" --prompt "The fortune cookie said" --temperature 0 --tokens 8 --json \
            >"$TMP/s.json" 2>"$TMP/err" || { echo "FAIL zero sample $m"; cat "$TMP/err"; fail=1; continue; }
        ids=$("$PY" -c "import json; print(' '.join(map(str, json.load(open('$TMP/s.json'))['prompt'])))")
        toks=$("$PY" -c "import json; print(' '.join(map(str, json.load(open('$TMP/s.json'))['tokens'])))")
        n=$(echo "$toks" | wc -w)
        lids=$("$PYT" "$CHECK" tokenize "$TMP/$m.f32.gguf" "The fortune cookie said" 2>/dev/null)
        check "$m: llama.cpp tokenizes the prompt to zero's ids ($ids)" test "$lids" = "$ids"
        got=$("$PYT" "$CHECK" generate "$TMP/$m.f32.gguf" "$ids" "$n" 2>/dev/null)
        check "$m: llama.cpp's greedy tokens are zero sample's ($toks)" test "$got" = "$toks"
    done
    "$ZERO" sample --init-from "$TMP/llora.ck" --prompt "The fortune cookie said" --temperature 0 --tokens 8 --json \
        >"$TMP/s.json" 2>"$TMP/err" || { echo "FAIL zero sample LoRA"; cat "$TMP/err"; fail=1; }
    ids=$("$PY" -c "import json; print(' '.join(map(str, json.load(open('$TMP/s.json'))['prompt'])))")
    toks=$("$PY" -c "import json; print(' '.join(map(str, json.load(open('$TMP/s.json'))['tokens'])))")
    base=$("$PYT" "$CHECK" generate "$TMP/llama.f32.gguf" "$ids" 8 2>/dev/null)
    check "LoRA: the adapters change the greedy tokens ($base -> $toks)" test "$base" != "$toks"
    got=$("$PYT" "$CHECK" generate "$TMP/llama.f32.gguf" "$ids" "$(echo "$toks" | wc -w)" "$TMP/llora.gguf" 2>/dev/null)
    check "LoRA: llama.cpp with the base and the GGUF adapter generates zero sample's tokens ($toks)" test "$got" = "$toks"
    got=$("$PYT" "$CHECK" generate "$TMP/lmerged.gguf" "$ids" "$(echo "$toks" | wc -w)" 2>/dev/null)
    check "LoRA: llama.cpp with the merged GGUF generates them too" test "$got" = "$toks"
else
    echo "SKIP: $PYT cannot import llama_cpp (pip install llama-cpp-python): no generation by llama.cpp"
fi

# --- refusals
"$ZERO" train --init-from "$DEC/phi3" --data "$DEC/tokens.bin" --seq 8 --steps 0 --save "$TMP/phi3.ck" >/dev/null 2>&1
bad "$TMP/phi3.ck" -o "$TMP/x.gguf"
expect_error "Phi-3" 2 "GGUF export of Phi3ForCausalLM is not supported yet"
"$ZERO" train --init-from "$DEC/mistral_window" --data "$DEC/tokens.bin" --seq 8 --steps 0 --save "$TMP/mw.ck" >/dev/null 2>&1
bad "$TMP/mw.ck" -o "$TMP/x.gguf"
expect_error "a sliding window" 2 "sliding_window 3" "not supported yet"
"$ZERO" train --init-from "$DEC/llama_gqa4" --data "$DEC/tokens.bin" --seq 8 --steps 0 --save "$TMP/notok.ck" >/dev/null 2>&1
bad "$TMP/notok.ck" -o "$TMP/x.gguf"
expect_error "a model without tokenizer.json" 1 "the model's tokenizer"
for t in llama2 gpt2_prefix; do
    model "spm_$t" "$t" '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
      "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64,
      "vocab_size": 1024, "rms_norm_eps": 1e-5}'
    "$ZERO" train --model "$TMP/spm_$t" --data "$DATA" --seq 16 --steps 0 --save "$TMP/spm_$t.ck" >/dev/null 2>&1
done
bad "$TMP/spm_llama2.ck" -o "$TMP/x.gguf"
expect_error "a SentencePiece-style tokenizer whose merges are not SentencePiece's" 2 "its merges are not SentencePiece's" \
    "not supported yet"
model spm_mistral mistral '{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 32,
  "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64,
  "vocab_size": 1024, "rms_norm_eps": 1e-5}'
"$ZERO" train --model "$TMP/spm_mistral" --data "$DATA" --seq 16 --steps 0 --save "$TMP/spm_mistral.ck" >/dev/null 2>&1
bad "$TMP/spm_mistral.ck" -o "$TMP/x.gguf"
expect_error "a Metaspace pre-tokenizer (a segment that starts with a space: llama.cpp adds another)" 2 \
    "Metaspace(replacement=" "are not Llama 2's" "not supported yet"
bad "$TMP/spm_gpt2_prefix.ck" -o "$TMP/x.gguf"
expect_error "a pre-tokenizer llama.cpp has no name for" 2 "add_prefix_space=1" "not supported yet"
check "no file left by a refused export" test ! -e "$TMP/x.gguf" -a ! -e "$TMP/x.gguf.tmp"
"$ZERO" train --init-from "$TMP/qwen2" --data "$DATA" --seq 32 --steps 1 --micro-batch 2 --lora r=2,alpha=4 \
    --save "$TMP/lora.ck" >/dev/null 2>&1
bad "$TMP/lora.ck" -o "$TMP/x.gguf"
expect_error "a LoRA run without --merge" 2 "holds LoRA adapters" "--merge"
"$ZERO" export "$TMP/lora.ck" -o "$TMP/lora.gguf" --merge --type f32 >/dev/null 2>"$TMP/err"
"$ZERO" export "$TMP/lora.ck" -o "$TMP/lora.safetensors" --merge --dtype fp32 >/dev/null 2>>"$TMP/err"
check "--merge: the merged model as GGUF, the values of the merged safetensors export" \
    "$PY" "$CHECK" values "$TMP/lora.gguf" "$TMP/lora.safetensors" "$TMP/qwen2" f32
bad "$TMP/qwen2.ck" -o "$TMP/x.gguf" --type q4_0
expect_error "--type q4_0" 2 "--type 'q4_0'" "f32, f16, bf16 or q8_0"
bad "$TMP/qwen2.ck" -o "$TMP/x.gguf" --dtype bf16
expect_error "--dtype with GGUF" 2 "--format gguf takes --type"
bad "$TMP/qwen2.ck" -o "$TMP/x.safetensors" --type f16
expect_error "--type without GGUF" 2 "--type f16: a GGUF file's type"
bad "$TMP/qwen2.ck" -o "$TMP/x" --format onnx
expect_error "--format onnx" 2 "--format 'onnx'" "hf, safetensors or gguf"
# a link planted at the temporary name is removed, not followed
echo precious >"$TMP/victim"
ln -s "$TMP/victim" "$TMP/safe.gguf.tmp"
"$ZERO" export "$TMP/qwen2.ck" -o "$TMP/safe.gguf" >/dev/null 2>"$TMP/err"
check "a link at FILE.gguf.tmp: the export writes its own file, the link's target untouched" \
    test "$(cat "$TMP/victim")" = precious -a -s "$TMP/safe.gguf" -a ! -L "$TMP/safe.gguf"

exit $fail
