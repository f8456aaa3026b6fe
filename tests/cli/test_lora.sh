#!/usr/bin/env bash
# LoRA through the command line against PEFT's committed goldens (tests/data/lora, made by
# scripts/make_lora_fixtures.py; no torch needed): `zero train --lora-from` a PEFT adapter gives
# PEFT's loss; `zero export --adapter` gives back PEFT's file (keys, bytes, adapter_config.json);
# `--merge` gives a model whose loss is PEFT's. A --lora run at stage 3 on 2 ranks: its trainable
# count by the formula, its adapter and merged exports reload to its loss, a resume continues
# bitwise, --save-frozen makes the checkpoint independent of the base directory. `zero sample` of a
# LoRA checkpoint (--resume) and of a base with an adapter (--lora-from) gives the greedy ids of
# the checkpoint's `export --merge`. Bad specs, bad
# adapter_config.json fields, bad adapters and bases that are not the run's: one-line errors.
# tests/cli/test_lora_peft.sh loads the exports with PEFT and transformers themselves.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
DEC="$SRC/tests/data/decoder"
LORA="$SRC/tests/data/lora"
"$PY" -c 'import numpy' || { echo "FAIL numpy is required (scripts/deps.sh installs python3-numpy)"; exit 1; }
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
# expect_error NAME STATUS NEEDLE...: the last command exited with STATUS and printed exactly one
# stderr line "zero: error: ..." containing every NEEDLE
expect_error() {
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(wc -l <"$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || cat "$TMP/err"
}
DATA=(--data "$DEC/tokens.bin" --seq 8 --val-batches 1)
# the loss of the first validation batch (4 sequences of 8 tokens, docs/MODEL.md Data) with the
# weights as given: one step at learning rate 0 changes nothing (AdamW's decay is scaled by lr)
val_of() { # val_of NAME ARGS...: prints the validation loss
    local name=$1; shift
    "$ZERO" train "${DATA[@]}" --micro-batch 4 --steps 1 --lr 0 --val-every 1 --log-json "$TMP/$name.json" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" || { echo "FAIL run $name: $ZERO train $*" >&2; cat "$TMP/$name.err" >&2; echo nan; return; }
    sed -n 's/.*"step":[0-9]*,.*"val_loss":\([^,]*\).*/\1/p' "$TMP/$name.json" | tail -1
}
close() { "$PY" -c "import sys; a, b, tol = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= tol * abs(b))" "$@"; }
# A reader of safetensors files: the header and the raw bytes of each tensor.
cat >"$TMP/st.py" <<'EOF'
import json, struct
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}, meta
def f64(path, key):
    t, _ = read(path)
    return struct.unpack("<d", t[key][2][:8])[0]
EOF
# the greedy ids `zero sample ARGS...` continues a fixed prompt with, on one line ("FAIL: ..." on an error)
greedy() { "$ZERO" sample --prompt-ids "1 2 3 4" --temperature 0 --tokens 16 "$@" 2>"$TMP/serr" || echo "FAIL: $(cat "$TMP/serr")"; }
golden_val() { "$PY" -c "import sys; sys.path.insert(0, '$TMP'); import st; print(repr(st.f64(sys.argv[1], 'val_loss')))" "$LORA/$1.golden.safetensors"; }

# ---------------------------------------------------------------- PEFT's adapters, PEFT's losses
for name in gpt2 llama_gqa4 llama3_bias qwen3 gemma2 gemma3 phi3 phi3_longrope; do
    base="$DEC/$name" gv=$(golden_val "$name")
    v=$(val_of "$name.peft" --init-from "$base" --lora-from "$LORA/$name" --save "$TMP/$name.ck")
    check "$name: zero's loss with PEFT's adapter $v = PEFT's $gv (1e-5)" close "$v" "$gv" 1e-5
    check "$name: the banner names the adapter" grep -q "from the adapter in --lora-from" "$TMP/$name.peft.out"
    "$ZERO" export "$TMP/$name.ck" -o "$TMP/$name.ad" --adapter >/dev/null 2>"$TMP/err" || { echo "FAIL $name: export --adapter"; cat "$TMP/err"; fail=1; }
    check "$name: export --adapter = PEFT's adapter_model.safetensors (keys, dtypes, shapes, bytes)" "$PY" - \
        "$LORA/$name/adapter_model.safetensors" "$TMP/$name.ad/adapter_model.safetensors" "$TMP" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3])
