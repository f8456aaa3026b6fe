#!/usr/bin/env bash
# `zero train` explains itself: the progress line (period from --print-every / steps_per_print,
# elapsed, ETA, lr and grad norm equal to the --log-json record's), the resolved config and the
# no-op keys printed once on 2 ranks, paths and inputs checked before any work (exit 2, nothing
# created), an impossible micro-batch refused with its figure, a resume on 1 and 3 ranks keeping
# the checkpoint's global batch (losses within 1e-4 of the straight run), and a static fp16 loss
# scale that skips every step (a failure) or most steps (a warning).
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
run() { # run NAME [args...]: --model tiny --seq 32; a failure ends the test
    local name=$1; shift
    timeout 120 "$ZERO" train --model tiny --seq 32 --lr 3e-3 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || {
        echo "FAIL run $name: zero train $*"; cat "$TMP/$name.err"; exit 1; }
}
# refused NAME PATTERN [args...]: exit 2, one line "zero: error: ...PATTERN", nothing on stdout, fast
refused() {
    local name=$1 pat=$2; shift 2
    local t0 code; t0=$(date +%s)
    timeout 60 "$ZERO" train --model tiny --seq 32 "$@" >"$TMP/r.out" 2>"$TMP/r.err"; code=$?
    local lines; lines=$(grep -c . "$TMP/r.err")
    if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q "^zero: error: .*$pat" "$TMP/r.err" || [ -s "$TMP/r.out" ] ||
        [ $(($(date +%s) - t0)) -gt 10 ]; then
        echo "FAIL $name: exit $code, stderr:"; cat "$TMP/r.err"; fail=1
    else
        echo "ok   $name: $(cat "$TMP/r.err")"
    fi
}
steps_of() { grep -o '^step [0-9]*/' "$TMP/$1.out" | tr -dc '0-9\n' | tr '\n' ' '; }

# --- 1. the progress line: plain lines (not a terminal), period, fields
run p3 --steps 7 --val-every 0 --print-every 3 --log-json "$TMP/p3.json"
check "--print-every 3 over 7 steps: lines at 3, 6 and the last" test "$(steps_of p3)" = "3 6 7 "
check "the line has lr, grad norm, elapsed and ETA" grep -q '^step 3/7 | loss [0-9.]* | lr [0-9.e-]* | grad norm [0-9.e+-]* |.* | elapsed [0-9]*:[0-9][0-9] | ETA [0-9]*:[0-9][0-9]$' "$TMP/p3.out"
check "plain lines: no bar, no carriage return" bash -c "! grep -q \$'\r\|\\[#' '$TMP/p3.out'"
check "lr and grad norm on the line are the log's" "$PY" - "$TMP/p3.out" "$TMP/p3.json" <<'EOF'
import json, re, sys
recs = {d["step"]: d for d in (json.loads(l) for l in open(sys.argv[2])) if "step" in d}
n = 0
for l in open(sys.argv[1]):
    m = re.match(r"step (\d+)/\d+ \| loss \S+ .*\| lr (\S+) \| grad norm (\S+) \|", l)
    if not m: continue
    d = recs[int(m.group(1))]; n += 1
    assert abs(float(m.group(2)) - d["lr"]) <= 1e-3 * d["lr"], (l, d["lr"])
    assert abs(float(m.group(3)) - d["grad_norm"]) <= 1e-3 * d["grad_norm"], (l, d["grad_norm"])
assert n == 3, n
EOF
echo '{"steps_per_print": 2}' >"$TMP/spp.json"
run spp --steps 5 --val-every 0 --config "$TMP/spp.json"
check "steps_per_print 2 over 5 steps: 2, 4 and the last" test "$(steps_of spp)" = "2 4 5 "
run spp1 --steps 3 --val-every 0 --config "$TMP/spp.json" --print-every 1
check "--print-every overrides steps_per_print" test "$(steps_of spp1)" = "1 2 3 "
run val --steps 6 --val-every 2 --print-every 5
check "a step with a validation loss always prints (2, 4, 5, 6)" test "$(steps_of val)" = "2 4 5 6 "
if command -v script >/dev/null; then
    script -q -c "'$ZERO' train --model tiny --seq 32 --steps 4 --val-every 0 --print-every 2" /dev/null >"$TMP/tty.out" 2>&1
    check "on a terminal: a bar redrawn under the lines, cleared at the end" "$PY" - "$TMP/tty.out" <<'EOF'
