#!/usr/bin/env bash
# Hugging Face model directories in and out, without torch: every fixture of
# scripts/make_decoder_fixtures.py (GPT-2, Llama x3, Mistral, Qwen2, Qwen3, Gemma 1/2/3, Phi-3 x2, and
# Mistral, Gemma 2/3, Phi-3 with sliding windows shorter than the sequence) trains from its
# directory at stage 3 on 2 ranks and validates at the loss transformers computed (committed
# golden, 1e-5 relative); exported to a directory (sharded or not) and trained from again, the same
# loss; the export has the source's tensor names, shapes, dtype and config, and bitwise the
# weights; tokenizer files travel; flags that disagree with config.json, unsupported config.json
# values, Qwen's windowed layers past the window, pickles and missing tensors are refused with one
# line; the windowed fixtures sample transformers' greedy tokens past the window; sample,
# estimate and plan take the directories; a Llama-family model trains alike at every stage and
# world size, with checkpointing, NVMe offload and resuming elsewhere, and in bf16.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FIX="$SRC/tests/data/decoder"
TOK="$FIX/tokens.bin"
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
val_loss() { sed -n 's/.*"step":[0-9]*,.*"val_loss":\([^,]*\).*/\1/p' "$1" | tail -1; }
# the golden validation loss of a fixture (a float64 tensor of its .golden.safetensors)
golden() {
    "$PY" - "$FIX/$1.golden.safetensors" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
lo, hi = h["val_loss"]["data_offsets"]; print(repr(struct.unpack("<d", b[8 + n + lo:8 + n + hi])[0]))
EOF
}
# a fixture's int32 golden tensor as ids separated by spaces
golden_ids() {
    "$PY" - "$FIX/$1.golden.safetensors" "$2" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
lo, hi = h[sys.argv[2]]["data_offsets"]
print(" ".join(map(str, struct.unpack("<%di" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi]))))
EOF
}
close() { "$PY" -c "import sys; a, b, tol = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= tol * abs(b))" "$@"; }
run() { # run NAME ARGS...: zero train on the fixtures' tokens, --log-json to $TMP/NAME.json; a failure ends the test
    local name=$1; shift
    "$ZERO" train --data "$TOK" --seq 8 --val-every 0 --val-batches 1 --log-json "$TMP/$name.json" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" || { echo "FAIL run $name: $ZERO train $*"; cat "$TMP/$name.err"; exit 1; }
}
# same_tensors A B: the model directories hold the same tensor names (GPT-2 with or without the
# "transformer." prefix), shapes, dtypes and bytes
same_tensors() {
    "$PY" - "$1" "$2" <<'EOF'
import json, os, struct, sys
def tensors(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"): continue
        b = open(os.path.join(d, f), "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
        for k, v in h.items():
            if k == "__metadata__": continue
            lo, hi = v["data_offsets"]
            out[k[12:] if k.startswith("transformer.") else k] = (v["dtype"], v["shape"], b[8 + n + lo:8 + n + hi])
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert set(a) == set(b), sorted(set(a) ^ set(b))
for k in a:
    assert a[k][:2] == b[k][:2], (k, a[k][:2], b[k][:2])
    assert a[k][2] == b[k][2], k
EOF
}

# --- every fixture: from its directory at stage 3 on 2 ranks (lr 0: the weights stay), the
# validation loss transformers computed; exported and trained from again, the same loss
for f in gpt2 llama_gqa4 llama3_bias llama_mqa_sharded mistral qwen2 qwen3 gemma gemma2 gemma3 phi3 phi3_longrope \
         mistral_window gemma2_window gemma3_window phi3_window; do
    G=$(golden $f)
    run $f --init-from "$FIX/$f" --ranks 2 --stage 3 --micro-batch 2 --steps 1 --lr 0 --save "$TMP/ck_$f"
    check "$f: validation loss $(val_loss "$TMP/$f.json") = transformers' $G (rel 1e-5)" close "$(val_loss "$TMP/$f.json")" "$G" 1e-5
    shard=(); [ $f = qwen3 ] && shard=(--max-shard-size 20KB)
    "$ZERO" export "$TMP/ck_$f" -o "$TMP/ex_$f" "${shard[@]}" --json >"$TMP/x.json" 2>"$TMP/err"; rc=$?
    check "$f: export exit 0" test $rc -eq 0
    check "$f: the export holds the source's tensors, bitwise" same_tensors "$FIX/$f" "$TMP/ex_$f"
    check "$f: the export's config.json is the source's, in the source's dtype" "$PY" - "$FIX/$f" "$TMP/ex_$f" <<'EOF'
import json, sys
a, b = (json.load(open(d + "/config.json")) for d in sys.argv[1:])
assert a == b, sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
EOF
    run re_$f --init-from "$TMP/ex_$f" --micro-batch 4 --steps 1 --lr 0
    check "$f: trained from the export, the same loss $(val_loss "$TMP/re_$f.json") (rel 1e-5)" close "$(val_loss "$TMP/re_$f.json")" "$G" 1e-5
done
check "a sharded export: 2 files and the index" test -f "$TMP/ex_qwen3/model-00002-of-00002.safetensors" -a \
    -f "$TMP/ex_qwen3/model.safetensors.index.json" -a ! -e "$TMP/ex_qwen3/model.safetensors"
check "a sharded export: the index maps every tensor to its file, total_size the data's bytes" "$PY" - "$TMP/ex_qwen3" <<'EOF'
import json, os, struct, sys
d = sys.argv[1]; idx = json.load(open(d + "/model.safetensors.index.json")); seen, total = {}, 0
for f in sorted(x for x in os.listdir(d) if x.endswith(".safetensors")):
    b = open(os.path.join(d, f), "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    assert h["__metadata__"]["format"] == "pt"
    for k, v in h.items():
        if k != "__metadata__": seen[k] = f; total += v["data_offsets"][1] - v["data_offsets"][0]
assert idx["weight_map"] == seen and idx["metadata"]["total_size"] == total, (idx, seen, total)
EOF
# a single file again after a sharded export into the same directory: the stale shards go
"$ZERO" export "$TMP/ck_qwen3" -o "$TMP/ex_qwen3" >/dev/null 2>"$TMP/err"
check "re-export: one model.safetensors, no stale shards or index" test -f "$TMP/ex_qwen3/model.safetensors" -a \
    ! -e "$TMP/ex_qwen3/model-00001-of-00002.safetensors" -a ! -e "$TMP/ex_qwen3/model.safetensors.index.json"
"$ZERO" export "$TMP/ck_qwen2" -o "$TMP/ex32" --dtype bf16 >/dev/null 2>"$TMP/err"
check "--dtype bf16: the config says bfloat16, the tensors are BF16" "$PY" - "$TMP/ex32" <<'EOF'
import json, struct, sys
d = sys.argv[1]; c = json.load(open(d + "/config.json")); assert c["dtype"] == "bfloat16", c
b = open(d + "/model.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
assert {v["dtype"] for k, v in h.items() if k != "__metadata__"} == {"BF16"}
EOF

# --- a Llama-family model is one unit per layer like GPT-2: every stage and world size, activation
# checkpointing, NVMe offload and resuming on another world size give the 1-rank stage-0 losses
# (global batch 6; fp32: 1e-4 relative), bf16 follows them
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\).*/\1 \2/p' "$TMP/$1.json"; }
same() { # same REF NAME TOL: every step NAME logged has REF's loss at that step (relative TOL)
    awk -v n="$2" -v tol="$3" 'NR == FNR { ref[$1] = $2; next }
      { k++; d = $2 - ref[$1]; if (d < 0) d = -d; if (!($1 in ref) || d > tol * ref[$1]) { printf "%s: step %s loss %s vs %s\n", n, $1, $2, ref[$1]; bad = 1 } }
      END { exit bad || !k }' <(losses "$1") <(losses "$2")
}
eq() { local name=$1; shift; run "$name" --init-from "$FIX/qwen3" --steps 4 --lr 1e-2 "$@"; }
eq ref --micro-batch 6
check "the loss falls over 4 steps" awk 'NR==1{a=$2} END{exit !($2 < a - 0.1)}' <(losses ref)
eq r2s3ck --micro-batch 3 --ranks 2 --stage 3 --activation-checkpointing
check "2 ranks, stage 3, checkpointing: the 1-rank stage-0 losses" same ref r2s3ck 1e-4
eq r3s2 --micro-batch 2 --ranks 3 --stage 2
check "3 ranks, stage 2: the same losses" same ref r3s2 1e-4
mkdir -p "$TMP/nvme1" "$TMP/nvme2" # zero train does not create offload directories
eq r3s1acc --micro-batch 1 --grad-accum 2 --ranks 3 --stage 1 --offload-optimizer "nvme:$TMP/nvme1"
check "3 ranks x 2 micro-batches, stage 1, optimizer on NVMe: the same losses" same ref r3s1acc 1e-4
eq r2s3off --micro-batch 3 --ranks 2 --stage 3 --offload-optimizer "nvme:$TMP/nvme2" --offload-param "nvme:$TMP/nvme2"
check "2 ranks, stage 3, parameters and optimizer on NVMe: the same losses" same ref r2s3off 1e-4
run half --init-from "$FIX/qwen3" --steps 2 --lr 1e-2 --micro-batch 3 --ranks 2 --stage 3 --save "$TMP/ck_half"
"$ZERO" train --resume "$TMP/ck_half" --data "$TOK" --steps 4 --lr 1e-2 --micro-batch 2 --ranks 3 --stage 1 --val-every 0 \
    --val-batches 1 --log-json "$TMP/resumed.json" >"$TMP/resumed.out" 2>&1 || { echo "FAIL resume"; cat "$TMP/resumed.out"; fail=1; }
check "saved on 2 ranks at stage 3, resumed on 3 at stage 1: steps 3-4 as the uninterrupted run" same ref resumed 1e-4
eq bf16 --micro-batch 3 --ranks 2 --stage 3 --precision bf16
check "bf16 working precision follows fp32 (2e-2)" same ref bf16 2e-2

# --- --steps 0: a directory as a checkpoint, exported bitwise; tokenizer files travel
mkdir -p "$TMP/withtok" && cp "$FIX/llama_gqa4"/* "$TMP/withtok/"
printf '{"version": "1.0", "model": {"type": "BPE"}}\n' >"$TMP/withtok/tokenizer.json"
printf '{"bos_token": "<s>"}\n' >"$TMP/withtok/tokenizer_config.json"
run s0 --init-from "$TMP/withtok" --steps 0 --save "$TMP/ck0"
check "--steps 0 --save: a checkpoint of step 0" grep -q '"done":true,"steps":0' "$TMP/s0.json"
"$ZERO" export "$TMP/ck0" -o "$TMP/ex0" >/dev/null 2>"$TMP/err"
check "--steps 0 export: bitwise the directory's weights" same_tensors "$FIX/llama_gqa4" "$TMP/ex0"
check "the tokenizer files are copied" cmp -s "$TMP/withtok/tokenizer.json" "$TMP/ex0/tokenizer.json"
check "the tokenizer config is copied" cmp -s "$TMP/withtok/tokenizer_config.json" "$TMP/ex0/tokenizer_config.json"
rm -rf "$TMP/withtok"
"$ZERO" export "$TMP/ck0" -o "$TMP/ex0b" >/dev/null 2>"$TMP/err"; rc=$?
check "the source directory gone: export still succeeds, with a note" test $rc -eq 0 -a -n "$(grep 'note: .*gone' "$TMP/err")"

# --- a GPT-2 trained from scratch: a fresh GPT-2 config.json with the real head count
run tiny --model tiny --data "$TOK" --steps 1 --micro-batch 2 --save "$TMP/ck_tiny"
"$ZERO" export "$TMP/ck_tiny" -o "$TMP/ex_tiny" >/dev/null 2>"$TMP/err"
check "from scratch: config.json is GPT2LMHeadModel with n_head 4, fp32" "$PY" - "$TMP/ex_tiny" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
assert c["architectures"] == ["GPT2LMHeadModel"] and c["n_head"] == 4 and c["n_layer"] == 2 and c["n_embd"] == 64, c
assert c["vocab_size"] == 256 and c["n_positions"] == 64 and c["torch_dtype"] == "float32", c
EOF
run from_cfg --model "$FIX/mistral" --micro-batch 2 --steps 2
check "--model DIR: a random model of the directory's shape trains" grep -q "$FIX/mistral (" "$TMP/from_cfg.out"

# --- refusals
"$ZERO" train --init-from "$FIX/qwen3" --layers 3 --data "$TOK" --seq 8 --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--layers against config.json" 2 "--layers 3" "has layers 2 (config.json)"
"$ZERO" train --init-from "$FIX/qwen3" --model llama-3.2-1b --data "$TOK" --seq 8 --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--model against config.json" 2 "--model llama-3.2-1b (LlamaForCausalLM L16" "Qwen3ForCausalLM L2"
"$ZERO" train --init-from "$FIX/qwen3" --seq 65 --data "$TOK" --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--seq past max_position_embeddings" 2 "--seq 65" "64 positions" "raise it in a copy of the directory's config.json"
"$ZERO" train --init-from "$FIX/gpt2" --seq 17 --data "$TOK" --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "GPT-2: --seq past n_positions" 2 "--seq 17" "16 positions" "n_positions" "wpe (16, 24)"
edit() { # edit FIXTURE NAME PYTHON: a copy of the fixture with config.json changed (`c` is the dict)
    rm -rf "$TMP/$2"; cp -r "$FIX/$1" "$TMP/$2"
    "$PY" -c "import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); $3; json.dump(c, open(p, 'w'))" "$TMP/$2"
}
init() { "$ZERO" train --init-from "$1" --data "$TOK" --seq 8 --micro-batch 2 --steps 1 "${@:2}" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
edit llama3_bias yarn 'c["rope_scaling"]["rope_type"] = "yarn"'
init "$TMP/yarn"
expect_error "rope_scaling yarn" 1 "config.json: rope_scaling.rope_type \"yarn\"" "linear"
edit qwen3 v5yarn 'c["rope_parameters"] = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e6}'
init "$TMP/v5yarn"
expect_error "rope_parameters dynamic" 1 "rope_parameters.rope_type \"dynamic\""
edit llama_gqa4 gelu 'c["hidden_act"] = "gelu"'
init "$TMP/gelu"
expect_error "hidden_act gelu" 1 "hidden_act \"gelu\"" "silu"
edit llama_gqa4 phi 'c["architectures"] = ["PhiForCausalLM"]'
init "$TMP/phi"
expect_error "another architecture" 1 "architectures [\"PhiForCausalLM\"]" "Qwen3ForCausalLM"
edit llama_gqa4 prf 'c["partial_rotary_factor"] = 0.5'
init "$TMP/prf"
expect_error "partial RoPE" 1 "partial_rotary_factor 0.5"
# Qwen's windowed layers are not computed: a sequence past the window is refused, within it trains
edit qwen2 window 'c["use_sliding_window"] = True; c["sliding_window"] = 4; c["layer_types"] = ["full_attention", "sliding_attention"]'
init "$TMP/window"
expect_error "Qwen2 with a sliding window shorter than the sequence" 2 "sliding_window 4" "--seq 8" "not supported yet"
run window_ok --init-from "$TMP/window" --seq 4 --micro-batch 2 --steps 1
check "sequences within Qwen's sliding window train" grep -q '"done":true' "$TMP/window_ok.json"
# the way past a RoPE model's positions: a config.json that says so; within the old ones it is the same model
edit llama_gqa4 long 'c["max_position_embeddings"] = 128'
run pos64 --init-from "$FIX/llama_gqa4" --micro-batch 2 --steps 1
run pos128 --init-from "$TMP/long" --micro-batch 2 --steps 1
check "max_position_embeddings 64 -> 128: the same loss at --seq 8 ($(val_loss "$TMP/pos64.json"))" \
    test -n "$(val_loss "$TMP/pos64.json")" -a "$(val_loss "$TMP/pos64.json")" = "$(val_loss "$TMP/pos128.json")"
run long --init-from "$TMP/long" --seq 100 --micro-batch 2 --steps 1
check "max_position_embeddings 128: --seq 100 trains" grep -q '"done":true' "$TMP/long.json"
# from a directory's shape (--model DIR) the positions grow, with a note: GPT-2's wpe gets the rows
run grow --model "$FIX/gpt2" --seq 20 --micro-batch 2 --steps 1 --save "$TMP/ck_grow"
check "--model DIR --seq 20 past n_positions 16: a note says the model is built with 20" \
    grep -qF "note: --seq 20 is longer than the 16 positions (n_positions) of $FIX/gpt2/config.json: the model is built with 20" \
    "$TMP/grow.out"
"$ZERO" export "$TMP/ck_grow" -o "$TMP/ex_grow" >/dev/null 2>"$TMP/err" || { echo "FAIL export ck_grow"; cat "$TMP/err"; fail=1; }
check "... and its export says n_positions 20, wpe (20, 24)" "$PY" - "$TMP/ex_grow" <<'EOF'
import json, struct, sys
c = json.load(open(sys.argv[1] + "/config.json")); assert c["n_positions"] == 20, c["n_positions"]
b = open(sys.argv[1] + "/model.safetensors", "rb").read(); h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
assert h["transformer.wpe.weight"]["shape"] == [20, 24], h["transformer.wpe.weight"]
EOF
run nogrow --model "$FIX/gpt2" --seq 16 --micro-batch 2 --steps 1
check "--model DIR within its positions: no note" test -z "$(grep -- '--seq' "$TMP/nogrow.out")"
edit llama_gqa4 layers3 'c["num_hidden_layers"] = 3'
init "$TMP/layers3"
expect_error "config.json asks for a layer the weights lack" 1 "missing tensor 'model.layers.2.input_layernorm.weight'"
edit llama_gqa4 pickle 'pass'
rm "$TMP/pickle/model.safetensors"; printf 'PK\003\004junk' >"$TMP/pickle/pytorch_model.bin"
init "$TMP/pickle"
expect_error "a pickle directory" 1 "pytorch_model.bin" "pickle" "save_pretrained" "safetensors"
"$ZERO" train --init-from "$TMP/pickle/pytorch_model.bin" --data "$TOK" --seq 8 --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "a pickle file" 1 "pytorch_model.bin is a PyTorch pickle"
edit llama_gqa4 noweights 'pass'
rm "$TMP/noweights/model.safetensors"
init "$TMP/noweights"
expect_error "no weights" 1 "no model.safetensors or model.safetensors.index.json"
edit qwen2 dropout 'c["attention_dropout"] = 0.1'
run dropout --init-from "$TMP/dropout" --micro-batch 2 --steps 1
check "dropout: accepted, and the output says zero trains without it" grep -q "note: config.json asks for dropout (attention_dropout 0.1)" "$TMP/dropout.out"

# --- sample past the sliding window: the greedy tokens of transformers' generate() (its cache keeps
# a sliding layer's last sliding_window keys), for every windowed fixture
for f in mistral_window gemma2_window gemma3_window phi3_window; do
    P=$(golden_ids $f gen_prompt)
    "$ZERO" sample --init-from "$FIX/$f" --prompt-ids "$P" --tokens 10 --temperature 0 >"$TMP/sw" 2>"$TMP/err"; rc=$?
    check "$f: sample 6 + 10 tokens past the window = transformers' generate() ($(cat "$TMP/sw"))" \
        test $rc -eq 0 -a "$(cat "$TMP/sw")" = "$P $(golden_ids $f gen_tokens)"
done
# --- sample: token ids in and out for any vocabulary
"$ZERO" sample --init-from "$FIX/qwen3" --prompt-ids "5 9 13" --tokens 6 --temperature 0 >"$TMP/s1" 2>"$TMP/err"; rc=$?
"$ZERO" sample --init-from "$TMP/ck_qwen3" --prompt-ids "5,9,13" --tokens 6 --temperature 0 >"$TMP/s2" 2>>"$TMP/err"
check "sample a directory: the prompt and 6 ids" test $rc -eq 0 -a "$(wc -w <"$TMP/s1")" -eq 9
check "the checkpoint (lr 0) samples what its directory samples" cmp -s "$TMP/s1" "$TMP/s2"
"$ZERO" sample --init-from "$FIX/qwen3" --prompt "hi" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "a text prompt for a 64-token vocabulary" 1 "vocabulary of 64 tokens" "--prompt-ids"

# --- estimate and plan size a directory from its config.json alone
"$ZERO" estimate "$FIX/llama3_bias" --ranks 2 --json >"$TMP/e.json" 2>"$TMP/err"; rc=$?
check "estimate DIR: exit 0" test $rc -eq 0
check "estimate DIR: the parameters of its safetensors (tied head once)" "$PY" - "$TMP/e.json" "$FIX/llama3_bias" <<'EOF'
import json, struct, sys
e = json.load(open(sys.argv[1])); b = open(sys.argv[2] + "/model.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]]); h.pop("__metadata__", None)
total = sum(eval("*".join(map(str, v["shape"])) or "1") for v in h.values())
assert e["params"] == total and e["units"] == 4, (e["params"], total, e["units"])
EOF
"$ZERO" estimate --model "$FIX/qwen3" --ranks 2 --layers 5 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "estimate: a flag against config.json" 2 "--layers 5" "has layers 2"
"$ZERO" plan "$FIX/mistral" --ranks 2 --host-mem 8GiB -o "$TMP/plan.json" >"$TMP/p.out" 2>"$TMP/err"; rc=$?
check "plan DIR: exit 0 and the run line fine-tunes from it" test $rc -eq 0 -a -n "$(grep -F -- "--init-from $FIX/mistral" "$TMP/p.out")"
"$ZERO" estimate "$TMP/pickle" --ranks 2 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "estimate of a pickle directory: its config.json is enough" test $rc -eq 0

exit $fail
