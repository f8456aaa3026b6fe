#!/usr/bin/env bash
# Hostile files on the paths `zero train --data` and `zero sample` read (docs/SECURITY.md): each is
# refused with one `zero: error:` line naming the file, exit 1 or 2, at once — never a hang on a
# FIFO, never a read of a file larger than its kind may be (sparse files: nothing is allocated),
# never a symbolic link followed out of a model or tokenizer directory, never a JSON text parsed
# past its nesting limit — and a data directory's links are skipped. Byte-level and tokenized
# data, sample --tokenizer, generation_config.json, tokenizer_config.json (the chat template), a
# LoRA adapter directory (--lora-from: adapter_config.json, adapter_model.safetensors); a model
# directory's weights that contradict themselves (a tensor in two shards or under two names, an
# index that disagrees with its shards, a tied config.json beside a different lm_head.weight), or
# that are finite but overflow the forward pass (train and sample name the tensor); and
# `zero export` into a directory where links were planted: replaced, never followed.
set -u
: "${ZERO:?set ZERO to the zero binary}"
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
# refused NAME STATUS NEEDLE... -- ARGS...: `zero ARGS` (at most $LIMIT s, 30 unless set) exits
# STATUS with one error line holding every NEEDLE
refused() {
    local name=$1 want=$2; shift 2
    local needles=()
    while [ "$1" != -- ]; do needles+=("$1"); shift; done
    shift
    timeout "${LIMIT:-30}" "$ZERO" "$@" >out 2>err
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
python3 -c "print('{\"text\": ' + '[' * 200 + ']' * 200 + '}')" >deep.jsonl
refused "a JSONL line nested 201 deep" 2 "deep.jsonl:1" "nested more than 127" -- train --init-from m --data deep.jsonl "${TR[@]}"
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
python3 -c "print('{\"eos_token_id\": ' + '[' * 200 + ']' * 200 + '}')" >m/generation_config.json
refused "generation_config.json nested 201 deep" 1 "nested more than 127" -- sample --init-from m "${Q[@]}"
echo '{"eos_token_id": 1e300}' >m/generation_config.json
"$ZERO" sample --init-from m "${Q[@]}" >out 2>err
check "an eos_token_id of 1e300 is no stop token (not converted): samples" test -s out -a ! -s err
rm m/generation_config.json

# --- tokenizer_config.json (the chat template) and sample --tokenizer
cp m/tokenizer_config.json tc.json
python3 -c "print('[' * 200 + ']' * 200)" >m/tokenizer_config.json
refused "tokenizer_config.json nested 201 deep, sample --chat" 1 "m/tokenizer_config.json" "nested more than 127" -- \
    sample --init-from m --chat "${Q[@]}"
refused "tokenizer_config.json nested 201 deep, train on chats" 1 "m/tokenizer_config.json" "nested more than 127" -- \
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
python3 -c "print('{\"r\": ' + '[' * 200 + ']' * 200 + '}')" >ad/adapter_config.json
refused "adapter_config.json nested 201 deep" 2 "nested more than 127" -- train "${LB[@]}" --lora-from ad
cp ac.json ad/adapter_config.json
mv ad/adapter_model.safetensors am.safetensors
ln -s "$TMP/am.safetensors" ad/adapter_model.safetensors
refused "adapter_model.safetensors a link out of the adapter directory" 1 "adapter_model.safetensors" "outside" -- \
    train "${LB[@]}" --lora-from ad

# --- a model directory's weights: each tensor in one file, an index that agrees with its shards, a
# tied head only when it holds the embeddings
# stedit FILE CODE: rewrites a safetensors file after CODE changed h (its header) and d (its data)
stedit() {
    python3 - "$1" "$2" <<'EOF'
import json, struct, sys
def rd(p): b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; return json.loads(b[8:8 + n]), b[8 + n:]
h, d = rd(sys.argv[1])
def data(name): lo, hi = h[name]["data_offsets"]; return d[lo:hi]
def add(name, like, data):  # a tensor of the dtype and shape of header entry `like`, holding data, last
    global d
    h[name] = dict(like, data_offsets=[len(d), len(d) + len(data)]); d += data
exec(sys.argv[2])
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hb)) + hb + d)
EOF
}
# ixedit DIR CODE: rewrites DIR's index after CODE changed m (its weight_map)
ixedit() {
    python3 -c "import json, sys; p = sys.argv[1]; x = json.load(open(p)); m = x['weight_map']; $2; json.dump(x, open(p, 'w'))" \
        "$1/model.safetensors.index.json"
}
DEC="$SRC/tests/data/decoder"
S=(--prompt-ids "1 2 3" --tokens 3 --temperature 0)
S1=model-00001-of-00004.safetensors S4=model-00004-of-00004.safetensors
fresh() { rm -rf "$2" && cp -r "$DEC/$1" "$2"; } # fresh FIXTURE DIR
# model.norm.weight (in shard 4) also in shard 1, as zeros: the index names one, transformers
# loads that one, zero read the first file's
fresh llama_mqa_sharded w
stedit w/$S1 "h4 = rd('w/$S4')[0]; t = h4['model.norm.weight']; add('model.norm.weight', t, bytes(t['data_offsets'][1] - t['data_offsets'][0]))"
refused "a tensor in two shards" 1 "tensor 'model.norm.weight' is in" "$S1" "$S4" "expected one" -- \
    sample --init-from w "${S[@]}"