import sys
t = open(sys.argv[1], encoding="utf-8", errors="replace", newline="").read()
assert "[##" in t and "1/4  25%" in t and "3/4  75%" in t, t
assert "\r\x1b[Kstep 2/4 |" in t and "\r\x1b[Kstep 4/4 |" in t, t
assert "4/4 100%" not in t, t
EOF
else
    echo "SKIP the terminal bar (no script(1))"
fi
# --ranks 2: rank 0's stdout is mpiexec's pseudo-terminal whatever the user's is; the launcher
# tells the ranks what the user's stdout is, so a log gets plain lines and a terminal the bar
run r2 --ranks 2 --steps 3 --val-every 0
check "--ranks 2 into a file: the 3 step lines, no carriage return, no escape byte" "$PY" - "$TMP/r2.out" "$TMP/r2.err" <<'EOF'
import re, sys
out, err = (open(p, "rb").read() for p in sys.argv[1:])
assert b"\r" not in out + err and b"\x1b" not in out + err, out
assert len(re.findall(rb"^step [123]/3 \|", out, re.M)) == 3, out
EOF
if command -v script >/dev/null; then
    script -q -c "'$ZERO' train --model tiny --seq 32 --steps 3 --val-every 0 --ranks 2" /dev/null >"$TMP/tty2.out" 2>&1
    check "--ranks 2 on a terminal: the bar" grep -q '\[##.*1/3  33%' "$TMP/tty2.out"
fi

# --- 2. the resolved config once, and the keys that change nothing in one warning, once per job
cat >"$TMP/hf.json" <<'EOF'
{"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": "auto",
 "optimizer": {"type": "AdamW", "params": {"lr": "auto", "torch_adam": true}},
 "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 5, "total_num_steps": 2}},
 "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": false},
                       "stage3_max_live_parameters": 1e9},
 "fp16": {"loss_scale_window": 500}, "dump_state": true}
EOF
run cfg --ranks 2 --steps 2 --val-every 0 --lr 0.002 --config "$TMP/hf.json"
check "one config line: stage 2, fp32, global batch 2 = 2 ranks x micro-batch 1" \
    test "$(grep -c '^config: stage 2, fp32, global batch 2 = 2 ranks x micro-batch 1 x accumulation 1' "$TMP/cfg.out")" = 1
check "what each \"auto\" became, once" test "$(grep -c '^config "auto": train_micro_batch_size_per_gpu 1, optimizer.params.lr 0.002 (--lr), gradient_clipping 0 (off)$' "$TMP/cfg.out")" = 1
check "one warning names the 5 no-op keys with their reasons" "$PY" - "$TMP/cfg.err" <<'EOF'
import sys
w = [l for l in open(sys.argv[1]) if "change nothing" in l]
assert len(w) == 1, w
w = w[0]
for part in ["5 keys accepted that change nothing", "optimizer.params.torch_adam, dump_state (no effect in zero)",
             'zero_optimization.offload_optimizer.device "cpu" (no-op on a CPU rank',
             "fp16.loss_scale_window (fp16 is off)", "zero_optimization.stage3_max_live_parameters (stage 3 only)"]:
    assert part in w, (part, w)
assert "pin_memory" not in w, w  # false asks for nothing
EOF
check "the library's warning (total_num_steps < warmup) once, not once per rank" \
    test "$(grep -c 'total_num_steps 2 is less than warmup_num_steps 5' "$TMP/cfg.err")" = 1
check "no other warning line" test "$(grep -c 'warning' "$TMP/cfg.err")" = 2
run plain --steps 1 --val-every 0
check "defaults that differ from DeepSpeed's are named" grep -q "^defaults that differ from DeepSpeed's: micro-batch 4 (DeepSpeed: 1), steps_per_print 1 (DeepSpeed: 10)$" "$TMP/plain.out"
check "no config, no warning" test ! -s "$TMP/plain.err"

