#!/usr/bin/env bash
# `zero train --lora --quantize-base nf4|int8` (QLoRA, docs/QUANT.md) on the llama_gqa4 fixture:
# the same global batch on 3 ranks at stage 3 and on 1 rank at stage 0 ends at the same loss and
# exports the same PEFT adapter (not empty: its B matrices trained away from zero); the 16-bit
# merge of the adapters into the dequantized base evaluates to the QLoRA run's own validation
# loss; a resume keeps the base format; int8 trains too; `zero estimate --quantize-base` counts
# the records; bad values and pairings not supported are one line each.
set -u
: "${ZERO:?set ZERO to the zero binary}"
: "${ZERO_SOURCE_DIR:?set ZERO_SOURCE_DIR to the source tree}"
PY=/usr/bin/python3
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
D=$ZERO_SOURCE_DIR/tests/data
Q=(--init-from "$D/decoder/llama_gqa4" --data "$D/decoder/tokens.bin" --seq 8 --steps 6 --lr 1e-2 --val-every 0
   --val-batches 2 --lora r=4,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --quantize-base nf4)

"$ZERO" train "${Q[@]}" --ranks 3 --stage 3 --micro-batch 2 --save s3 --log-json s3.json >s3.out 2>s3.err
check "nf4, 3 ranks, stage 3: exit 0" test $? -eq 0
check "nf4: the banner names the format" grep -q "linear weights NF4 with double-quantized scales" s3.out
"$ZERO" train "${Q[@]}" --ranks 1 --stage 0 --micro-batch 6 --save s0 --log-json s0.json >s0.out 2>s0.err
check "nf4, 1 rank, stage 0: exit 0" test $? -eq 0
l3=$(done_field s3.json loss) l0=$(done_field s0.json loss)
# "stage 0 would need": the 1-rank stage-0 run's own model states, and on 3 ranks estimate's stage-0
# row (a quantized base counted as its records, not its parameter count)
"$ZERO" estimate "$D/decoder/llama_gqa4" --ranks 3 --seq 8 --lora r=4,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj \
    --quantize-base nf4 --json >s0est.json
check "stage 0 would need: the records' bytes" "$PY" - s0.json s3.json s0est.json <<'EOF'
import json, sys
d0, d3 = ([json.loads(l) for l in open(p) if '"done"' in l][-1] for p in sys.argv[1:3])
m = d0["mem"]
assert d0["stage0_model_states"] == m["params"] + m["grads"] + m["master"] + m["optim"], d0
r = [x for x in json.load(open(sys.argv[3]))["rows"] if x["stage"] == 0][0]
want = r["params_bytes"] + r["grads_bytes"] + r["master_bytes"] + r["optim_bytes"]
assert d3["stage0_model_states"] == want, (d3["stage0_model_states"], want)
EOF
check "the same loss on 3 ranks at stage 3 ($l3) and 1 rank at stage 0 ($l0)" "$PY" -c "
assert abs($l3 - $l0) <= 1e-5 * abs($l0), ($l3, $l0)"

# the adapters of both runs: equal, and trained
"$ZERO" export s3 --adapter -o a3 >/dev/null 2>err && "$ZERO" export s0 --adapter -o a0 >/dev/null 2>>err
check "export --adapter of both: exit 0" test $? -eq 0
# After 6 AdamW steps the adapters agree as a whole (relative L2 of the difference 3e-5 on an AVX-512
# machine) but an element whose gradient sits near zero moves by a part of lr in one order of the
# fp32 sums and not the other (one element of 1.5e-4, the next 4e-6, there): the element bound is
# 2e-3 of the largest, the whole 1e-4; the first step, before Adam can amplify anything, is checked
# tight below.
check "adapters: the same tensors (relative L2 1e-4, each within 2e-3 of the largest; 6 AdamW steps), B trained" "$PY" -c "
import json, struct
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k == '__metadata__': continue
        assert v['dtype'] == 'F32', v
        s, e = v['data_offsets']; out[k] = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, b = load('a3/adapter_model.safetensors'), load('a0/adapter_model.safetensors')