fresh llama_mqa_sharded w
ixedit w "m['model.norm.weight'] = '$S1'"
refused "the index names a shard that lacks the tensor" 1 "maps 'model.norm.weight' to $S1 but $S1 does not hold it ($S4 does)" -- \
    sample --init-from w "${S[@]}"
fresh llama_mqa_sharded w
ixedit w "m['foo.bar'] = '$S1'"
refused "the index lists a tensor no shard holds" 1 "model.safetensors.index.json: the index lists 'foo.bar', which no shard holds" -- \
    sample --init-from w "${S[@]}"
fresh llama_mqa_sharded w
ixedit w "del m['model.norm.weight']"
refused "a shard holds a tensor the index does not list" 1 "$S4: tensor 'model.norm.weight' is not in the index" -- \
    sample --init-from w "${S[@]}"
# GPT-2's body under both names ("transformer.wte.weight" and "wte.weight", as zeros)
fresh gpt2 w
stedit w/model.safetensors "add('wte.weight', h['transformer.wte.weight'], bytes(len(data('transformer.wte.weight'))))"
refused "GPT-2: one parameter under two names" 1 "tensors 'transformer.wte.weight' (model.safetensors) and 'wte.weight'" \
    "both the parameter 'wte.weight': expected one" -- sample --init-from w "${S[@]}"
# a tied config.json beside an lm_head.weight: accepted when it is the embeddings bit for bit, else
# refused (transformers would keep one of the two)
"$ZERO" sample --init-from "$DEC/llama3_bias" "${S[@]}" >want 2>err
fresh llama3_bias w
stedit w/model.safetensors "add('lm_head.weight', h['model.embed_tokens.weight'], data('model.embed_tokens.weight'))"
"$ZERO" sample --init-from w "${S[@]}" >out 2>err
check "a tied model whose files also hold the head, equal to the embeddings: samples as without it" \
    test -s want -a ! -s err -a "$(cat out)" = "$(cat want)"
[ -s err ] && cat err
stedit w/model.safetensors "x = bytearray(d); x[h['lm_head.weight']['data_offsets'][0] + 5] ^= 1; d = bytes(x)"
refused "a tied config.json, an lm_head.weight that differs from the embeddings" 1 "config.json ties" \
    "lm_head.weight differs from model.embed_tokens.weight (element 2:" -- sample --init-from w "${S[@]}"
fresh llama_gqa4 w
python3 -c "import json; p = 'w/config.json'; c = json.load(open(p)); c['tie_word_embeddings'] = True; json.dump(c, open(p, 'w'))"
refused "tie_word_embeddings true over an untied Llama's weights" 1 "config.json ties" \
    "lm_head.weight differs from model.embed_tokens.weight" -- sample --init-from w "${S[@]}"
fresh gpt2 w
stedit w/model.safetensors "add('lm_head.weight', h['transformer.wte.weight'], bytes(len(data('transformer.wte.weight'))))"
refused "GPT-2 (tied by default) with an lm_head.weight of zeros" 1 "lm_head.weight differs from transformer.wte.weight" -- \
    sample --init-from w "${S[@]}"