# --- 3./4. paths and inputs before any work: exit 2, one line, nothing created
printf 'x' >"$TMP/afile"
refused "--config missing" "--config '$TMP/none.json': No such file" --config "$TMP/none.json"
refused "--resume missing" "--resume '$TMP/none': No such file" --resume "$TMP/none"
refused "--data missing" "--data '$TMP/none.txt': No such file" --data "$TMP/none.txt"
refused "--init-from missing" "--init-from '$TMP/none': No such file" --init-from "$TMP/none"
refused "--save under a missing directory" "--save '$TMP/no/ck': the directory $TMP/no does not exist" --save "$TMP/no/ck"
refused "--save names a file" "--save '$TMP/afile': exists and is not a directory" --save "$TMP/afile"
refused "--log-json under a missing directory" "--log-json '$TMP/no/l.json': the directory" --log-json "$TMP/no/l.json"
refused "--log-json names a directory" "--log-json '$TMP': is a directory" --log-json "$TMP"
refused "--trace under a missing directory" "--trace '$TMP/no/t.json': the directory" --trace "$TMP/no/t.json"
refused "--offload-optimizer nvme: a missing directory" "nvme:'$TMP/swap': no such directory (offload directories are not created" \
    --stage 2 --offload-optimizer "nvme:$TMP/swap"
echo "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$TMP/swap2\"}}}" >"$TMP/nv.json"
refused "offload_param.nvme_path in the config: a missing directory" "zero_optimization.offload_param.nvme_path '$TMP/swap2': no such directory" \
    --config "$TMP/nv.json"
refused "--ranks 2: the same check, once" "--save '$TMP/no/ck'" --ranks 2 --save "$TMP/no/ck"
# a DeepSpeed config with five keys zero cannot take: all five in the one line, in the file's order
# (longer than the library's 512-byte message: the CLI prints the whole list)
cat >"$TMP/five.json" <<'EOF'
{"csv_monitor": {"enabled": true}, "wandb": {"enabled": true},
 "zero_optimization": {"stage": 2, "reduce_bucket_sz": 5e8, "zero_quantized_nontrainable_weights": true},
 "communication_data_type": "fp16"}
EOF
refused "five keys zero cannot take: one error that lists them all" \
    "five.json: 5 problems: (1) csv_monitor.enabled: true is not supported yet .*; (2) wandb.enabled: true .*; (3) unknown key \"zero_optimization.reduce_bucket_sz\": did you mean \"zero_optimization.reduce_bucket_size\"?; (4) zero_optimization.zero_quantized_nontrainable_weights: true .*; (5) communication_data_type: a value other than null is not supported yet .* reduces gradients in fp32$" \
    --config "$TMP/five.json"
check "nothing was created" test ! -e "$TMP/no" -a ! -e "$TMP/swap" -a ! -e "$TMP/swap2"
refused "an impossible micro-batch: the figure and the hints" \
    "--micro-batch 100000 --seq 4096: a rank would need [0-9.]* TiB (activations .*more than this machine's .* of RAM: try --activation-checkpointing (a rank would need .*zero plan --model tiny --ranks 1 --host-mem" \
    --micro-batch 100000 --seq 4096
refused "... with checkpointing already on: no checkpointing hint" "RAM: try a smaller --micro-batch" \
    --micro-batch 1000000 --seq 4096 --activation-checkpointing

# --- 5. a resume on another world size keeps the checkpoint's global batch (6)
run ref --ranks 2 --micro-batch 3 --steps 4 --val-every 0 --log-json "$TMP/ref.json"
run half --ranks 2 --micro-batch 3 --steps 2 --val-every 0 --save "$TMP/half"
run on1 --steps 4 --val-every 0 --resume "$TMP/half" --log-json "$TMP/on1.json"
check "2 -> 1 rank: says it kept the global batch 6 (micro-batch 3 x accumulation 2)" \
    grep -q "^resume: kept the checkpoint's global batch 6 on 1 rank: micro-batch 3 x accumulation 2$" "$TMP/on1.out"
run on3 --ranks 3 --steps 4 --val-every 0 --resume "$TMP/half" --log-json "$TMP/on3.json"
check "2 -> 3 ranks: micro-batch 2 x accumulation 1" \
    grep -q "^resume: kept the checkpoint's global batch 6 on 3 ranks: micro-batch 2 x accumulation 1$" "$TMP/on3.out"