import st
a, _ = st.read(sys.argv[1])
b, _ = st.read(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(set(a) ^ set(b)))[:4]
for k in a:
    assert a[k] == b[k], k
EOF
    check "$name: adapter_config.json has PEFT's fields" "$PY" - "$LORA/$name/adapter_config.json" "$TMP/$name.ad/adapter_config.json" "$base" <<'EOF'
import json, os, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ("peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "use_rslora", "fan_in_fan_out", "bias"):
    assert a[k] == b[k], (k, a[k], b[k])
assert sorted(a["target_modules"]) == sorted(b["target_modules"]), (a["target_modules"], b["target_modules"])
assert os.path.samefile(b["base_model_name_or_path"], sys.argv[3]), b["base_model_name_or_path"]
EOF
    "$ZERO" export "$TMP/$name.ck" -o "$TMP/$name.mg" --merge --dtype fp32 >/dev/null 2>"$TMP/err" || { echo "FAIL $name: export --merge"; cat "$TMP/err"; fail=1; }
    v=$(val_of "$name.merged" --init-from "$TMP/$name.mg")
    check "$name: the merged model's loss $v = PEFT's $gv (1e-5)" close "$v" "$gv" 1e-5
    # the adapters applied by the pass (checkpoint, PEFT's directory) pick the merged model's tokens
    s_mg=$(greedy --init-from "$TMP/$name.mg") s_ck=$(greedy --resume "$TMP/$name.ck")
    s_ad=$(greedy --init-from "$base" --lora-from "$LORA/$name")
    check "$name: sample --resume of the LoRA checkpoint '$s_ck' = sample of its export --merge '$s_mg'" test "$s_ck" = "$s_mg"
    check "$name: sample --lora-from PEFT's adapter '$s_ad' = the same" test "$s_ad" = "$s_mg"
    # not vacuous: the adapters move the distribution (greedy alone may not see it: llama3_bias
    # repeats one token either way), so a draw at temperature 1 differs from the base's
    # (gemma3's random base puts almost all of its mass on one token after the prompt: its draws
    # coincide at any temperature, and the loss above is what shows its adapters act)
    d_ck=$(greedy --resume "$TMP/$name.ck" --temperature 1) d_base=$(greedy --init-from "$base" --temperature 1)
    [ $name = gemma3 ] ||
        check "$name: the adapters change the draw at temperature 1 ('$d_ck', the base alone '$d_base')" test "$d_ck" != "$d_base"
done

# ---------------------------------------------------------------- a LoRA run
L="$DEC/llama_gqa4"
SPEC=r=4,alpha=8,targets=q_proj,v_proj,down_proj
RUN=(--micro-batch 3 --ranks 2 --stage 3 --val-every 0)
"$ZERO" train --init-from "$L" "${DATA[@]}" "${RUN[@]}" --steps 6 --lora "$SPEC",dropout=0.1 --log-json "$TMP/full.json" \
    >"$TMP/full.out" 2>&1 || { echo "FAIL full run"; cat "$TMP/full.out"; exit 1; }
"$ZERO" train --init-from "$L" "${DATA[@]}" "${RUN[@]}" --steps 4 --lora "$SPEC",dropout=0.1 --save "$TMP/run" \
    --log-json "$TMP/run.json" >"$TMP/run.out" 2>&1 || { echo "FAIL run"; cat "$TMP/run.out"; exit 1; }
check "run: trainable parameters = r (in + out) over the targets and layers" "$PY" - "$L/config.json" "$TMP/run.out" <<'EOF'
import json, re, sys
c = json.load(open(sys.argv[1]))
C, I, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
D = c.get("head_dim") or C // c["num_attention_heads"]
Q, KV = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
n = 4 * ((C + Q) + (C + KV) + (I + C)) * L
line = [l for l in open(sys.argv[2]) if l.startswith("LoRA r=4 alpha=8 on q_proj,v_proj,down_proj: ")]
assert line and re.search(r": %d trainable parameters" % n, line[0]), (n, line)
EOF
"$ZERO" train --resume "$TMP/run" "${DATA[@]}" "${RUN[@]}" --steps 6 --log-json "$TMP/res.json" >"$TMP/res.out" 2>&1 ||
    { echo "FAIL resume"; cat "$TMP/res.out"; fail=1; }
losses() { sed -n 's/.*"step":\([56]\),"loss":\([^,]*\).*/\1 \2/p' "$1"; }
check "run: resumed at step 4 (base from the recorded directory), steps 5-6 bitwise" test "$(losses "$TMP/res.json")" = "$(losses "$TMP/full.json")" -a -n "$(losses "$TMP/full.json")"
# the adapters are ordinary trainable parameters: optimizer offload changes no bit, the JSON
# config's zero_extensions.lora is --lora, clipping acts on the adapters' norm, bf16 trains them
all_losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\).*/\1 \2/p' "$1"; }
mkdir -p "$TMP/nv"
"$ZERO" train --init-from "$L" "${DATA[@]}" "${RUN[@]}" --steps 6 --lora "$SPEC",dropout=0.1 --offload-optimizer nvme:"$TMP/nv" \
    --log-json "$TMP/off.json" >"$TMP/off.out" 2>&1 || { echo "FAIL offload run"; cat "$TMP/off.out"; fail=1; }
