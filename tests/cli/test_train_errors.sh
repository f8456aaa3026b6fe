#!/usr/bin/env bash
# Bad input to `zero train`: each gives one line "zero: error: ..." naming the value, the right
# exit status (2 usage, 1 runtime / not supported yet), and no crash or hang; a run that trains
# nothing (every step overflowed, a loss scale that cannot come down further, a diverged loss)
# fails with exit 1 instead of 0, and a healthy fp16 run does not.
set -uo pipefail
Z=${ZERO:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect() { # status pattern -- args...
  local want=$1 pat=$2; shift 3
  local out code
  out=$(timeout 60 "$Z" train "$@" 2>&1 >/dev/null); code=$?
  local lines; lines=$(printf '%s\n' "$out" | grep -c .)
  if [ "$code" -ne "$want" ] || [ "$lines" -ne 1 ] || ! printf '%s' "$out" | grep -q "^zero: error: .*$pat"; then
    echo "FAIL: zero train $*: exit $code (want $want), stderr:"; printf '%s\n' "$out"; fails=$((fails + 1))
  fi
}

printf '' > "$tmp/empty.txt"
printf 'abc\0def' > "$tmp/binary.txt"
printf 'short text' > "$tmp/short.txt"
printf '{"zero_optimization": {"stgae": 2}}' > "$tmp/typo.json"
printf '{"zero_optimization": {"stage": 7}}' > "$tmp/range.json"
printf '{"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}' > "$tmp/batch.json"
printf '{"optimizer": {"type": "AdamW", "params": {"lr": "fast"}}}' > "$tmp/type.json"
printf '{"zero_optimization": {' > "$tmp/broken.json"
printf '{"gradient_accumulation_steps": 2147483647}' > "$tmp/accum.json"
printf '{"train_batch_size": 8}' > "$tmp/tb8.json"
printf '{"zero_extensions": {"lora": {"r": 4, "targets": []}}}' > "$tmp/lora_none.json"

expect 2 "unknown option '--bogus'" -- --bogus
expect 2 "--stage '5'" -- --stage 5
expect 2 "--steps 'x'" -- --steps x
expect 2 "--micro-batch '0'" -- --micro-batch 0
expect 2 "--precision 'fp8'" -- --precision fp8
expect 2 "--model" -- --model gpt5
expect 2 "n_embd" -- --model tiny --dim 30 --heads 4
expect 2 "expected a value" -- --steps
expect 2 "no such file\|No such file\|cannot" -- --data "$tmp/missing.txt"
expect 2 "empty" -- --model tiny --data "$tmp/empty.txt"
expect 2 "binary\|NUL" -- --model tiny --data "$tmp/binary.txt"
expect 2 "short\|tokens\|seq" -- --model tiny --data "$tmp/short.txt" --seq 64
expect 2 'did you mean "zero_optimization.stage"' -- --model tiny --config "$tmp/typo.json"
expect 2 "zero_optimization.stage" -- --model tiny --config "$tmp/range.json"
expect 2 "train_batch_size" -- --model tiny --config "$tmp/batch.json"
expect 2 "optimizer.params.lr" -- --model tiny --config "$tmp/type.json"
expect 2 "not valid JSON at column 24" -- --model tiny --config "$tmp/broken.json"
expect 2 "--grad-accum 2147483647 (gradient_accumulation_steps) x --micro-batch 4 x --seq 64: the step's tokens" -- --model tiny --config "$tmp/accum.json"
expect 2 "train_batch_size 8 is not divisible by train_micro_batch_size_per_gpu 3 .*its train_batch_size stays" -- --model tiny --config "$tmp/tb8.json" --micro-batch 3
expect 2 "zero_extensions.lora.targets: no module named" -- --model tiny --config "$tmp/lora_none.json"
expect 2 "$tmp/none.json" -- --model tiny --config "$tmp/none.json"
expect 2 "--log-json" -- --model tiny --log-json /nonexistent/dir/log.json
expect 2 "needs zero_optimization.stage" -- --model tiny --offload-optimizer nvme:"$tmp"
expect 2 "--offload-param 'disk'" -- --model tiny --offload-param disk
expect 2 "--save '': expected a path" -- --model tiny --save ''
expect 2 "--stage ' 1'" -- --model tiny --stage ' 1'
expect 2 "--lr ' 0.1'" -- --model tiny --lr ' 0.1'
expect 2 "r given twice" -- --model tiny --lora r=4,r=8,targets=c_attn
# the same usage errors come back from a multi-rank launch, once
expect 2 "--stage '9'" -- --ranks 2 --stage 9
expect 2 "empty" -- --ranks 3 --model tiny --data "$tmp/empty.txt"
# an output that would overwrite an input, or the other output, is refused before anything runs
printf 'the training text, which must survive the mistakes below\n' > "$tmp/d.txt"
cp "$tmp/d.txt" "$tmp/d.keep"
mkdir -p "$tmp/dd" "$tmp/ck" && cp "$tmp/d.txt" "$tmp/dd/"
expect 2 "--log-json '$tmp/d.txt' is the file --data '$tmp/d.txt' names" -- --model tiny --data "$tmp/d.txt" --log-json "$tmp/d.txt"
expect 2 "--trace '$tmp/./d.txt' is the file --data" -- --model tiny --data "$tmp/d.txt" --trace "$tmp/./d.txt"
expect 2 "name the same file" -- --model tiny --log-json "$tmp/x.json" --trace "$tmp/dd/../x.json"
expect 2 "inside --data '$tmp/dd', which is read as data" -- --model tiny --data "$tmp/dd" --log-json "$tmp/dd/log.json"
expect 2 "where a checkpoint keeps latest and step_" -- --model tiny --save "$tmp/ck" --log-json "$tmp/ck/latest"
cmp -s "$tmp/d.txt" "$tmp/d.keep" || { echo "FAIL: the training text was changed"; fails=$((fails + 1)); }
[ ! -e "$tmp/x.json" ] && [ ! -e "$tmp/dd/log.json" ] && [ ! -e "$tmp/ck/latest" ] ||
  { echo "FAIL: a refused run wrote a file"; fails=$((fails + 1)); }
# output that cannot be written fails the command (exit 1, one line) instead of a silent success
for args in "--help" "train --model tiny --steps 1 --val-every 0 --log-json -"; do
  # shellcheck disable=SC2086
  out=$(timeout 60 "$Z" $args 2>&1 >/dev/full); code=$?
  if [ "$code" -ne 1 ] || ! printf '%s' "$out" | grep -q "^zero: error: cannot write to standard output"; then
    echo "FAIL: zero $args >/dev/full: exit $code, stderr:"; printf '%s\n' "$out"; fails=$((fails + 1))
  fi
done
if [ "$(id -u)" = 0 ] && mkdir -p "$tmp/full" && mount -t tmpfs -o size=64k tmpfs "$tmp/full" 2>/dev/null; then
  head -c 65536 /dev/zero > "$tmp/full/fill" 2>/dev/null
  expect 1 "--log-json '$tmp/full/log.json': write failed: No space left on device" -- --model tiny --steps 2 --val-every 0 --log-json "$tmp/full/log.json"
  umount "$tmp/full"
else
  echo "skip: a full --log-json disk (needs root for a small tmpfs)"
fi
# a checkpoint's record says what model it holds: flags that disagree are refused, --init-from and
# --resume alike (and sample's --heads); a resumed run keeps its seed and cannot end before it starts
timeout 60 "$Z" train --model tiny --layers 1 --heads 4 --steps 2 --val-every 0 --save "$tmp/rec" >/dev/null 2>&1 ||
  { echo "FAIL: the checkpoint for the record checks"; fails=$((fails + 1)); }
expect 2 "--heads 2: the model in $tmp/rec/step_00000002 has attention heads 4 (its record)" -- --init-from "$tmp/rec" --heads 2 --steps 1
expect 2 "--layers 3: the model in $tmp/rec has layers 1 (its record)" -- --init-from "$tmp/rec" --layers 3 --steps 1
expect 2 "--steps 1: the checkpoint is at step 2" -- --resume "$tmp/rec" --steps 1
expect 2 "--seed 9: the checkpoint's run uses seed 1" -- --resume "$tmp/rec" --seed 9 --steps 3
out=$(timeout 60 "$Z" sample --init-from "$tmp/rec" --heads 2 --prompt hi --tokens 2 2>&1 >/dev/null); code=$?
[ "$code" -eq 2 ] && printf '%s' "$out" | grep -q "^zero: error: --heads 2: the model in .* has attention heads 4" ||
  { echo "FAIL: sample --heads against the record: exit $code: $out"; fails=$((fails + 1)); }
# a fresh run saving where another run's checkpoints are says that it replaces them
out=$(timeout 60 "$Z" train --model tiny --steps 1 --val-every 0 --save "$tmp/rec" 2>&1 >/dev/null)
printf '%s' "$out" | grep -q "^zero: warning: --save $tmp/rec already holds a checkpoint (latest step_00000002) that this run does not resume" ||
  { echo "FAIL: no warning saving over another run: $out"; fails=$((fails + 1)); }
# the flags replace the config's micro-batch; its train_batch_size stays, the accumulation derived
out=$(timeout 60 "$Z" train --model tiny --config "$tmp/tb8.json" --micro-batch 2 --steps 1 --val-every 0 2>&1)
printf '%s' "$out" | grep -q "global batch 8 = 1 rank x micro-batch 2 x accumulation 4" ||
  { echo "FAIL: train_batch_size 8 with --micro-batch 2"; fails=$((fails + 1)); }
# sample's --heads must agree with what the model records: a model directory, an exported file
src=$(cd "$(dirname "$0")/../.." && pwd)
timeout 60 "$Z" export "$tmp/rec" -o "$tmp/rec.safetensors" >/dev/null 2>&1 || { echo "FAIL: export for --heads"; fails=$((fails + 1)); }
for args in "$src/tests/data/decoder/llama_gqa4:4:config.json" "$tmp/rec.safetensors:2:its metadata zero.config"; do
  IFS=: read -r m h why <<<"$args"
  out=$(timeout 60 "$Z" sample --init-from "$m" --heads "$h" --prompt-ids "1 2" --tokens 1 2>&1 >/dev/null); code=$?
  [ "$code" -eq 2 ] && printf '%s' "$out" | grep -q "^zero: error: --heads $h: the model in .* has attention heads [0-9]* ($why)" ||
    { echo "FAIL: sample --init-from $m --heads $h: exit $code: $out"; fails=$((fails + 1)); }
done
# --- every learning rate has --lr's range, [0, 10]: lr 1000 in a config trained one fp16 step and
# overflowed every step after it, exit 0
printf '{"optimizer": {"type": "AdamW", "params": {"lr": 1000}}, "fp16": {"enabled": true}}' > "$tmp/lr1000.json"
printf '{"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 1000}}}' > "$tmp/wmax.json"
expect 2 "lr1000.json: optimizer.params.lr: 1000 is out of range (expected a number in \[0, 10\])" -- --model tiny --config "$tmp/lr1000.json"
expect 2 "scheduler.params.warmup_max_lr: 1000 is out of range (expected a number in \[0, 10\])" -- --model tiny --config "$tmp/wmax.json"
expect 2 "--lr '1000': expected a number in \[0, 10\]" -- --model tiny --lr 1000
# --- a run that trains nothing fails: exit 1, one line saying why, no save at or after the step that
# stops it (the checkpoints before stay)
#  - a dynamic fp16 scale that overflows at its minimum twice in a row (hysteresis 2) can come down no
#    further (DeepSpeed stops such a run too): at 2^30 with min_loss_scale 2^30, step 1 overflows
#    and saves, step 2 overflows and stops
printf '{"fp16": {"enabled": true, "initial_scale_power": 30, "min_loss_scale": 1073741824}}' > "$tmp/atmin.json"
expect 1 "step 2: 2 steps in a row overflowed at the minimum loss scale 1.07374e+09 (fp16.min_loss_scale), which can come down no further: nothing is being trained; lower the learning rate (0.001)$" \
  -- --model tiny --config "$tmp/atmin.json" --steps 5 --val-every 0 --save "$tmp/atmin" --save-every 1 --log-json "$tmp/atmin.log"
[ "$(cat "$tmp/atmin/latest")" = step_00000001 ] && [ ! -e "$tmp/atmin/step_00000002" ] &&
  [ "$(grep -c '"step"' "$tmp/atmin.log")" = 2 ] && ! grep -q '"done"' "$tmp/atmin.log" ||
  { echo "FAIL: the stopped run: latest $(cat "$tmp/atmin/latest"), $(grep -c '"step"' "$tmp/atmin.log") step records"; fails=$((fails + 1)); }
timeout 60 "$Z" sample --init-from "$tmp/atmin" --prompt-ids "1 2" --tokens 2 >/dev/null 2>&1 ||
  { echo "FAIL: the checkpoint saved before the stop does not load"; fails=$((fails + 1)); }
#  - lr 10 (the most there is) with the scale's floor at 1024: a step or two trains, then the
#    gradients overflow fp16 even at the floor (the step where depends on the arithmetic)
printf '{"optimizer": {"type": "AdamW", "params": {"lr": 10}}, "fp16": {"enabled": true, "min_loss_scale": 1024}}' > "$tmp/lr10.json"
expect 1 "step [0-9]*: [0-9]* steps in a row overflowed\(, the last 2\)\? at the minimum loss scale 1024 (fp16.min_loss_scale), which can come down no further: nothing is being trained; lower the learning rate (10)$" \
  -- --model tiny --config "$tmp/lr10.json" --steps 40 --val-every 0
#  - a short run every step of which overflowed while a dynamic scale from 2^32 came down (it skips
#    16 steps on --model tiny: 2 at 2^32 with hysteresis 2, then one per halving to 2^17): 3 steps
#    trained nothing; 20 steps train the last 4 and succeed
printf '{"fp16": {"enabled": true, "initial_scale_power": 32}}' > "$tmp/p32.json"
expect 1 "every one of the 3 steps of this run overflowed (the dynamic loss scale came down to 1.07374e+09): nothing was trained; run more steps, start the scale lower (fp16.initial_scale_power) or lower the learning rate (0.001)$" \
  -- --model tiny --config "$tmp/p32.json" --steps 3 --val-every 0
timeout 120 "$Z" train --model tiny --config "$tmp/p32.json" --steps 20 --val-every 0 --log-json "$tmp/p32.log" >/dev/null 2>"$tmp/p32.err" &&
  [ ! -s "$tmp/p32.err" ] && [ "$(grep -c '"skipped":true' "$tmp/p32.log")" = 16 ] &&
  [ "$(grep -c '"skipped":false' "$tmp/p32.log")" = 4 ] ||
  { echo "FAIL: fp16 from 2^32 over 20 steps: $(cat "$tmp/p32.err"), $(grep -c '"skipped":true' "$tmp/p32.log") skipped"; fails=$((fails + 1)); }
#  - a healthy fp16 run with DeepSpeed's defaults (from 2^16) skips no step and says nothing
timeout 120 "$Z" train --model tiny --precision fp16 --steps 20 --val-every 0 --log-json "$tmp/h16.log" >/dev/null 2>"$tmp/h16.err" &&
  [ ! -s "$tmp/h16.err" ] && [ "$(grep -c '"skipped":true' "$tmp/h16.log")" = 0 ] && grep -q '"done"' "$tmp/h16.log" ||
  { echo "FAIL: a healthy fp16 run: $(cat "$tmp/h16.err")"; fails=$((fails + 1)); }
#  - fp32 SGD at lr 10 diverges (loss 5.5, 23, 560, 2e4, 5e6, then NaN from step 6): the last loss
#    is not finite
printf '{"optimizer": {"type": "SGD", "params": {"lr": 10}}}' > "$tmp/sgd10.json"
expect 1 "the loss of the last step (12) is NaN: the model diverged; lower the learning rate (10)$" \
  -- --model tiny --config "$tmp/sgd10.json" --steps 12 --val-every 0 --save "$tmp/sgd10"
[ ! -e "$tmp/sgd10/latest" ] && [ -z "$(ls -d "$tmp"/sgd10/step_* 2>/dev/null)" ] || { echo "FAIL: the diverged run saved its last step"; fails=$((fails + 1)); }
# --help works and exits 0
# (read whole: the help is more than a pipe's first 4096-byte write, and grep -q closing the pipe
# early would end zero by SIGPIPE, which pipefail reports)
"$Z" train --help >"$tmp/help.txt" && grep -q "usage: zero train" "$tmp/help.txt" || { echo "FAIL: --help"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "ok" || { echo "$fails failures"; exit 1; }