assert a.keys() == b.keys() and len(a) == 2 * 7 * 2, sorted(a)
top = max(max(abs(x) for x in t) for t in b.values())
worst = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)
Bmax = min(max(abs(x) for x in t) for k, t in b.items() if 'lora_B' in k)
l2 = sum((x - y) ** 2 for k in a for x, y in zip(a[k], b[k])) ** 0.5 / sum(y * y for t in b.values() for y in t) ** 0.5
assert worst <= 2e-3 * top and l2 <= 1e-4 and Bmax > 1e-3, (worst, top, l2, Bmax)
print('worst |diff| %.2e of %.3f, relative L2 %.2e; every B reaches %.2e' % (worst, top, l2, Bmax))"
# one step: 3 ranks at stage 3 and 1 rank at stage 0 give the same adapters within 1e-6 of the largest
"$ZERO" train "${Q[@]}" --steps 1 --ranks 3 --stage 3 --micro-batch 2 --save t3 >/dev/null 2>err &&
    "$ZERO" train "${Q[@]}" --steps 1 --ranks 1 --stage 0 --micro-batch 6 --save t0 >/dev/null 2>>err &&
    "$ZERO" export t3 --adapter -o b3 >/dev/null 2>>err && "$ZERO" export t0 --adapter -o b0 >/dev/null 2>>err
check "one step at stage 3 on 3 ranks and stage 0 on 1: exit 0" test $? -eq 0
check "one step: the adapters within 1e-6 of the largest" "$PY" -c "
import json, struct
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: struct.unpack('<%df' % ((v['data_offsets'][1] - v['data_offsets'][0]) // 4),
                             b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]])
            for k, v in h.items() if k != '__metadata__'}
a, b = load('b3/adapter_model.safetensors'), load('b0/adapter_model.safetensors')
top = max(max(abs(x) for x in t) for t in b.values())
worst = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)
assert a.keys() == b.keys() and worst <= 1e-6 * top, (worst, top)"

# the merge: the dequantized base plus the adapters' delta evaluates as the QLoRA model did
"$ZERO" export s0 --merge -o m0 >/dev/null 2>err
check "export --merge: exit 0" test $? -eq 0
v0=$(done_field s0.json val_loss)
"$ZERO" train --init-from m0 --data "$D/decoder/tokens.bin" --seq 8 --steps 1 --lr 0 --micro-batch 6 --val-every 0 \
    --val-batches 2 --log-json m0.json >/dev/null 2>err
check "the merged model trains (lr 0): exit 0" test $? -eq 0
vm=$(done_field m0.json val_loss)
check "the merged model's validation loss ($vm) is the QLoRA run's ($v0)" "$PY" -c "
assert abs($vm - $v0) <= 1e-5 * abs($v0), ($vm, $v0)"

# resume on 1 rank: the format comes from the checkpoint
"$ZERO" train --resume s3 --steps 8 --val-every 0 --val-batches 1 >r.out 2>r.err
check "resume of the 3-rank run on 1 rank: exit 0" test $? -eq 0
check "resume: the base is NF4 again" grep -q "linear weights NF4" r.out

# --quantize-embeddings: the embeddings and the LM head NF4 too. 3 ranks at stage 3 and 1 at stage 0
# the same loss; fewer parameter bytes than the base's linear weights alone, the stage-0 states
# estimate's row; the merge (the dequantized embeddings, head and layers plus the delta) evaluates
# as the run did
"$ZERO" train "${Q[@]}" --quantize-embeddings --ranks 3 --stage 3 --micro-batch 2 --log-json e3.json >e3.out 2>e3.err
check "nf4 + embeddings, 3 ranks, stage 3: exit 0" test $? -eq 0
check "nf4 + embeddings: the banner names them" grep -q "linear weights, embeddings and LM head NF4" e3.out
"$ZERO" train "${Q[@]}" --quantize-embeddings --ranks 1 --stage 0 --micro-batch 6 --save e0 --log-json e0.json >e0.out 2>e0.err
check "nf4 + embeddings, 1 rank, stage 0: exit 0" test $? -eq 0
"$ZERO" estimate "$D/decoder/llama_gqa4" --ranks 1 --seq 8 --lora r=4,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj \
    --quantize-base nf4 --quantize-embeddings --json >e0est.json
check "nf4 + embeddings: one loss on 3 and 1 ranks, fewer parameter bytes, the estimate's states" "$PY" - e0.json e3.json s0.json e0est.json <<'EOF'
import json, sys
e0, e3, s0 = ([json.loads(l) for l in open(p) if '"done"' in l][-1] for p in sys.argv[1:4])
assert abs(e3["loss"] - e0["loss"]) <= 1e-5 * abs(e0["loss"]), (e3["loss"], e0["loss"])
assert e0["loss"] != s0["loss"], "the embeddings were not quantized: the loss is the nf4 run's"
assert e0["mem"]["params"] < s0["mem"]["params"], (e0["mem"], s0["mem"])
r = [x for x in json.load(open(sys.argv[4]))["rows"] if x["stage"] == 0][0]
m = e0["mem"]
assert r["params_bytes"] + r["grads_bytes"] + r["master_bytes"] + r["optim_bytes"] == m["params"] + m["grads"] + m["master"] + m["optim"], (r, m)
EOF
"$ZERO" export e0 --merge -o me0 >/dev/null 2>err
check "nf4 + embeddings: export --merge: exit 0" test $? -eq 0
ve=$(done_field e0.json val_loss)
"$ZERO" train --init-from me0 --data "$D/decoder/tokens.bin" --seq 8 --steps 1 --lr 0 --micro-batch 6 --val-every 0 \
    --val-batches 2 --log-json me0.json >/dev/null 2>err
