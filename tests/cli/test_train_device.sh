#!/usr/bin/env bash
# `zero train --device / --device-memory` (and ZERO_DEVICE, ZERO_DEVICE_MEMORY): bad input is one
# line and exit 2 with nothing trained; a capacity smaller than the plan's per-rank device bytes is
# refused before anything runs, naming the bytes (checked against the planner's figures here), the
# largest unit and a zero plan command; `--device fake` trains, its losses bitwise the cpu
# backend's.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset ZERO_DEVICE ZERO_DEVICE_MEMORY ZERO_RATES
export XDG_CACHE_HOME="$TMP/cache"
fail=0
BUILT=$("$ZERO" --version --verbose | sed -n 's/.*device backends: *\([^ ]*\).*/\1/p')
[ -n "$BUILT" ] || { echo "FAIL zero --version --verbose names no device backends"; exit 1; }

# expect NAME RC TEXT [ENV=V...] -- ARGS...: exit RC, one line on stderr holding TEXT, nothing
# trained (no checkpoint, no log record)
expect() {
    local name=$1 want_rc=$2 text=$3; shift 3
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rm -rf "$TMP/run" && mkdir "$TMP/run"
    (cd "$TMP/run" && env "${envs[@]}" "$ZERO" train --model tiny --steps 2 --seq 16 --micro-batch 1 \
        --log-json "$TMP/run/log.json" --save "$TMP/run/ckpt" "$@" >"$TMP/out" 2>"$TMP/err")
    local rc=$?
    local lines; lines=$(wc -l <"$TMP/err")
    if [ $rc -eq "$want_rc" ] && [ "$lines" -eq 1 ] && grep -qF -- "$text" "$TMP/err" &&
        ! ls "$TMP/run/ckpt"/step_* >/dev/null 2>&1 && ! grep -q '"step"' "$TMP/run/log.json" 2>/dev/null; then
        echo "ok   $name"
    else
        echo "FAIL $name (rc $rc, $lines lines): $(cat "$TMP/err")"; fail=1
    fi
}
expect "--device unknown" 2 "--device 'tpu': expected one of the built device backends: $BUILT" -- --device tpu
expect "ZERO_DEVICE unknown" 2 "ZERO_DEVICE 'tpu': expected one of the built device backends: $BUILT" ZERO_DEVICE=tpu --
case ",$BUILT," in
*,cuda,*) echo "skip --device cuda on a build without it (this build has it)" ;;
*) expect "--device cuda without the backend" 2 "--device cuda: this build has no cuda backend (built: $BUILT)" -- --device cuda ;;
esac
expect "--device-memory malformed" 2 "--device-memory '24Gx': expected a size" -- --device fake --device-memory 24Gx
expect "--device-memory 0" 2 "--device-memory '0': expected a size of at least 1 byte" -- --device-memory 0
expect "ZERO_DEVICE_MEMORY malformed" 2 "ZERO_DEVICE_MEMORY 'lots': expected a size" ZERO_DEVICE_MEMORY=lots -- --device fake
expect "--device-memory overrides ZERO_DEVICE_MEMORY" 2 "--device-memory '12Qb'" ZERO_DEVICE_MEMORY=24GiB -- --device-memory 12Qb
expect "--device overrides ZERO_DEVICE" 2 "--device 'tpu'" ZERO_DEVICE=cpu -- --device tpu

