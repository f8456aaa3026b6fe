#!/usr/bin/env bash
# `zero plan`: the rung it picks on hardware sized from `zero estimate`'s own figures, the config
# it writes (and that the config loader accepts), the shortfall when nothing fits, usage errors.
# The step-time side (rates, the choice by time) is tests/cli/test_plan_time.sh.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# no rates file of this machine: the documented defaults, whatever zero bench rates stored here
unset ZERO_RATES
export XDG_CACHE_HOME="$TMP/cache"
fail=0
check() { # check NAME COMMAND...: runs the command, counts a failure when it fails
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
# The config loader check: the unit-test program of the plan layer loads and resolves a config
# file through zero_config_load_json_file + zero_config_resolve.
LOADER="${ZERO_BUILD_DIR:-$(dirname "$ZERO")}/tests/test_plan"

# --- plenty of memory: every rung fits at the largest micro-batch considered without
# checkpointing; stage 1 is the fastest (stage 0 updates every parameter on every rank, stage 1
# its shard, for the same traffic; stage 2 ties with it and comes later in the ladder)
"$ZERO" plan --model small --ranks 2 --device-mem 80GiB --host-mem 256GiB --json -o "$TMP/ds0.json" >"$TMP/p0.json"
check "roomy: exit 0" test $? -eq 0
check "roomy: stage 1, micro-batch 8, config" "$PY" - "$TMP/p0.json" "$TMP/ds0.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert p["fits"] and p["stage"] == 1 and p["offload_optimizer"] == "none", p
assert p["micro_batch"] == 8 and p["activation_checkpointing"] is False, p
assert p["chosen"] == 1 and p["rungs"][1]["stage"] == 1 and p["chosen_name"] == "stage 1, micro-batch 8", p
r = p["rungs"]
assert all(x["fits"] and x["micro_batch"] == 8 for x in r), r
assert r[1]["step_seconds"] < r[0]["step_seconds"] and r[1]["step_seconds"] == r[2]["step_seconds"], r
assert r[0]["time"]["optimizer"] > r[1]["time"]["optimizer"] and r[0]["time"]["compute"] == r[1]["time"]["compute"], r
assert c["zero_optimization"]["stage"] == 1 and c["train_micro_batch_size_per_gpu"] == 8, c
assert c["gradient_accumulation_steps"] == 1 and c["optimizer"]["type"] == "AdamW", c
assert "bf16" not in c and "fp16" not in c
EOF

# --- the device one byte short of stage 0's need at micro-batch 1 with checkpointing (computed
# here from estimate's rows and activation figures): stage 0 does not fit, stage 1 fits exactly
# at micro-batch 1 without checkpointing
"$ZERO" estimate --model gpt2 --ranks 4 --precision bf16 --json >"$TMP/est.json"
"$ZERO" estimate --model gpt2 --ranks 4 --precision bf16 --json --micro-batch 2 >"$TMP/est2.json"
read -r need0 need1 need1_nockpt need1_mb2 <<<"$("$PY" - "$TMP/est.json" "$TMP/est2.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); d2 = json.load(open(sys.argv[2]))
row = {(r["stage"], r["offload"]): r for r in d["rows"]}
def need(s, act): return row[(s, "none")]["device_bytes"] + row[(s, "none")]["transient_bytes"] + act
print(need(0, d["activation_checkpointed_bytes"]), need(1, d["activation_checkpointed_bytes"]),
      need(1, d["activation_bytes"]), need(1, d2["activation_bytes"]))
EOF
)"
# Stage 1 fits exactly without checkpointing at micro-batch 1, not at 2.
dev=$need1_nockpt
check "sizes ordered" test "$need1" -lt "$need0" -a "$need1_nockpt" -lt "$need1_mb2" -a "$need1_nockpt" -lt "$need0"
"$ZERO" plan --model gpt2 --ranks 4 --precision bf16 --device-mem "$dev" --host-mem 1GiB --headroom 0 --json \
    -o "$TMP/ds1.json" >"$TMP/p1.json"