vme=$(done_field me0.json val_loss)
check "nf4 + embeddings: the merged model's validation loss ($vme) is the run's ($ve)" "$PY" -c "
assert abs($vme - $ve) <= 1e-5 * abs($ve), ($vme, $ve)"
"$ZERO" train --resume e0 --steps 8 --val-every 0 --val-batches 1 >re.out 2>re.err
check "nf4 + embeddings: resume keeps them quantized" grep -q "linear weights, embeddings and LM head NF4" re.out
"$ZERO" train "${Q[@]:0:14}" --lora r=4 --quantize-embeddings --steps 1 >/dev/null 2>err
rc=$?; check "--quantize-embeddings without --quantize-base: refused (exit $rc)" test "$rc" -ne 0
check "--quantize-embeddings without --quantize-base: names the key" grep -q "quantize_embeddings.*quantize_base" err

# int8
"$ZERO" train "${Q[@]:0:14}" --lora r=4 --quantize-base int8 --micro-batch 6 --log-json i8.json >i8.out 2>i8.err
check "int8: exit 0" test $? -eq 0
check "int8: the banner names it" grep -q "linear weights int8" i8.out
check "int8: trained (loss $(done_field i8.json loss))" "$PY" -c "import math; assert math.isfinite($(done_field i8.json loss))"

# estimate: the records counted; NF4 well under bf16's base, int8 between
for q in none nf4 int8; do
    "$ZERO" estimate --model llama-3.1-8b --ranks 2 --lora r=16 --precision bf16 --quantize-base $q --json >e_$q.json 2>err
    check "estimate --quantize-base $q: exit 0" test $? -eq 0
done
check "estimate: frozen bytes nf4 < 0.72 x bf16's, int8 < 1.2 x nf4's... in order" "$PY" -c "
import json
f = {q: json.load(open('e_%s.json' % q))['lora'] for q in ('none', 'nf4', 'int8')}
p = f['none']['frozen_params']
assert all(x['frozen_params'] == p for x in f.values())
n, q4, q8 = (f[q]['frozen_elements'] for q in ('none', 'nf4', 'int8'))
assert n == p and q4 < 0.72 * n and q4 < q8 < n, (n, q4, q8)
assert f['nf4']['quantize_base'] == 'nf4-dq' and f['int8']['quantize_base'] == 'int8'
print('frozen elements (bf16 slots): none %d, nf4 %d (%.3f), int8 %d (%.3f)' % (n, q4, q4 / n, q8, q8 / n))"

# the base offloaded with the parameters (--offload-param cpu: pinned host memory on a device): on
# the fake device, 2 ranks at stage 3 in bf16, the losses bitwise the cpu backend's without
# offload; the states' pinned bytes estimate's "3 cpu+p" row (each array rounded to 256 B), none
# on the device
F=(--init-from "$D/decoder/llama_gqa4" --data "$D/decoder/tokens.bin" --seq 8 --steps 3 --val-every 0 --val-batches 1
   --lora r=4 --quantize-base nf4 --precision bf16 --stage 3 --ranks 2)
"$ZERO" train "${F[@]}" --device cpu --log-json off0.json >off0.out 2>&1
check "bf16 nf4, 2 ranks, stage 3, cpu backend: exit 0" test $? -eq 0
"$ZERO" train "${F[@]}" --device fake --offload-param cpu --offload-optimizer cpu --log-json off1.json >off1.out 2>&1
check "... on the fake device with the parameters and the optimizer on cpu: exit 0" test $? -eq 0
"$ZERO" estimate "$D/decoder/llama_gqa4" --ranks 2 --seq 8 --lora r=4 --quantize-base nf4 --precision bf16 --gpus 2 \
    --gpu-memory 1GiB --json >off_est.json
check "the frozen base pinned: losses bitwise, pinned bytes = estimate's" "$PY" - off0.json off1.json off_est.json <<'EOF'
import json, sys
recs = [[json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:3]]
loss = [[r["loss"] for r in rs if "step" in r and "loss" in r and not r.get("done")] for rs in recs]
assert len(loss[0]) == 3 and loss[0] == loss[1], loss
done = recs[1][-1]
row = [r for r in json.load(open(sys.argv[3]))["rows"] if r["stage"] == 3 and r["offload_param"] == "cpu"][0]
dm = done["device_mem"]
assert dm["states"] == 0 and row["device_bytes"] == 0, (dm, row)
arrays = 4 * 6  # units x (params, frozen, grads, master, two states)
assert row["pinned_bytes"] <= dm["pinned_states"] < row["pinned_bytes"] + 256 * arrays, (dm, row)
EOF