# --- a capacity too small: the need in the line is the planner's, computed here from the model
# (tiny: GPT-2 of C = 64, whose largest unit is a block: 12 C^2 + 13 C parameters) and the figures
# zero estimate gives
"$ZERO" estimate --model tiny --ranks 1 --seq 16 --json >"$TMP/est.json"
expect "--device-memory 1MiB: too small" 2 "--device-memory 1MiB: stage 0 needs" -- --device fake --device-memory 1MiB
cp "$TMP/err" "$TMP/small.err"
check_small() {
    "$PY" - "$TMP/small.err" "$TMP/est.json" <<'EOF'
import json, re, sys
line = open(sys.argv[1]).read()
d = json.load(open(sys.argv[2]))
row = [r for r in d["rows"] if r["stage"] == 0][0]
# bytes as zero prints them: binary units, two decimals
def fmt(b):
    u = 0
    while b >= 1024 and u < 5: b /= 1024; u += 1
    return "%.0f B" % b if u == 0 else "%.2f %s" % (b, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"][u])
states = row["device_bytes"]                     # fp32 AdamW, stage 0 on one rank: 16 bytes a parameter
assert states == 16 * d["padded_params"], (states, d["padded_params"])
act = d["activation_bytes"]                      # --micro-batch 1 --seq 16, as the run
need = states + row["transient_bytes"] + act
assert "stage 0 needs %s of device memory per rank" % fmt(need) in line, (line, fmt(need))
assert "model states %s" % fmt(states) in line and "activations %s at micro-batch 1" % fmt(act) in line, line
assert "more than 1.00 MiB" in line, line
m = re.search(r"largest unit (\S+): (\d+) parameters", line)
C = 64
assert m and m.group(1) == "h.0" and int(m.group(2)) == 12 * C * C + 13 * C, line   # a block: the largest unit
assert "`zero plan --model tiny --gpus 1 --gpu-memory 1MiB" in line and "--seq 16`" in line, line
EOF
}
if check_small; then echo "ok   the too-small line: the planner's bytes, the largest unit, zero plan"; else echo "FAIL the too-small line"; fail=1; fi
expect "ZERO_DEVICE_MEMORY too small" 2 "ZERO_DEVICE_MEMORY 1MiB: stage 0 needs" ZERO_DEVICE=fake ZERO_DEVICE_MEMORY=1MiB --
expect "too small on 2 ranks at stage 2" 2 "--device-memory 1MiB: stage 2 needs" -- --device fake --device-memory 1MiB --ranks 2 --stage 2

# --- the fake device trains, the losses bitwise the cpu backend's (the same kernels on the same numbers)
train_on() { # NAME ENV... -- ARGS: trains 3 steps at stage 2 on 2 ranks, the log in $TMP/NAME.json
    local name=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    (cd "$TMP" && env "${envs[@]}" "$ZERO" train --model tiny --steps 3 --seq 16 --micro-batch 1 --ranks 2 --stage 2 \
        --precision bf16 --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>&1)
}
losses() { grep '"step"' "$1" | sed -n 's/.*"loss":\([^,]*\).*/\1/p'; }
train_on cpu0 -- --device cpu
train_on fake0 -- --device fake --device-memory 1GiB
train_on fake1 ZERO_DEVICE=fake --
# the device's bytes against the planner's: the states to within a 256-byte block per array (the
# device's granule: 5 arrays a unit), and the whole peak within the plan's device need (which
# also counts what this build keeps on the host: the model's activations and fp32 views)
"$ZERO" estimate --model tiny --gpus 2 --gpu-memory 1GiB --precision bf16 --seq 16 --micro-batch 1 --json \
    >"$TMP/est.json" 2>"$TMP/est.err"
if $PY - "$TMP/est.json" "$TMP/fake0.json" <<'PYEOF'
import json, sys
est = json.load(open(sys.argv[1]))
row = [r for r in est["rows"] if r["stage"] == 2 and r["offload"] == "none"][0]
plan = row["params_bytes"] + row["grads_bytes"] + row["master_bytes"] + row["optim_bytes"]
assert plan == row["device_bytes"], row
dev = [json.loads(l)["device_mem"] for l in open(sys.argv[2]) if '"device_mem"' in l][-1]
slack = 256 * 5 * est["units"]
assert 0 <= dev["states"] - plan < slack, (dev, plan, slack)
assert dev["peak"] <= row["need_device"], (dev, row["need_device"])
assert dev["pinned_states"] == 0, dev
print(f"device states {dev['states']} B, plan {plan} B (+{dev['states'] - plan} B of block rounding, bound {slack}); "
      f"device peak {dev['peak']} B <= plan's need {row['need_device']} B")
PYEOF
then echo "ok   the fake device's bytes against zero estimate --gpus 2"; else echo "FAIL device bytes vs the planner"; fail=1; fi
for n in fake0 fake1; do
    if grep -q '"done":true' "$TMP/$n.json" && [ -n "$(losses "$TMP/cpu0.json")" ] &&
        [ "$(losses "$TMP/cpu0.json")" = "$(losses "$TMP/$n.json")" ]; then
        echo "ok   $n: trains on the fake device, losses bitwise the cpu backend's ($(losses "$TMP/$n.json" | tr '\n' ' '))"
    else
        echo "FAIL $n: $(tail -2 "$TMP/$n.out") cpu: $(losses "$TMP/cpu0.json" | tr '\n' ' ') $n: $(losses "$TMP/$n.json" | tr '\n' ' ')"
        fail=1
    fi
done
# --device cpu with room trains as without it
(cd "$TMP" && "$ZERO" train --model tiny --steps 2 --seq 16 --micro-batch 1 --device cpu --device-memory 64MiB \
    --log-json "$TMP/cpu.json" >"$TMP/cpu.out" 2>&1)
if [ $? -eq 0 ] && grep -q '"done":true' "$TMP/cpu.json"; then echo "ok   --device cpu --device-memory 64MiB trains"
else echo "FAIL --device cpu trains: $(tail -2 "$TMP/cpu.out")"; fail=1; fi
"$ZERO" train --help >"$TMP/help"
if grep -q -- "--device cpu|fake|cuda" "$TMP/help" && grep -q -- "--device-memory SIZE" "$TMP/help"; then echo "ok   --help"
else echo "FAIL --help lists --device and --device-memory"; fail=1; fi
# --- zero bench step passes --device and --device-memory to zero train, after checking them
"$ZERO" bench step --model tiny --device tpu >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -qF -- "--device 'tpu': expected one of the built" "$TMP/err"
then echo "ok   bench step --device tpu"; else echo "FAIL bench step --device tpu (rc $rc): $(cat "$TMP/err")"; fail=1; fi
(cd "$TMP" && "$ZERO" bench step --model tiny --seq 16 --micro-batch 1 --ranks-list 1 --stages 0 --steps 2 --no-torch \
    --gemm-seconds 0 --device fake --device-memory 8GiB >"$TMP/out" 2>"$TMP/err")
rc=$?
if [ $rc -eq 0 ]; then echo "ok   bench step --device fake runs zero train on the fake device"
else echo "FAIL bench step --device fake (rc $rc): $(cat "$TMP/err")"; fail=1; fi
exit $fail
