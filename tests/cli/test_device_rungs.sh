#!/usr/bin/env bash
# The planner against the engine on the fake device, every rung: for each row of `zero estimate
# --gpus N` (stages 0-3 x offload none / cpu / nvme, stage 3's with the parameters), on 1, 2 and 3
# ranks, `zero train --device fake` with that stage and offload holds, per rank (the largest):
# - device memory of the model states = the row's device bytes + the device's block rounding
#   (less than 256 bytes an array: 5 arrays a unit);
# - pinned host memory of the states = the row's pinned bytes less the NVMe swap pools (the
#   planner counts them pinned; the engine keeps them in pageable memory: docs/DEVICE.md, "What
#   remains") and the staging + the same rounding;
# - the pinned peak (states, upload buffers, the collectives' staging) within the row's pinned
#   bytes and its staging, an upper bound (include/zero/plan.h);
# - the device peak within the row's device need (which counts the activations and fp32 views
#   this build keeps on the host too).
# And the pick of `zero plan --gpus 2 --gpu-memory 2MiB`, where the all-on-device stages do not
# fit, trains within --device-memory 2MiB on the fake device, while stage 0 there is refused before
# anything runs.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset ZERO_DEVICE ZERO_DEVICE_MEMORY ZERO_RATES
export XDG_CACHE_HOME="$TMP/cache"
mkdir "$TMP/nvme"
fail=0
"$ZERO" --version --verbose | grep -q "device backends:.*fake" || { echo "SKIP: this build has no fake device"; exit 77; }

# offload_args OPTIM PARAM: the flags of a row's offloads (none, cpu, nvme) into the array args
offload_args() {
    args=()
    local flag v pair
    for pair in "--offload-optimizer:$1" "--offload-param:$2"; do
        flag=${pair%%:*} v=${pair#*:}
        case $v in cpu) args+=("$flag" cpu) ;; nvme) args+=("$flag" "nvme:$TMP/nvme") ;; esac
    done
}

for n in 1 2 3; do
    "$ZERO" estimate --model tiny --gpus $n --gpu-memory 1GiB --precision bf16 --seq 16 --micro-batch 1 --json \
        >"$TMP/est$n.json" || { echo "FAIL zero estimate --gpus $n"; fail=1; continue; }
    # one line per row: stage, offload, offload_param
    "$PY" -c 'import json,sys; [print(r["stage"], r["offload"], r["offload_param"]) for r in json.load(open(sys.argv[1]))["rows"]]' \
        "$TMP/est$n.json" >"$TMP/rows$n"
    while read -r s oo op; do
        offload_args "$oo" "$op"
        name="$n ranks, stage $s, offload $oo/$op"
        rm -f "$TMP/run.json"
        (cd "$TMP" && "$ZERO" train --model tiny --steps 2 --seq 16 --micro-batch 1 --ranks $n --stage "$s" --precision bf16 \
            --device fake "${args[@]}" --log-json "$TMP/run.json" </dev/null >"$TMP/run.out" 2>&1)
        rc=$?
        if [ $rc -ne 0 ]; then echo "FAIL $name: exit $rc: $(tail -2 "$TMP/run.out")"; fail=1; continue; fi
        if out=$("$PY" - "$TMP/est$n.json" "$TMP/run.json" "$s" "$oo" "$op" <<'EOF'
import json, sys
est = json.load(open(sys.argv[1]))
s, oo, op = int(sys.argv[3]), sys.argv[4], sys.argv[5]
row = [r for r in est["rows"] if (r["stage"], r["offload"], r["offload_param"]) == (s, oo, op)][0]
recs = [json.loads(l) for l in open(sys.argv[2]) if '"device_mem"' in l]
assert recs, "no device_mem record"
dev = recs[-1]["device_mem"]
slack = 256 * 5 * est["units"]
assert row["host_bytes"] == row["pinned_bytes"], row     # every host byte of a device rank is counted pinned
# what the engine pins: the offloaded states of the row (ZeRO-Offload's gradient shard with them)
pinned = (row["grad_staging_bytes"] if oo != "none" else 0) + (row["params_bytes"] if op == "cpu" else 0) + \
    (row["master_bytes"] + row["optim_bytes"] if oo == "cpu" else 0)
pools = row["pinned_bytes"] - pinned                       # the NVMe swap pools: none without NVMe
assert pools >= 0 and (pools > 0) == ("nvme" in (oo, op)), (pools, row)
want_dev, want_pin = row["device_bytes"], pinned
assert 0 <= dev["states"] - want_dev < slack, ("device states", dev["states"], want_dev, slack)
assert 0 <= dev["pinned_states"] - want_pin < slack, ("pinned states", dev["pinned_states"], want_pin, slack)
assert dev["peak"] <= row["need_device"], ("device peak", dev["peak"], row["need_device"])
# the pools' buffers rounded up to 4 KiB each and their start aligned (docs/PLANNING.md): (4 + 1) and (5 + 1) x 4 KiB
pool_round = (6 if oo == "nvme" else 0) * 4096 + (6 if op == "nvme" else 0) * 4096
assert dev["pinned_peak"] <= row["pinned_bytes"] + row["staging_bytes"] + slack + pool_round, ("pinned peak", dev["pinned_peak"], row)
print(f"device {dev['states']} B (plan {want_dev} B), pinned {dev['pinned_states']} B (plan {want_pin} B"
      + (f" + {pools} B of NVMe pools" if pools else "") + f"), device peak {dev['peak']} B <= need {row['need_device']} B"
      + f", pinned peak {dev['pinned_peak']} B <= {row['pinned_bytes']} B + staging {row['staging_bytes']} B")
EOF
        ); then echo "ok   $name: $out"; else echo "FAIL $name: $out"; fail=1; fi
    done <"$TMP/rows$n"