check "run: --offload-optimizer nvme: the same losses, bitwise" test "$(all_losses "$TMP/off.json")" = "$(all_losses "$TMP/full.json")"
echo '{"gradient_clipping": 0.05}' >"$TMP/clip.json"
echo '{"gradient_clipping": 0.05, "zero_extensions": {"lora": {"r": 4, "alpha": 8, "targets": ["q_proj", "v_proj", "down_proj"], "dropout": 0.1}}}' >"$TMP/clip_lora.json"
"$ZERO" train --init-from "$L" "${DATA[@]}" "${RUN[@]}" --steps 6 --config "$TMP/clip_lora.json" --log-json "$TMP/cj.json" >/dev/null 2>"$TMP/err" ||
    { echo "FAIL config run"; cat "$TMP/err"; fail=1; }
"$ZERO" train --init-from "$L" "${DATA[@]}" "${RUN[@]}" --steps 6 --config "$TMP/clip.json" --lora "$SPEC",dropout=0.1 --log-json "$TMP/cf.json" >/dev/null 2>"$TMP/err" ||
    { echo "FAIL clipped run"; cat "$TMP/err"; fail=1; }
check "run: zero_extensions.lora = --lora (clipped, bitwise)" test "$(all_losses "$TMP/cj.json")" = "$(all_losses "$TMP/cf.json")" -a -n "$(all_losses "$TMP/cf.json")"
check "run: clipping at 0.05 changes the adapters' steps" test "$(all_losses "$TMP/cf.json" | tail -1)" != "$(all_losses "$TMP/full.json" | tail -1)"
"$ZERO" train --init-from "$L" "${DATA[@]}" "${RUN[@]}" --steps 6 --lora "$SPEC",dropout=0.1 --precision bf16 --log-json "$TMP/bf.json" >/dev/null 2>"$TMP/err" ||
    { echo "FAIL bf16 run"; cat "$TMP/err"; fail=1; }