# the base on NVMe with the parameters (--offload-param nvme: each unit's frozen shard in the
# parameter file behind its working one, read with it for the gather): 1 and 3 ranks at stage 3,
# the records coded while loading written there; the losses bitwise the same runs in RAM, and on
# the lazy fake device (2 ranks) too
mkdir -p nv
N=(--offload-param nvme:nv --offload-optimizer nvme:nv)
nvme_bitwise() { # RANKS [FLAGS...]: the run on NVMe and in RAM, the same losses
    local r=$1; shift
    "$ZERO" train "${F[@]:0:18}" --stage 3 --ranks "$r" "$@" --log-json "nv_ram$r.json" >"nv_ram$r.out" 2>&1 || { tail -3 "nv_ram$r.out"; return 1; }
    "$ZERO" train "${F[@]:0:18}" --stage 3 --ranks "$r" "$@" "${N[@]}" --log-json "nv_off$r.json" >"nv_off$r.out" 2>&1 ||
        { tail -3 "nv_off$r.out"; return 1; }
    "$PY" - "nv_ram$r.json" "nv_off$r.json" <<'EOF'
import json, sys
loss = [[r["loss"] for r in (json.loads(l) for l in open(p) if l.strip()) if "step" in r and "loss" in r and not r.get("done")]
        for p in sys.argv[1:3]]
assert len(loss[0]) == 3 and loss[0] == loss[1], loss
EOF
}
check "QLoRA base on NVMe, 1 rank: losses bitwise the run in RAM" nvme_bitwise 1
check "QLoRA base on NVMe, 3 ranks: losses bitwise the run in RAM" nvme_bitwise 3
ZERO_DEVICE_LAZY=1 check "QLoRA base on NVMe, 2 ranks on the lazy fake device: bitwise" nvme_bitwise 2 --device fake
check "no swap file left" bash -c '! ls nv | grep -q swp'

# bad input: one line each
"$ZERO" train "${Q[@]:0:14}" --quantize-base q3 >/dev/null 2>err
rc=$?; expect_error "--quantize-base q3" 2 "--quantize-base 'q3'" "nf4, int8 or none"
"$ZERO" train --init-from "$D/decoder/llama_gqa4" --data "$D/decoder/tokens.bin" --seq 8 --steps 1 --quantize-base nf4 \
    >/dev/null 2>err
rc=$?; expect_error "--quantize-base without --lora" 2 "--quantize-base nf4" "not trained" "--lora"
"$ZERO" train --model tiny --seq 16 --steps 1 --lora r=2 --quantize-base nf4 >/dev/null 2>err
rc=$?; check "GPT-2 base: refused (exit $rc)" test "$rc" -ne 0
check "GPT-2 base: not supported yet" grep -q "GPT-2 (Conv1D weights) is not supported yet" err
"$ZERO" train "${Q[@]}" --save-frozen --save sf >/dev/null 2>err
rc=$?; check "--save-frozen: refused (exit $rc)" test "$rc" -ne 0
check "--save-frozen: not supported yet" grep -q "save_frozen with zero_extensions.quantize_base \"nf4\" is not supported yet" err
echo '{"train_batch_size": 6, "zero_extensions": {"quantize_base": "fp4"}}' >bad.json
"$ZERO" train "${Q[@]:0:14}" --lora r=4 --config bad.json >/dev/null 2>err
rc=$?; check "config quantize_base \"fp4\": refused (exit $rc)" test "$rc" -ne 0
check "config: names the key and the values" grep -q 'zero_extensions.quantize_base.*"nf4", "int8" or "none"' err
"$ZERO" estimate --model llama-3.1-8b --ranks 2 --lora r=16 --quantize-base fp4 >/dev/null 2>err
rc=$?; expect_error "estimate --quantize-base fp4" 2 "--quantize-base 'fp4'" "nf4, int8 or none"
"$ZERO" estimate --model llama-3.1-8b --ranks 2 --quantize-base nf4 >/dev/null 2>err
rc=$?; expect_error "estimate --quantize-base without --lora" 2 "--quantize-base: expected --lora too"
"$ZERO" estimate --model llama-3.1-8b --ranks 2 --lora r=16 --quantize-embeddings >/dev/null 2>err
rc=$?; expect_error "estimate --quantize-embeddings without --quantize-base" 2 "--quantize-embeddings: expected --quantize-base"
exit $fail