done

# --- the plan's pick for a 2 MiB card trains within 2 MiB; what it rejects is refused
"$ZERO" plan --model tiny --gpus 2 --gpu-memory 2MiB --host-mem 1GiB --precision bf16 --seq 16 --json >"$TMP/plan.json"
read -r s oo op mb ck < <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["fits"]
print(d["stage"], d["offload_optimizer"], d["offload_param"], d["micro_batch"], int(d["activation_checkpointing"]))' "$TMP/plan.json")
offload_args "$oo" "$op"
[ "$ck" = 1 ] && args+=(--activation-checkpointing)
(cd "$TMP" && "$ZERO" train --model tiny --steps 2 --seq 16 --micro-batch "$mb" --ranks 2 --stage "$s" --precision bf16 \
    --device fake --device-memory 2MiB "${args[@]}" --log-json "$TMP/pick.json" >"$TMP/pick.out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q '"done":true' "$TMP/pick.json" && "$PY" - "$TMP/pick.json" "$TMP/plan.json" <<'EOF'
import json, sys
dev = [json.loads(l)["device_mem"] for l in open(sys.argv[1]) if '"device_mem"' in l][-1]
plan = json.load(open(sys.argv[2]))
assert dev["peak"] <= 2 * 2**20 and dev["peak"] <= plan["need_device"], (dev, plan["need_device"])
print(f"     pick's device peak {dev['peak']} B <= the plan's need {plan['need_device']} B <= 2 MiB")
EOF
then echo "ok   zero plan's pick for 2 MiB (stage $s, offload $oo/$op, micro-batch $mb, checkpointing $ck) trains within --device-memory 2MiB"
else echo "FAIL the plan's pick (stage $s, $oo/$op, micro-batch $mb) on 2 MiB: exit $rc: $(tail -2 "$TMP/pick.out")"; fail=1; fi
(cd "$TMP" && "$ZERO" train --model tiny --steps 2 --seq 16 --micro-batch 1 --ranks 2 --stage 0 --precision bf16 \
    --device fake --device-memory 2MiB --log-json "$TMP/s0.json" >"$TMP/s0.out" 2>"$TMP/s0.err")
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--device-memory 2MiB: stage 0 needs" "$TMP/s0.err" && ! grep -q '"step"' "$TMP/s0.json" 2>/dev/null
then echo "ok   stage 0, which the plan rejects for 2 MiB, is refused before anything runs"
else echo "FAIL stage 0 on 2 MiB (rc $rc): $(cat "$TMP/s0.err")"; fail=1; fi
exit $fail
