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
import json, sys
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
est = json.load(open(sys.argv[1].replace("p1", "est")))
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
# sizes, stages 0-3, fp32/bf16): model states equal to the byte, buffers under the bound
MPIEXEC=$(command -v mpiexec || true)
for np in 2 3 4; do
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
check "--lora is refused until plan models it" usage_error "--lora is not supported yet" --model gpt2 --ranks 2 --host-mem 1GiB --lora r=4
check "cpu-only without RAM" usage_error "needs its RAM" --model gpt2 --ranks 2 --host-mem 0

exit $fail