# --- a model this machine cannot hold is refused at once (5 s), before any of it is allocated: a
# 7B config.json without weights (sample used to allocate a 7B engine for a minute and then find
# no weights, or be killed by the kernel), and a 256B model whose weights are a sparse file
# llama DIR L C I V H G [weights]: a Llama config.json, and with `weights` a sparse BF16
# model.safetensors of every tensor (a header, then a hole: nothing is written)
llama() {
    python3 - "$@" <<'EOF'
import json, os, struct, sys
d, (L, C, I, V, H, G) = sys.argv[1], map(int, sys.argv[2:8])
os.makedirs(d, exist_ok=True)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": L, "hidden_size": C,
           "intermediate_size": I, "vocab_size": V, "num_attention_heads": H, "num_key_value_heads": G,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}, open(d + "/config.json", "w"))
if len(sys.argv) > 8:
    D, t = C // H, {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C], "lm_head.weight": [V, C]}
    for l in range(L):
        p = "model.layers.%d." % l
        t.update({p + "input_layernorm.weight": [C], p + "post_attention_layernorm.weight": [C],
                  p + "self_attn.q_proj.weight": [H * D, C], p + "self_attn.k_proj.weight": [G * D, C],
                  p + "self_attn.v_proj.weight": [G * D, C], p + "self_attn.o_proj.weight": [C, H * D],
                  p + "mlp.gate_proj.weight": [I, C], p + "mlp.up_proj.weight": [I, C], p + "mlp.down_proj.weight": [C, I]})
    h, at = {}, 0
    for k, s in t.items():
        n = 2 * s[0] * (s[1] if len(s) > 1 else 1)
        h[k], at = {"dtype": "BF16", "shape": s, "data_offsets": [at, at + n]}, at + n
    b = json.dumps(h).encode(); b += b" " * (-len(b) % 8)
    with open(d + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(b)) + b); f.truncate(8 + len(b) + at)
EOF
}
llama b7 32 4096 11008 32000 32 32
LIMIT=5 refused "a 7B config.json without weights, sample" 1 "b7: no model.safetensors" -- sample --init-from b7 "${S[@]}"
LIMIT=5 refused "a 7B config.json without weights, train" 1 "b7: no model.safetensors" -- \
    train --init-from b7 --data "$DEC/tokens.bin" "${TR[@]}"
# 80 layers of C 16384, I 53248, GQA 128/8 heads of 128, V 32000: 80 (2 C^2 + 2 (8 * 128) C + 3 I C + 2 C)
# + 2 V C + C = 256064897024 parameters; a stage-0 engine keeps 16 bytes of each (fp32 weights and
# gradients, AdamW's two moments): 4097038352384 bytes, 3.73 TiB, before any activation
llama huge 80 16384 53248 32000 128 8 weights
LIMIT=5 refused "a 256B model (sparse weights), sample" 1 "sample: the model in huge (LlamaForCausalLM L80 C16384" \
    "256064897024 parameters" "model states of a stage-0 engine 3.73 TiB" "more than this machine's" "of RAM" -- \
    sample --init-from huge "${S[@]}"
rm -rf b7 huge

# --- a config.json that is not a file is named as such (not the directory taken for a checkpoint)
fresh llama_gqa4 w
rm w/config.json && mkdir w/config.json
refused "config.json a directory, sample" 1 "w/config.json: not a regular file" -- sample --init-from w "${S[@]}"
refused "config.json a directory, estimate" 1 "w/config.json: not a regular file" -- estimate --model w --ranks 1
rmdir w/config.json && ln -s config.json w/config.json
refused "config.json a link to itself" 1 "w/config.json: a symbolic link that cannot be followed" -- sample --init-from w "${S[@]}"

# --- weights that are not finite (a corrupt or diverged model) are refused naming the tensor and
# the element, instead of every step's loss non-finite and skipped: a model directory (F32 NaN), a
# safetensors file (F16 +inf), a PEFT adapter (F32 NaN)
nonfinite() { # nonfinite FILE TENSOR ELEMENT BYTES(python): overwrites that element (and drops the
    # checksum zero's writer stores for it, which would refuse the file first)
    stedit "$1" "t = h['$2']; s = {'F32': 4, 'F16': 2, 'BF16': 2}[t['dtype']]; o = t['data_offsets'][0] + $3 * s; x = bytearray(d); x[o:o + s] = $4; d = bytes(x); h.get('__metadata__', {}).pop('crc32c.$2', None)"
}
fresh llama_gqa4 w
nonfinite w/model.safetensors model.layers.0.self_attn.q_proj.weight 2 "struct.pack('<f', float('nan'))"
refused "a NaN weight in a model directory" 1 "tensor 'model.layers.0.self_attn.q_proj.weight' holds NaN at element 2" \
    "expected finite weights" -- train --init-from w --data "$DEC/tokens.bin" "${TR[@]}"