check "the resumed steps 3-4 are the straight run's within 1e-4 (1 and 3 ranks)" "$PY" - "$TMP/ref.json" "$TMP/on1.json" "$TMP/on3.json" <<'EOF'
import json, sys
def losses(p): return {d["step"]: d["loss"] for d in (json.loads(l) for l in open(p)) if "step" in d}
ref = losses(sys.argv[1])
for p in sys.argv[2:]:
    got = losses(p)
    assert sorted(got) == [3, 4], got
    for s, v in got.items(): assert abs(v - ref[s]) <= 1e-4 * abs(ref[s]), (p, s, v, ref[s])
EOF
run flag --steps 3 --val-every 0 --micro-batch 4 --resume "$TMP/half"
check "an explicit --micro-batch that changes it: the data order changes, said" \
    grep -q "^resume: the global batch is 4 (1 rank x micro-batch 4 x accumulation 1), the checkpoint's 6: the data order changes from here$" "$TMP/flag.out"
run odd --micro-batch 3 --steps 1 --val-every 0 --save "$TMP/odd"
run odd2 --ranks 2 --steps 2 --val-every 0 --resume "$TMP/odd"
check "3 does not divide among 2 ranks: says so and names the new global batch" \
    grep -q "^resume: the checkpoint's global batch 3 does not divide among 2 ranks: the global batch is now 8 (micro-batch 4 x accumulation 1) and the data order changes from here$" "$TMP/odd2.out"

# --- 6. a static fp16 loss scale that overflows at every step trains nothing: the run fails (exit
# 1, one line, no checkpoint of the untouched model); one that skips most steps but not all ends
# with a warning that says how many (120000 fits the first step's gradients, then lr 0.1 grows
# them past it: measured 5 of 6 skipped; 110000 skips 2, 155000 every one)
echo '{"fp16": {"enabled": true, "loss_scale": 1e30}}' >"$TMP/big.json"
code=0
timeout 120 "$ZERO" train --model tiny --seq 32 --steps 3 --val-every 0 --config "$TMP/big.json" --save "$TMP/bigck" \
    --log-json "$TMP/big.json.log" >"$TMP/big.out" 2>"$TMP/big.err" || code=$?
check "every step overflowed at 1e30 (the log), exit 1 (got $code)" \
    test "$(grep -c '"skipped":true' "$TMP/big.json.log")" = 3 -a "$code" = 1
check "one line says so" test "$(cat "$TMP/big.err")" = "zero: error: every one of the 3 steps of this run overflowed at \
the static fp16 loss scale 1e+30: nothing was trained; lower fp16.loss_scale, or set it to 0 for a dynamic scale"
check "no checkpoint of the untrained model, no end record" test ! -e "$TMP/bigck/latest" -a -z "$(ls -d "$TMP"/bigck/step_* 2>/dev/null)" -a "$(grep -c '"done"' "$TMP/big.json.log")" = 0
echo '{"fp16": {"enabled": true, "loss_scale": 120000}}' >"$TMP/most.json"
code=0
timeout 120 "$ZERO" train --model tiny --lr 0.1 --steps 6 --val-every 0 --config "$TMP/most.json" \
    --log-json "$TMP/most.json.log" >"$TMP/most.out" 2>"$TMP/most.err" || code=$?
check "120000: the first step trains, the 5 after it overflow, exit 0 (got $code)" \
    test "$(grep -o '"skipped":[a-z]*' "$TMP/most.json.log" | tr -d '\n')" = \
    '"skipped":false"skipped":true"skipped":true"skipped":true"skipped":true"skipped":true' -a "$code" = 0
check "the warning says 5 of 6, at the end" bash -c "tail -1 '$TMP/most.err' | grep -q '^zero: warning: the static fp16 loss scale 120000 skipped 5 of 6 steps'"
echo '{"fp16": {"enabled": true, "loss_scale": 1024}}' >"$TMP/ok.json"
run okscale --steps 3 --val-every 0 --config "$TMP/ok.json" --log-json "$TMP/ok.json.log"
check "a static scale that does not overflow: no skip, no warning" \
    test "$(grep -c '"skipped":true' "$TMP/ok.json.log")" = 0 -a ! -s "$TMP/okscale.err"

exit $fail