check "tight: exit 0" test $? -eq 0
check "tight: stage 1 fits micro-batch 1 exactly without checkpointing" "$PY" - "$TMP/p1.json" "$TMP/ds1.json" "$need1_nockpt" <<'EOF'
import json, os, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert p["fits"], p
assert any("stage 0 does not fit" in r for r in p["reasons"]), p["reasons"]
rungs = [(r["stage"], r["offload_optimizer"], r["offload_param"], r["fits"]) for r in p["rungs"]]
assert rungs[:3] == [(0, "none", "none", False), (1, "none", "none", True), (2, "none", "none", True)], rungs
assert len(rungs) == 7  # no --nvme: the three nvme rungs are left out
s1 = p["rungs"][1]["variants"]
assert s1[0]["micro_batch"] == 1 and s1[1]["fits"], s1
# the choice: the fitting rung with the fewest seconds per sequence; its config
fit = [(r["sample_seconds"], i) for i, r in enumerate(p["rungs"]) if r["fits"]]
assert p["chosen"] == min(fit)[1], (p["chosen"], fit)
ch = p["rungs"][p["chosen"]]
assert c["zero_optimization"]["stage"] == ch["stage"] == p["stage"] and c["bf16"]["enabled"] is True, c
assert c["train_micro_batch_size_per_gpu"] == ch["micro_batch"] == p["micro_batch"], c
# stages 0-2 move 2 Psi of bf16 per step, stage 3 3 Psi
est = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), "est.json")))
assert p["traffic_bytes"] == (3 if ch["stage"] == 3 else 2) * 2 * est["padded_params"], p["traffic_bytes"]
EOF
# One byte less: stage 1 fits only with checkpointing.
"$ZERO" plan --model gpt2 --ranks 4 --precision bf16 --device-mem "$((dev - 1))" --host-mem 1GiB --headroom 0 --json >"$TMP/p1c.json"
check "one byte less: stage 1 needs checkpointing" "$PY" -c "
import json; p = json.load(open('$TMP/p1c.json'))
v = p['rungs'][1]['variants']
assert p['rungs'][1]['fits'] and not v[0]['fits'] and v[1]['fits'], v
assert p['rungs'][1]['activation_checkpointing'] is True, p['rungs'][1]"

# --- traffic time on the link: sent bytes * 8 / (G * 1e9)
"$ZERO" plan --model gpt2 --ranks 4 --device-mem 80GiB --host-mem 64GiB --link-gbps 8 --json >"$TMP/pt.json"
check "traffic time" "$PY" -c "
import json; p = json.load(open('$TMP/pt.json'))
assert abs(p['traffic_sent_bytes'] - p['traffic_bytes'] * 3 / 4) < 1e-6 * p['traffic_bytes'], p
assert abs(p['traffic_seconds'] - p['traffic_sent_bytes'] / 1e9) < 1e-12 * p['traffic_bytes'], p"

# --- a GPU machine too small for gpt2-xl without offload: the optimizer goes to the host
"$ZERO" plan --model gpt2-xl --ranks 2 --precision bf16 --device-mem 8GiB --host-mem 128GiB --json -o "$TMP/ds2.json" >"$TMP/p2.json"
check "offload cpu" "$PY" - "$TMP/p2.json" "$TMP/ds2.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert p["fits"] and p["offload_optimizer"] == "cpu" and p["host_bytes"] > 0, p
assert c["zero_optimization"]["offload_optimizer"]["device"] == "cpu", c
assert c["zero_optimization"]["stage"] == p["stage"]
EOF

# --- CPU-only with NVMe: never "cpu" offload; NVMe when RAM is short
"$ZERO" plan --model gpt2-large --ranks 4 --host-mem 12GiB --nvme 200GiB --nvme-path "$TMP/nvme" --json -o "$TMP/ds3.json" >"$TMP/p3.json"
check "cpu-only nvme: exit 0" test $? -eq 0
check "cpu-only nvme" "$PY" - "$TMP/p3.json" "$TMP/ds3.json" "$TMP/nvme" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert p["fits"] and p["offload_optimizer"] == "nvme" and p["stage"] >= 2, p
assert not any("on cpu" in r for r in p["reasons"]), p["reasons"]
z = c["zero_optimization"]
assert z["offload_optimizer"] == {"device": "nvme", "nvme_path": sys.argv[3]}, z
EOF