check "run: bf16 trains the adapters (every loss within 1% of fp32's)" "$PY" - "$TMP/bf.json" "$TMP/full.json" <<'EOF'
import json, sys
ls = [[json.loads(l)["loss"] for l in open(p) if '"step"' in l and '"loss"' in l] for p in sys.argv[1:]]
assert len(ls[0]) == len(ls[1]) == 6 and all(abs(a - b) <= 0.01 * b for a, b in zip(*ls)), ls
EOF
# the trained adapters, exported and read back, give the checkpoint's loss
"$ZERO" export "$TMP/run" -o "$TMP/run.ad" --adapter >/dev/null 2>"$TMP/err" || { echo "FAIL run: export --adapter"; cat "$TMP/err"; fail=1; }
"$ZERO" export "$TMP/run" -o "$TMP/run.mg" --merge --dtype fp32 >/dev/null 2>"$TMP/err" || { echo "FAIL run: export --merge"; cat "$TMP/err"; fail=1; }
v_ck=$(val_of run.ck --resume "$TMP/run" --micro-batch 4 --steps 5)
v_ad=$(val_of run.ad --init-from "$L" --lora-from "$TMP/run.ad")
v_mg=$(val_of run.mg --init-from "$TMP/run.mg")
check "run: the exported adapter's loss $v_ad = the checkpoint's $v_ck (1e-6)" close "$v_ad" "$v_ck" 1e-6
check "run: the merged model's loss $v_mg = the checkpoint's $v_ck (1e-5)" close "$v_mg" "$v_ck" 1e-5
check "run: the adapter's dropout is PEFT's lora_dropout" grep -q '"lora_dropout": 0.1' "$TMP/run.ad/adapter_config.json"
# sampling applies no dropout: the stage-3 checkpoint (base from the recorded directory) and its
# exported adapter sample as the merged model does (the loading paths; four steps move these
# adapters too little to change the greedy ids: the fixtures above show that they are applied)
s_mg=$(greedy --init-from "$TMP/run.mg") s_ck=$(greedy --resume "$TMP/run") s_ad=$(greedy --init-from "$L" --lora-from "$TMP/run.ad")
check "run: sample --resume '$s_ck' = sample of export --merge '$s_mg'" test "$s_ck" = "$s_mg"
check "run: sample --init-from BASE --lora-from (export --adapter) '$s_ad' = the same" test "$s_ad" = "$s_mg"
# --save-frozen: the checkpoint holds the base; merging and resuming need no base directory
cp -r "$L" "$TMP/base"
"$ZERO" train --init-from "$TMP/base" "${DATA[@]}" --micro-batch 4 --steps 2 --lora "$SPEC" --save "$TMP/sf" --save-frozen >/dev/null 2>"$TMP/err" ||
    { echo "FAIL --save-frozen run"; cat "$TMP/err"; fail=1; }
"$ZERO" train --init-from "$TMP/base" "${DATA[@]}" --micro-batch 4 --steps 2 --lora "$SPEC" --save "$TMP/nf" >/dev/null 2>"$TMP/err" ||
    { echo "FAIL run without --save-frozen"; cat "$TMP/err"; fail=1; }