refused "a NaN weight in a model directory, sample" 1 "holds NaN at element 2" -- sample --init-from w "${S[@]}"
"$ZERO" train --model tiny "${TR[@]}" --save ckn >out 2>err || { echo "FAIL train --save"; cat err; }
"$ZERO" export ckn -o inf.safetensors --dtype fp16 >out 2>err || { echo "FAIL export"; cat err; }
nonfinite inf.safetensors ln_f.bias 1 "struct.pack('<H', 0x7c00)"
refused "+inf in a safetensors file" 1 "tensor 'ln_f.bias' holds +inf at element 1" -- train --init-from inf.safetensors "${TR[@]}"
cp -r "$SRC/tests/data/lora/llama_gqa4" adn
A0=$(python3 -c "import json, struct; b = open('adn/adapter_model.safetensors', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; print(sorted(k for k in json.loads(b[8:8 + n]) if k != '__metadata__')[0])")
nonfinite adn/adapter_model.safetensors "$A0" 0 "struct.pack('<f', float('nan'))"
refused "a NaN in a PEFT adapter" 1 "adapter_model.safetensors: tensor '$A0' holds NaN at element 0" -- train "${LB[@]}" --lora-from adn

# --- finite weights whose forward pass overflows (every element of one tensor at 3e38: finite in
# the file, beyond a float once multiplied) are refused naming where the forward stops being finite
# and the tensor behind it, instead of a run of skipped steps that ended with exit 0 or a sample
# drawn from NaN logits (token 0 each time): a model directory (BF16: 3e38 is 2.99e38 there) in
# train, train --precision fp16 on 2 ranks at stage 3, and sample; a Llama's final norm; a
# safetensors file (F32)
huge() { # huge FILE TENSOR VALUE: every element set to VALUE (F32 or BF16), its checksum dropped
    stedit "$1" "t = h['$2']; lo, hi = t['data_offsets']; f = struct.pack('<f', $3); e = f if t['dtype'] == 'F32' else f[2:]; d = d[:lo] + e * ((hi - lo) // len(e)) + d[hi:]; h.get('__metadata__', {}).pop('crc32c.$2', None)"
}
fresh gpt2 w
huge w/model.safetensors transformer.h.0.mlp.c_fc.weight 3e38
refused "3e38 weights in a model directory" 1 "the forward pass of the first batch is not finite: layer 0 outputs NaN" \
    "the largest weight it reads is 'h.0.mlp.c_fc.weight' (magnitude 2.99e+38): expected weights (--init-from w) whose" \
    -- train --init-from w --data "$DEC/tokens.bin" "${TR[@]}"
refused "3e38 weights, 2 ranks, stage 3, fp16" 1 "the forward pass of the first batch is not finite: layer 0 outputs" \
    "'h.0.mlp.c_fc.weight' (magnitude inf)" "(fp16 holds magnitudes up to 65504)" \
    -- train --init-from w --data "$DEC/tokens.bin" "${TR[@]}" --ranks 2 --stage 3 --precision fp16
refused "3e38 weights, sample" 1 "sample: --init-from w: the logits after 3 tokens hold NaN: layer 0 outputs NaN" \
    "'h.0.mlp.c_fc.weight' (magnitude 2.99e+38): expected weights whose forward pass is finite" -- sample --init-from w "${S[@]}"
fresh llama_gqa4 w
huge w/model.safetensors model.norm.weight 3e38
refused "3e38 in a Llama's final norm, sample" 1 "the final norm outputs -inf from a finite input" \
    "the largest weight it reads is 'model.norm.weight' (magnitude 3e+38)" -- sample --init-from w "${S[@]}"
"$ZERO" export ckn -o big.safetensors >out 2>err || { echo "FAIL export fp32"; cat err; }
huge big.safetensors h.1.attn.c_attn.weight 3e38
refused "3e38 weights in a safetensors file" 1 "layer 1 outputs NaN from a finite input" \
    "'h.1.attn.c_attn.weight' (magnitude 3e+38): expected weights (--init-from big.safetensors) whose" \
    -- train --init-from big.safetensors "${TR[@]}"

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
