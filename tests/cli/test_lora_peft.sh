#!/usr/bin/env bash
# LoRA exports against PEFT and transformers at run time: zero trains LoRA adapters (3 steps, 2
# ranks, stage 3) on the GPT-2 (Conv1D, fan_in_fan_out) and Llama (GQA, rsLoRA, every projection)
# fixtures, exports them with --adapter and --merge; peft.PeftModel.from_pretrained loads the
# adapter onto the base and transformers loads the merged directory, and both give zero's loss
# on zero's first validation batch within 1e-5. Needs PyPI torch, transformers and peft
# (`python3`, or $ZERO_PYTHON); without them the test is SKIPPED (exit 77, reported as skipped,
# never as passed). tests/cli/test_lora.sh checks the committed goldens without them.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PYT=${ZERO_PYTHON:-python3}
if ! "$PYT" -c 'import torch, transformers, peft' 2>/dev/null; then
    echo "SKIP: $PYT cannot import torch, transformers and peft (pip install torch transformers peft)"
    exit 77
fi
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
DEC="$SRC/tests/data/decoder"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
DATA=(--data "$DEC/tokens.bin" --seq 8 --val-batches 1)

for case in "gpt2 r=4,alpha=8,targets=c_attn,c_proj,c_fc" "llama_gqa4 r=4,alpha=16,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,rslora"; do
    set -- $case
    name=$1 spec=$2 base="$DEC/$1"
    "$ZERO" train --init-from "$base" "${DATA[@]}" --micro-batch 2 --ranks 2 --stage 3 --steps 3 --lr 1e-2 --lora "$spec" \
        --save "$TMP/$name.ck" >"$TMP/$name.out" 2>&1 || { echo "FAIL $name: train"; cat "$TMP/$name.out"; exit 1; }
    "$ZERO" export "$TMP/$name.ck" -o "$TMP/$name.ad" --adapter >/dev/null 2>"$TMP/err" || { echo "FAIL $name: export --adapter"; cat "$TMP/err"; exit 1; }
    "$ZERO" export "$TMP/$name.ck" -o "$TMP/$name.mg" --merge --dtype fp32 >/dev/null 2>"$TMP/err" || { echo "FAIL $name: export --merge"; cat "$TMP/err"; exit 1; }
    # zero's loss of the trained adapters on the first validation batch (resumed at lr 0)
    "$ZERO" train --resume "$TMP/$name.ck" "${DATA[@]}" --micro-batch 4 --steps 4 --lr 0 --val-every 1 --log-json "$TMP/$name.json" \
        >/dev/null 2>"$TMP/err" || { echo "FAIL $name: resume"; cat "$TMP/err"; exit 1; }
    v=$(sed -n 's/.*"step":[0-9]*,.*"val_loss":\([^,]*\).*/\1/p' "$TMP/$name.json" | tail -1)
    check "$name: PEFT's loss with zero's adapter and transformers' with the merged model = zero's $v (1e-5)" \
        "$PYT" - "$base" "$TMP/$name.ad" "$TMP/$name.mg" "$DEC/tokens.bin" "$v" <<'EOF'
import math, struct, sys
import peft, torch, transformers
base, adapter, merged, tokens, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
# zero's validation rule (docs/MODEL.md, Data): windows 0-3 of 9 tokens of the last 5% of the file
b = open(tokens, "rb").read()
n = struct.unpack("<Q", b[16:24])[0]
toks = torch.tensor(struct.unpack("<%dH" % n, b[32:32 + 2 * n]))
val = toks[n - int(math.floor(0.05 * n)):]
w = torch.stack([val[j * 8:j * 8 + 9] for j in range(4)])
def loss(model):
    model.eval()
    with torch.no_grad():
        lg = model(input_ids=w[:, :-1]).logits
    return torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]).double(), w[:, 1:].reshape(-1)).item()
kw = dict(dtype=torch.float32, attn_implementation="eager")
m = peft.PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(base, **kw), adapter)
got_peft = loss(m)
got_merged = loss(transformers.AutoModelForCausalLM.from_pretrained(merged, **kw))
print("  PEFT %.9f, merged %.9f, zero %.9f" % (got_peft, got_merged, want))
assert abs(got_peft - want) <= 1e-5 * abs(want) and abs(got_merged - want) <= 1e-5 * abs(want)
EOF
done
exit $fail