# --- the configs load and resolve (skipped, and counted as a failure, when the loader is absent)
for f in ds0 ds1 ds2 ds3; do
    ranks=4; [ $f = ds0 ] || [ $f = ds2 ] && ranks=2
    check "config $f loads" "$LOADER" --load-config "$TMP/$f.json" $ranks
done

# --- the estimate against the engine's own accounting on 2, 3 and 4 MPI ranks (GPT-2 tiny and odd
# sizes, stages 0-3, fp32/bf16; on 4 and 6 ranks stage 3 with hpZ groups of 2 and 3 too): model
# states equal to the byte, buffers under the bound
MPIEXEC=$(command -v mpiexec || true)
for np in 2 3 4 6; do
    check "engine accounting on $np ranks" bash -c '[ -n "$0" ] && "$0" --oversubscribe -np '$np' "$1" --mpi-engine >/dev/null' \
        "$MPIEXEC" "$LOADER"
done

# --- the plan's config really trains: run the `zero train` line the plan prints (2 steps); the
# run's accounting (mem.*) equals the estimate's row for the chosen stage, its transient stays
# under the estimate's bound, and its activations equal the plan's figure
"$ZERO" estimate --model tiny --ranks 2 --precision fp16 --json >"$TMP/tiny_est.json"
ckpt_dev=$("$PY" -c "
import json; d = json.load(open('$TMP/tiny_est.json'))
r = [x for x in d['rows'] if x['stage'] == 1 and x['offload'] == 'none'][0]
print(r['device_bytes'] + r['transient_bytes'] + d['activation_checkpointed_bytes'])")
trains() { # trains NAME RANKS PRECISION PLAN-ARGS...: plan, train as told, compare
    local name=$1 ranks=$2 prec=$3; shift 3
    "$ZERO" plan --model tiny --ranks "$ranks" --precision "$prec" "$@" --json >"$TMP/$name.plan.json" || return 1
    "$ZERO" plan --model tiny --ranks "$ranks" --precision "$prec" "$@" -o "$TMP/$name.ds.json" \
        >"$TMP/$name.plan.txt" || return 1
    local args
    args=$(sed -n 's/^config: .*; run: zero //p' "$TMP/$name.plan.txt")
    [ -n "$args" ] || { echo "  no train line in: $(cat "$TMP/$name.plan.txt")"; return 1; }
    # shellcheck disable=SC2086 # the printed command line is split into its words on purpose
    (cd "$TMP" && "$ZERO" $args --steps 2 --val-every 0 --val-batches 1 --log-json "$TMP/$name.log" \
        >"$TMP/$name.train.out" 2>&1) || { echo "  $args: $(tail -3 "$TMP/$name.train.out")"; return 1; }
    # shellcheck disable=SC2046
    "$ZERO" estimate --model tiny --ranks "$ranks" --precision "$prec" $(grep -o -- '--seq [0-9]*' <<<"$args") \
        --json >"$TMP/$name.est.json" || return 1
    "$PY" - "$TMP/$name.plan.json" "$TMP/$name.log" "$TMP/$name.est.json" "$args" <<'EOF'
import json, math, sys
plan = json.load(open(sys.argv[1]))
log = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
est = json.load(open(sys.argv[3]))
args = sys.argv[4]
done = log[-1]
assert done.get("done") and done["steps"] == 2 and math.isfinite(done["loss"]), done
assert done["stage"] == plan["stage"] and done["ranks"] == plan["ranks"], (done, plan)
assert ("--activation-checkpointing" in args) == plan["activation_checkpointing"], args
row = [r for r in est["rows"] if r["stage"] == plan["stage"] and r["offload"] == "none"][0]
for cat in ("params", "grads", "master", "optim"):
    assert done["mem"][cat] == row[cat + "_bytes"], (cat, done["mem"], row)
assert done["mem"]["buffers"] <= row["transient_bytes"], (done["mem"], row)
assert done["mem"]["activations"] == plan["activation_bytes"], (done["mem"], plan)
EOF
}
check "plan trains: roomy, micro-batch 8" trains roomy 3 fp32 --device-mem 1GiB --host-mem 1GiB
check "plan trains: stage 1 bf16" trains bf16 2 bf16 --device-mem 3MiB --host-mem 1GiB
check "plan trains: stage 1 fp16 with checkpointing" trains ckpt 2 fp16 --device-mem "$ckpt_dev" \
    --host-mem 1GiB --headroom 0
check "the checkpointing case chose it" "$PY" -c "
import json; p = json.load(open('$TMP/ckpt.plan.json'))
assert p['stage'] == 1 and p['activation_checkpointing'] and p['micro_batch'] == 1, p"

# --- hpZ trains: `zero train` on 4 local ranks with zero_hpz_partition_size 2 (bf16, 2 steps) keeps
# the model states of estimate's row "3 hpZ 2" (4 ranks on 2 nodes) to the byte
printf '{"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2}, "bf16": {"enabled": true}}\n' >"$TMP/hpz2.json"
hpz_trains() {
    (cd "$TMP" && "$ZERO" train --model tiny --ranks 4 --config "$TMP/hpz2.json" --seq 64 --micro-batch 1 --steps 2 \
        --val-every 0 --val-batches 1 --log-json "$TMP/hpz2.log" >"$TMP/hpz2.out" 2>&1) || { tail -3 "$TMP/hpz2.out"; return 1; }
    "$ZERO" estimate --model tiny --ranks 4 --nodes 2 --precision bf16 --seq 64 --json >"$TMP/hpz2.est.json" || return 1
    "$PY" - "$TMP/hpz2.log" "$TMP/hpz2.est.json" <<'EOF'
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
est = json.load(open(sys.argv[2]))
row = [r for r in est["rows"] if r["stage"] == 3 and r["hpz_partition_size"] == 2][0]
plain = [r for r in est["rows"] if r["stage"] == 3 and r["hpz_partition_size"] == 1 and r["offload"] == "none"][0]
assert done.get("done") and done["stage"] == 3 and done["ranks"] == 4, done
for cat in ("params", "grads", "master", "optim"):
    assert done["mem"][cat] == row[cat + "_bytes"], (cat, done["mem"], row)
assert row["params_bytes"] == plain["params_bytes"] + est["padded_params"] // 2 * 2, (row, plain)
assert done["mem"]["buffers"] <= row["transient_bytes"], (done["mem"], row)
EOF
}
check "hpZ trains: the model states of estimate's hpZ row, to the byte" hpz_trains

# --- nothing fits: exit 1, the shortfall on one line, no config written
"$ZERO" plan --model gpt2-xl --ranks 2 --device-mem 1GiB --host-mem 2GiB -o "$TMP/none.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "nothing fits: exit 1" test $rc -eq 1
check "nothing fits: one error line with the shortfall" bash -c \
    "[ \$(wc -l <'$TMP/err') -eq 1 ] && grep -q '^zero: error: plan: nothing fits: the closest, stage .* missing' '$TMP/err'"
check "nothing fits: no config" test ! -e "$TMP/none.json"
"$ZERO" plan --model gpt2-xl --ranks 2 --device-mem 1GiB --host-mem 2GiB --json >"$TMP/nf.json" 2>/dev/null
check "nothing fits: JSON shortfall" "$PY" -c "
import json; p = json.load(open('$TMP/nf.json'))
assert p['fits'] is False and p['missing']['device'] + p['missing']['host'] > 0, p
assert abs(p['need_device'] - p['missing']['device'] - 0.9 * 2**30) < 1 or p['missing']['device'] == 0, p"

check "--help" bash -c "\"\$0\" plan --help | grep -q '^usage: zero plan'" "$ZERO"

# --- hpZ: gpt2, bf16, 8 ranks on 2 CPU-only nodes of 4, hosts sized from estimate's figures so that
# stage 3 + hpZ 4 fits without checkpointing and stages 0-2 only with it; on a 1 Gbit/s link the
# plan picks stage 3 + hpZ 4 (stage 3's traffic less the backward all-gather's crossing, no
# recompute) and writes zero_hpz_partition_size 4, which the loader accepts for 8 ranks
"$ZERO" estimate --model gpt2 --ranks 8 --nodes 2 --precision bf16 --rates cpu --json >"$TMP/e8.json"
H=$("$PY" - "$TMP/e8.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
A, Ac = d["activation_bytes"], d["activation_checkpointed_bytes"]
row = {(r["stage"], r["hpz_partition_size"]): r for r in d["rows"] if r["offload"] == "none" and not r["quantized_weights"]}
def need(k, a): return row[k]["device_bytes"] + row[k]["transient_bytes"] + a
assert need((3, 4), A) < min(need((s, 1), A) for s in range(3)), "the sizes do not allow the case"
assert row[(3, 4)]["params_bytes"] == row[(3, 1)]["params_bytes"] + d["padded_params"] // 4 * 2, row[(3, 4)]
print(4 * (need((3, 4), A) + 1000))
EOF
)
"$ZERO" plan --model gpt2 --ranks 8 --nodes 2 --precision bf16 --rates cpu --host-mem "$H" --headroom 0 \
    --micro-batch 1 --link-gbps 1 --json -o "$TMP/hpz.json" >"$TMP/phpz.json"
check "2 nodes of 4, 1 Gbit/s: stage 3 + hpZ 4, config" "$PY" - "$TMP/phpz.json" "$TMP/hpz.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert p["fits"] and p["stage"] == 3 and p["hpz_partition_size"] == 4 and not p["activation_checkpointing"], p["chosen_name"]
assert p["chosen_name"] == "stage 3 + hpZ 4, micro-batch 1", p["chosen_name"]
assert c["zero_optimization"] == {"stage": 3, "zero_hpz_partition_size": 4}, c
r = p["rungs"]; h = r[p["chosen"]]; s3 = [x for x in r if x["name"] == "stage 3"][0]
assert s3["fits"] and s3["step_seconds"] > h["step_seconds"], (s3, h)
EOF
check "the hpZ config loads for 8 ranks" "$LOADER" --load-config "$TMP/hpz.json" 8
check "... and is refused for 6 (4 does not divide 6)" bash -c '! "$0" --load-config "$1" 6 2>"$2" && grep -q "zero_hpz_partition_size: 4 does not divide the world size 6" "$2"' \
    "$LOADER" "$TMP/hpz.json" "$TMP/hpz.err"

# --- LoRA (docs/PLANNING.md §6): the llama_gqa4 directory on 2 CPU ranks, LoRA r=4 on every linear
# layer, RAM sized from estimate's rows so that no rung fits with the fp32 base and some do with
# the base's linear weights in NF4: the plan says so, writes zero_extensions.lora and quantize_base,
# and the run it prints keeps the model states of estimate's --quantize-base nf4 row, to the byte
D=${ZERO_SOURCE_DIR:-$(dirname "$0")/../..}/tests/data/decoder/llama_gqa4
LORA=(--lora r=4,targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)
"$ZERO" estimate "$D" --ranks 2 --seq 8 "${LORA[@]}" --json >"$TMP/lf.json"
"$ZERO" estimate "$D" --ranks 2 --seq 8 "${LORA[@]}" --quantize-base nf4 --json >"$TMP/lq.json"
LH=$("$PY" - "$TMP/lf.json" "$TMP/lq.json" <<'EOF'
import json, sys
def least(path):  # the smallest need of a CPU-only rung (stages 0-3, no offload) at micro-batch 1
    d = json.load(open(path))
    return min(r["device_bytes"] + r["host_bytes"] + r["transient_bytes"] + d["activation_checkpointed_bytes"]
               for r in d["rows"] if r["offload"] == "none")
f, q = least(sys.argv[1]), least(sys.argv[2])
assert q < f, (q, f)
print(2 * ((f + q) // 2))  # 2 ranks: each gets half of the node's RAM
EOF
)
(cd "$TMP" && "$ZERO" plan "$D" --ranks 2 --seq 8 "${LORA[@]}" --host-mem "$LH" --headroom 0 --json -o "$TMP/lora.json" \
    >"$TMP/plora.json")
check "LoRA: nothing fits with the fp32 base, NF4 does: exit 0" test $? -eq 0
check "LoRA: the plan says so and writes lora + quantize_base" "$PY" - "$TMP/plora.json" "$TMP/lora.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert p["fits"] and p["quantize_base"] == "nf4" and p["quantize_base_chosen"] is True, p
assert p["lora"]["r"] == 4 and p["lora"]["trainable_params"] == 3584, p["lora"]
assert any(r.startswith("no rung fits with the base in fp32") for r in p["reasons"]), p["reasons"]
x = c["zero_extensions"]
assert x["quantize_base"] == "nf4" and x["lora"]["r"] == 4 and x["lora"]["alpha"] == 8, x
assert x["lora"]["targets"] == "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", x
assert c["zero_optimization"]["stage"] == p["stage"], c
EOF
lora_plan_trains() {
    local run
    run=$(cd "$TMP" && "$ZERO" plan "$D" --ranks 2 --seq 8 "${LORA[@]}" --host-mem "$LH" --headroom 0 -o "$TMP/lora.json" |
        sed -n 's/^config: .*; run: zero train //p')
    [ -n "$run" ] || { echo "  no run line"; return 1; }
    # shellcheck disable=SC2086 # the printed line's words
    (cd "$TMP" && "$ZERO" train $run --data "$D/../tokens.bin" --steps 2 --val-every 0 --val-batches 1 \
        --log-json "$TMP/lora.log" >"$TMP/lora.out" 2>&1) || { tail -3 "$TMP/lora.out"; return 1; }
    "$PY" - "$TMP/lora.log" "$TMP/lq.json" "$TMP/plora.json" <<'EOF'
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
est = json.load(open(sys.argv[2])); p = json.load(open(sys.argv[3]))
row = [r for r in est["rows"] if r["stage"] == p["stage"] and r["offload"] == "none"][0]
assert done.get("done") and done["stage"] == p["stage"] and done["ranks"] == 2, done
for cat in ("params", "grads", "master", "optim"):
    assert done["mem"][cat] == row[cat + "_bytes"], (cat, done["mem"], row)
EOF
}
check "LoRA: the printed run trains with estimate's NF4 model states, to the byte" lora_plan_trains
# with room for the fp32 base it stays fp32, and no fallback line
"$ZERO" plan "$D" --ranks 2 --seq 8 "${LORA[@]}" --host-mem 1GiB --json >"$TMP/plora2.json"
check "LoRA with room: the base stays fp32" "$PY" -c "
import json; p = json.load(open('$TMP/plora2.json'))
assert p['fits'] and p['quantize_base'] == 'none' and not p['quantize_base_chosen'], p
assert not any(r.startswith('no rung fits') for r in p['reasons']), p['reasons']"
# 4 GPU ranks on 2 nodes with NVMe: the engine's refusal (hpZ with frozen parameters) is named, not proposed;
# the parameters on NVMe are (the frozen base with them)
"$ZERO" plan --model llama-3.2-1b --gpus 4 --nodes 2 --gpu-memory 24GiB --host-mem 64GiB --nvme 1TB --precision bf16 \
    --lora r=16 --seq 512 --json >"$TMP/plora3.json"
check "LoRA on 2 nodes: hpZ skipped with its reason, NVMe parameters considered" "$PY" -c "
import json; p = json.load(open('$TMP/plora3.json'))
sk = p['skipped']
assert len(sk) == 1 and sk[0]['hpz_partition_size'] == 2 and 'hpZ' in sk[0]['why'], sk
assert all(r['hpz_partition_size'] == 1 for r in p['rungs']), p['rungs']
assert any(r['offload_param'] == 'nvme' for r in p['rungs']), p['rungs']
assert sum('not considered' in r for r in p['reasons']) == 1, p['reasons']"

usage_error() { # usage_error EXPECTED_TEXT ARGS...
    local want=$1; shift
    "$ZERO" plan "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "^zero: error: .*$want" "$TMP/err" ||
        { echo "  rc=$rc stderr: $(cat "$TMP/err")"; return 1; }
}
check "no host memory" usage_error "--host-mem" --model gpt2 --ranks 2 --device-mem 24GiB
check "bad size" usage_error "24XB" --model gpt2 --ranks 2 --device-mem 24XB --host-mem 1GiB
check "bad headroom" usage_error "--headroom" --model gpt2 --ranks 2 --host-mem 1GiB --headroom 2
check "unknown option" usage_error "--gpus" --model gpt2 --ranks 2 --host-mem 1GiB --gpus 8
check "--quantize-base needs --lora" usage_error "expected --lora too" --model llama-3.2-1b --ranks 2 --host-mem 1GiB --quantize-base nf4
check "cpu-only without RAM" usage_error "needs its RAM" --model gpt2 --ranks 2 --host-mem 0

exit $fail