v_sf=$(val_of sf.before --resume "$TMP/sf" --steps 3)
sz() { du -sb "$1" | cut -f1; }
check "--save-frozen: the checkpoint holds the base ($(sz "$TMP/sf") bytes vs $(sz "$TMP/nf"))" test "$(sz "$TMP/sf")" -gt $(($(sz "$TMP/nf") + 4 * 18592))
rm -rf "$TMP/base"
"$ZERO" export "$TMP/sf" -o "$TMP/sf.mg" --merge --dtype fp32 >/dev/null 2>"$TMP/err"; rc=$?
check "--save-frozen: export --merge without the base directory (exit $rc)" test $rc -eq 0
v_sfm=$(val_of sf.mg --init-from "$TMP/sf.mg")
check "--save-frozen: the merged model's loss $v_sfm = the resumed run's $v_sf (1e-5)" close "$v_sfm" "$v_sf" 1e-5
s_sf=$(greedy --resume "$TMP/sf") s_sfm=$(greedy --init-from "$TMP/sf.mg")
check "--save-frozen: sample --resume without the base directory '$s_sf' = sample of export --merge '$s_sfm'" test "$s_sf" = "$s_sfm"
s_nf=$(greedy --resume "$TMP/nf" --init-from "$L")
check "sample --resume CKPT --init-from BASE (the recorded base gone) '$s_nf' = the --save-frozen run's" test "$s_nf" = "$s_sf"
"$ZERO" sample --resume "$TMP/nf" --prompt-ids 1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "sample --resume: the recorded base is gone" 2 "without its base" "--init-from DIR"
"$ZERO" sample --resume "$TMP/nf" --init-from "$DEC/llama3_bias" --prompt-ids 1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "sample --resume with another base" 2 "is not the one the run of" "trained on"
"$ZERO" sample --resume "$TMP/sf" --init-from "$L" --prompt-ids 1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "sample --resume --init-from of a --save-frozen checkpoint" 2 "holds its base" "expected no --init-from"
"$ZERO" sample --resume "$TMP/sf.mg" --init-from "$L" --prompt-ids 1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "sample --resume --init-from of a model without adapters" 2 "expected one model"
"$ZERO" sample --init-from "$TMP/sf" --lora-from "$TMP/run.ad" --prompt-ids 1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "sample --lora-from on a LoRA checkpoint" 2 "with its own adapters" "--init-from DIR"
"$ZERO" sample --init-from "$L" --lora-from "$LORA/gpt2" --prompt-ids 1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "sample --lora-from another architecture's adapter" 2 "--lora-from" "'c_fc'"
"$ZERO" export "$TMP/nf" -o "$TMP/nf.mg" --merge >/dev/null 2>"$TMP/err"; rc=$?
expect_error "export --merge: the recorded base is gone" 2 "does not hold the base" "--base DIR"
"$ZERO" train --resume "$TMP/nf" "${DATA[@]}" --steps 3 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--resume: the recorded base is gone" 2 "needs its base model" "--init-from DIR"

