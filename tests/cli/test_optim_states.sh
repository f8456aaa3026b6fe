#!/usr/bin/env bash
# `zero train --optimizer-states int8` (docs/QUANT.md): the tiny model on 2 ranks at stage 2 trains
# (a finite loss below the initial one), the optimizer's bytes in the final record are the 8-bit
# formula's against fp32's (under a third), the checkpoint resumes on 1 rank with the setting
# restored from it, an explicit fp32 resume of it is refused, the states on NVMe and on the fake
# device give the same losses, and bad values are one line each: the flag, the config key, the pairings not supported
# yet; `zero estimate --optimizer-states`.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
first_loss() {
    "$PY" -c "import json, sys
print([json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l and '\"done\"' not in l][0]['loss'])" "$1"
}
T=(--model tiny --seq 32 --steps 20 --val-every 0 --val-batches 1 --ranks 2 --stage 2)

"$ZERO" train "${T[@]}" --optimizer-states int8 --save q8 --log-json q8.json >q8.out 2>q8.err
check "int8: exit 0" test $? -eq 0
"$ZERO" train "${T[@]}" --log-json f32.json >f32.out 2>f32.err
check "fp32: exit 0" test $? -eq 0
l0=$(first_loss q8.json) l8=$(done_field q8.json loss) l32=$(done_field f32.json loss)
check "int8: trained (loss $l0 -> $l8), near fp32's ($l32)" "$PY" -c "
import math; a, b, c = $l0, $l8, $l32
assert math.isfinite(b) and b < a - 0.2 and abs(b - c) < 0.05 * c, (a, b, c)"
o8=$(done_field q8.json mem optim) o32=$(done_field f32.json mem optim)
check "int8: optimizer $o8 bytes a rank, under a third of fp32's $o32" test $((o8 * 3)) -lt "$o32"

# the states on NVMe: the same run's losses, nothing of the states in RAM
mkdir -p "$TMP/nv"
"$ZERO" train "${T[@]}" --optimizer-states int8 --offload-optimizer "nvme:$TMP/nv" --log-json nv.json >nv.out 2>nv.err
check "int8 on NVMe: exit 0" test $? -eq 0
ln=$(done_field nv.json loss) on=$(done_field nv.json mem optim)
check "int8 on NVMe: the loss in RAM's ($ln, $l8)" test "$ln" = "$l8"
check "int8 on NVMe: no optimizer bytes in RAM ($on)" test "$on" -eq 0
check "int8 on NVMe: no swap file left" test -z "$(ls "$TMP/nv")"

# on the fake device (the states all on it, and ZeRO-Offload's in pinned memory): the same losses
for off in "" "--offload-optimizer cpu"; do
    # shellcheck disable=SC2086
    ZERO_DEVICE_LAZY=1 "$ZERO" train "${T[@]}" --optimizer-states int8 --device fake $off --log-json fk.json >fk.out 2>fk.err
    check "int8 on the fake device $off: exit 0" test $? -eq 0
    lf=$(done_field fk.json loss)
    check "int8 on the fake device $off: the loss on the host's ($lf, $l8)" test "$lf" = "$l8"
done

# a device too small: the refusal counts the 8-bit states and its `zero plan` line keeps them
ZERO_DEVICE_LAZY=1 "$ZERO" train --model tiny --steps 1 --optimizer-states int8 --device fake --device-memory 600KiB \
    >/dev/null 2>err
rc=$?
expect_error "int8 on a 600 KiB device" 2 "model states 1.16 MiB" "--optimizer-states int8\` shows"

# resume on 1 rank: the setting comes from the checkpoint
"$ZERO" train --model tiny --seq 32 --steps 25 --val-every 0 --val-batches 1 --resume q8 --log-json r.json >r.out 2>r.err
check "resume on 1 rank: exit 0" test $? -eq 0
ro=$(done_field r.json mem optim)
check "resume: 8-bit states restored ($ro bytes, under a third of 2 x $o32)" test $((ro * 3)) -lt $((o32 * 2))
"$ZERO" train --model tiny --seq 32 --steps 25 --val-every 0 --val-batches 1 --resume q8 --optimizer-states fp32 \
    >/dev/null 2>err
rc=$?
check "fp32 resume of 8-bit states: refused (exit $rc)" test "$rc" -ne 0
check "fp32 resume: names both" grep -q "is 8-bit in the checkpoint and fp32 in this run" err

# bad input
"$ZERO" train --model tiny --steps 1 --optimizer-states int4 >/dev/null 2>err
rc=$?
expect_error "--optimizer-states int4" 2 "--optimizer-states 'int4'" "expected fp32 or int8"
printf '{"zero_extensions": {"optimizer_states": "int4"}}\n' >bad.json
"$ZERO" train --model tiny --steps 1 --config bad.json >/dev/null 2>err
rc=$?
expect_error "config optimizer_states int4" 2 "zero_extensions.optimizer_states" "int4"
printf '{"optimizer": {"type": "SGD", "params": {"lr": 0.01}}, "zero_extensions": {"optimizer_states": "int8"}}\n' >sgd.json
"$ZERO" train --model tiny --steps 1 --config sgd.json >/dev/null 2>err
rc=$?
expect_error "int8 with SGD" 2 "needs optimizer AdamW or Adam"

# the planner
"$ZERO" estimate --model tiny --ranks 2 --optimizer-states int8 >est.out 2>&1
check "estimate: exit 0" test $? -eq 0
check "estimate: says 8-bit" grep -q "8-bit: a byte each" est.out
check "estimate: NVMe rows" test "$(grep -cE '^[0-9]+ +[a-z+]*nvme' est.out)" -gt 0
# zero plan: nothing fits with fp32 states on a 16 GiB CPU-only machine, 8-bit ones do
"$ZERO" plan --model llama-3.2-1b --ranks 1 --host-mem 16GiB --seq 256 --json -o plan.json >plan.out 2>plan.err
check "plan, 16 GiB: exit 0" test $? -eq 0
check "plan, 16 GiB: 8-bit states chosen" "$PY" -c "
import json; j = json.load(open('plan.out')); assert j['fits'] and j['optimizer_states'] == 'int8', j['optimizer_states']
assert any('no rung fits with fp32 optimizer states' in r for r in j['reasons'])"
check "plan, 16 GiB: the config says int8" "$PY" -c "
import json; assert json.load(open('plan.json'))['zero_extensions']['optimizer_states'] == 'int8'"
# on a GPU too: 14 GiB hold llama-3.2-1b's fp32 weights only with 8-bit states
"$ZERO" plan --model llama-3.2-1b --gpus 1 --gpu-memory 14GiB --host-mem 8GiB --seq 256 --json >gplan.out 2>gplan.err
check "plan, 1 GPU of 14 GiB: exit 0" test $? -eq 0
check "plan, 1 GPU of 14 GiB: 8-bit states chosen" "$PY" -c "
import json; j = json.load(open('gplan.out')); assert j['fits'] and j['optimizer_states'] == 'int8', j['optimizer_states']"
"$ZERO" plan --model llama-3.2-1b --ranks 1 --host-mem 64GiB --seq 256 --json >plan64.out 2>&1
check "plan, 64 GiB: fp32 states" "$PY" -c "
import json; j = json.load(open('plan64.out')); assert j['fits'] and j['optimizer_states'] == 'fp32', j"
exit $fail