# ---------------------------------------------------------------- bad input
T=(train --init-from "$L" "${DATA[@]}" --micro-batch 4 --steps 1)
"$ZERO" "${T[@]}" --lora r=0 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora r=0" 2 "--lora r '0'" "[1, 65536]"
"$ZERO" "${T[@]}" --lora r=4,foo=1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora unknown key" 2 "unknown key 'foo'" "r=RANK"
"$ZERO" "${T[@]}" --lora alpha=3 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora without r" 2 "expected r=RANK"
"$ZERO" "${T[@]}" --lora r=4,targets=c_attn >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora GPT-2 target on Llama" 2 "'c_attn'" "q_proj"
"$ZERO" "${T[@]}" --lora r=4,dropout=1 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora dropout 1" 2 "dropout '1'" "[0, 1)"
"$ZERO" "${T[@]}" --lora r=4 --lora-from "$LORA/llama_gqa4" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora and --lora-from" 2 "expected no --lora"
"$ZERO" "${T[@]}" --lora-from "$TMP/nonexistent" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora-from a missing directory" 1 "adapter_config.json" "No such file"
"$ZERO" "${T[@]}" --lora-from "$LORA/gpt2" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--lora-from GPT-2's adapter on Llama" 2 "'c_fc'" "LlamaForCausalLM"
# adapter_config.json with a field PEFT would not write, or one zero does not support
badcfg() { # badcfg NAME PYTHON-EXPR-ON-d
    mkdir -p "$TMP/bad_$1"
    cp "$LORA/llama_gqa4/adapter_model.safetensors" "$TMP/bad_$1/"
    "$PY" -c "import json, sys; d = json.load(open(sys.argv[1])); $2; json.dump(d, open(sys.argv[2], 'w'))" \
        "$LORA/llama_gqa4/adapter_config.json" "$TMP/bad_$1/adapter_config.json"
    "$ZERO" "${T[@]}" --lora-from "$TMP/bad_$1" >/dev/null 2>"$TMP/err"; rc=$?
}
badcfg nor 'd.pop("r")'
expect_error "adapter_config.json without r" 2 "r missing" "expected a whole number"
badcfg rstr 'd["r"] = "4"'
expect_error "adapter_config.json r a string" 2 'r "4"'
badcfg ia3 'd["peft_type"] = "IA3"'
expect_error "adapter_config.json peft_type IA3" 2 'peft_type "IA3"' '"LORA"'
badcfg tgt 'd["target_modules"] = ["q_proj", "nope"]'
expect_error "adapter_config.json unknown target" 2 "'nope'" "q_proj"
badcfg alpha 'd["lora_alpha"] = -2'
expect_error "adapter_config.json lora_alpha < 0" 2 "lora_alpha -2"
badcfg dora 'd["use_dora"] = True'
expect_error "adapter_config.json use_dora" 2 "use_dora true is not supported yet"
badcfg regex 'd["target_modules"] = ".*q_proj"'
expect_error "adapter_config.json regex targets" 2 "regular expression" "not supported yet"
badcfg r8 'd["r"] = 8'
expect_error "adapter_config.json r 8 for r-4 tensors" 1 "adapter_model.safetensors" "[4, 32]" "[8, 32]"
mkdir -p "$TMP/bad_json" && echo '{"r": 4,' >"$TMP/bad_json/adapter_config.json"
"$ZERO" "${T[@]}" --lora-from "$TMP/bad_json" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "adapter_config.json not JSON" 2 "adapter_config.json: not valid JSON at line 2"
# bases that are not the run's: another model directory, the same one with one value changed
cp -r "$L" "$TMP/other"
"$PY" -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); c['rms_norm_eps'] = 1e-5; json.dump(c, open(p, 'w'))" "$TMP/other/config.json"
"$ZERO" train --resume "$TMP/run" "${DATA[@]}" "${RUN[@]}" --steps 6 --init-from "$TMP/other" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--resume with another base" 2 "is not the one the run started from" "$TMP/other"
"$ZERO" train --resume "$TMP/run" "${DATA[@]}" "${RUN[@]}" --steps 6 --init-from "$DEC/qwen3" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--resume with another model" 2 "is not the one the run started from"
"$ZERO" train --resume "$TMP/run" "${DATA[@]}" "${RUN[@]}" --steps 6 --lora r=2 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--resume with --lora" 2 "records the run's LoRA settings"
"$ZERO" export "$TMP/run" -o "$TMP/x" --merge --base "$TMP/other" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "export --merge --base another base" 2 "is not the one the run trained on"
"$ZERO" export "$TMP/run" -o "$TMP/x" >/dev/null 2>"$TMP/err"; rc=$?
expect_error "export of a LoRA checkpoint without a flag" 2 "expected --adapter" "--merge"
"$ZERO" export "$TMP/run" -o "$TMP/x" --adapter --merge >/dev/null 2>"$TMP/err"; rc=$?
expect_error "export --adapter --merge" 2 "expected one of them"
"$ZERO" train --init-from "$L" "${DATA[@]}" --micro-batch 4 --steps 1 --save "$TMP/plain" >/dev/null 2>&1
"$ZERO" export "$TMP/plain" -o "$TMP/x" --adapter >/dev/null 2>"$TMP/err"; rc=$?
expect_error "export --adapter of a run without LoRA" 2 "is not the checkpoint of a LoRA run"
"$ZERO" train --resume "$TMP/plain" "${DATA[@]}" --steps 2 --lora r=2 >/dev/null 2>"$TMP/err"; rc=$?
expect_error "--resume of a run without LoRA, --lora added" 2 "cannot be added"
exit $fail
