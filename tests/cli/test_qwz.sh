#!/usr/bin/env bash
# `zero train --quantized-weights` (ZeRO++ qwZ, zero_optimization.zero_quantized_weights; docs/
# ENGINE.md "Quantized weight gathers") and `--quantized-gradients` (qgZ, the reduce-scatter's MPI
# steps as int8: over plain MPI its bytes, rule and loss as below; on one node through shared memory
# the exact run's loss): on 3 ranks at stage 3 the all-gathers move int8 messages —
# the run's counted all-gather bytes at most 0.27 of the plain run's in fp32 (1 + 4/2048 bytes an
# element instead of 4, the messages padded), its traffic line at the rule with qwZ (ratio 1.000)
# — and it trains: the final loss within 1% of the plain run's, the same global batch; the frozen
# base of a LoRA run is gathered as int8 too, a QLoRA base's records as stored; a checkpoint saved
# under qwZ resumes without it (the master weights were never quantized); bad pairings are one line.
set -u
: "${ZERO:?set ZERO to the zero binary}"
: "${ZERO_SOURCE_DIR:?set ZERO_SOURCE_DIR to the source tree}"
PY=/usr/bin/python3
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
ratio_le() { "$PY" -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if a <= r * b else 1)" "$@"; }
close() { "$PY" -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= r * abs(b) else 1)" "$@"; }

G=(--model tiny --seq 16 --steps 10 --micro-batch 2 --val-every 0 --val-batches 1)
"$ZERO" train "${G[@]}" --ranks 3 --stage 3 --quantized-weights --log-json q.json >q.out 2>q.err
check "gpt2 tiny, 3 ranks, stage 3, qwZ: exit 0" test $? -eq 0
"$ZERO" train "${G[@]}" --ranks 3 --stage 3 --log-json p.json >p.out 2>p.err
check "the same, plain: exit 0" test $? -eq 0
check "qwZ: all-gather bytes <= 0.27 of plain's" ratio_le "$(done_field q.json comm all_gather)" \
    "$(done_field p.json comm all_gather)" 0.27
check "qwZ: reduce-scatter bytes the plain run's" test "$(done_field q.json comm reduce_scatter)" = \
    "$(done_field p.json comm reduce_scatter)"
check "qwZ: the traffic line's rule is qwZ's, ratio 1.000" grep -q "rule with qwZ's int8 gathers gives .* (ratio 1.000)" q.out
check "qwZ: final loss within 1% of plain's" close "$(done_field q.json loss)" "$(done_field p.json loss)" 0.01
check "qwZ: not the plain run's loss to the bit (the gathers were quantized)" \
    test "$(done_field q.json loss)" != "$(done_field p.json loss)"
# one rank: nothing to gather, plain stage 3's numbers
"$ZERO" train "${G[@]}" --ranks 1 --stage 3 --micro-batch 6 --quantized-weights --log-json q1.json >/dev/null 2>&1
"$ZERO" train "${G[@]}" --ranks 1 --stage 3 --micro-batch 6 --log-json p1.json >/dev/null 2>&1
check "one rank: the plain run's loss to the bit" test "$(done_field q1.json loss)" = "$(done_field p1.json loss)"

# qgZ (--quantized-gradients): with the shared-memory collectives off every reduce-scatter goes
# over MPI as int8 messages (<= 0.27 of fp32's bytes); through the window on one node the sums stay
# exact (the plain run's loss to the bit); with qwZ too the traffic line's rule is both's
ZERO_COMM_SHM=0 "$ZERO" train "${G[@]}" --ranks 3 --stage 3 --quantized-gradients --log-json g.json >g.out 2>&1
check "qgZ, 3 ranks, plain MPI: exit 0" test $? -eq 0
ZERO_COMM_SHM=0 "$ZERO" train "${G[@]}" --ranks 3 --stage 3 --log-json gp.json >gp.out 2>&1
check "qgZ: reduce-scatter bytes <= 0.27 of plain's" ratio_le "$(done_field g.json comm reduce_scatter)" \
    "$(done_field gp.json comm reduce_scatter)" 0.27
check "qgZ: all-gather bytes the plain run's" test "$(done_field g.json comm all_gather)" = "$(done_field gp.json comm all_gather)"
check "qgZ: the traffic line's rule is qgZ's, ratio 1.000" grep -q "rule with qgZ's int8 reduce-scatter gives .* (ratio 1.000)" g.out
check "qgZ: final loss within 1% of plain's" close "$(done_field g.json loss)" "$(done_field gp.json loss)" 0.01
check "qgZ: not the plain run's loss to the bit" test "$(done_field g.json loss)" != "$(done_field gp.json loss)"
"$ZERO" train "${G[@]}" --ranks 3 --stage 2 --quantized-gradients --log-json g1.json >/dev/null 2>&1
"$ZERO" train "${G[@]}" --ranks 3 --stage 2 --log-json gp1.json >/dev/null 2>&1
check "qgZ on one node through shared memory: the exact loss to the bit" \
    test "$(done_field g1.json loss)" = "$(done_field gp1.json loss)"
ZERO_COMM_SHM=0 "$ZERO" train "${G[@]}" --ranks 2 --stage 3 --micro-batch 3 --quantized-weights --quantized-gradients \
    --log-json gq.json >gq.out 2>&1
check "qwZ + qgZ: exit 0, the traffic line at both's rule (its padding: within 1%)" \
    grep -q "rule with qwZ's and qgZ's int8 messages gives .* (ratio 1.00[0-9])" gq.out

# LoRA: the frozen base's gathers quantized too; QLoRA: its records go as stored
D=$ZERO_SOURCE_DIR/tests/data
L=(--init-from "$D/decoder/llama_gqa4" --data "$D/decoder/tokens.bin" --seq 8 --steps 6 --lr 1e-2 --val-every 0
   --val-batches 1 --micro-batch 2 --ranks 2 --stage 3 --lora r=4)
"$ZERO" train "${L[@]}" --quantized-weights --log-json lq.json >lq.out 2>&1
check "LoRA, 2 ranks, qwZ: exit 0" test $? -eq 0
"$ZERO" train "${L[@]}" --log-json lp.json >lp.out 2>&1
check "LoRA: all-gather bytes <= 0.27 of plain's (the frozen part too)" ratio_le "$(done_field lq.json comm all_gather)" \
    "$(done_field lp.json comm all_gather)" 0.27
# the traffic line's ratio: the rule with qwZ is off the count as much as the plain rule is (a frozen
# embedding is not gathered again in backward; the rule counts two gathers of every frozen part)
ratio_of() { sed -n 's/.*(ratio \([0-9.]*\))$/\1/p' "$1"; }
check "LoRA: the traffic line at qwZ's rule" grep -q "rule with qwZ's int8 gathers gives" lq.out
check "LoRA: its ratio within 0.02 of the plain run's" close "$(ratio_of lq.out)" "$(ratio_of lp.out)" 0.02
check "LoRA: final loss within 1% of plain's" close "$(done_field lq.json loss)" "$(done_field lp.json loss)" 0.01
"$ZERO" train "${L[@]}" --quantize-base nf4 --quantized-weights --log-json nq.json >nq.out 2>&1
check "QLoRA, 2 ranks, qwZ: exit 0" test $? -eq 0
"$ZERO" train "${L[@]}" --quantize-base nf4 --log-json np.json >np.out 2>&1
# (0.05: the plain rule is 28% off here; a rule that took the records as int8 gives 2.2)
check "QLoRA: the traffic line's ratio within 0.05 of the plain run's (records as stored)" \
    close "$(ratio_of nq.out)" "$(ratio_of np.out)" 0.05
check "QLoRA: all-gather bytes below plain's (the records as stored, the rest int8)" ratio_le \
    "$(done_field nq.json comm all_gather)" "$(done_field np.json comm all_gather)" 0.99

# a checkpoint saved under qwZ resumes without it
"$ZERO" train "${G[@]}" --ranks 2 --stage 3 --micro-batch 3 --quantized-weights --save ck >/dev/null 2>&1
check "save under qwZ: exit 0" test $? -eq 0
"$ZERO" train --resume ck --ranks 2 --stage 3 --steps 12 --log-json r.json >r.out 2>&1
check "resumed without qwZ: exit 0" test $? -eq 0
check "resumed: trained to step 12" test "$(done_field r.json steps)" = 12

# bad input: one line each
"$ZERO" train "${G[@]}" --ranks 2 --stage 2 --quantized-weights >/dev/null 2>err
rc=$?; expect_error "--quantized-weights at stage 2" 2 "zero_optimization.zero_quantized_weights" "stage is 2"
"$ZERO" train "${G[@]}" --ranks 2 --stage 1 --quantized-gradients >/dev/null 2>err
rc=$?; expect_error "--quantized-gradients at stage 1" 2 "zero_optimization.zero_quantized_gradients" "stage is 1"
"$ZERO" train "${G[@]}" --ranks 2 --stage 3 --quantized-gradients --deterministic >/dev/null 2>err
rc=$?; expect_error "--quantized-gradients with --deterministic" 2 "zero_optimization.zero_quantized_gradients" "deterministic"
echo '{"zero_optimization": {"stage": 3, "zero_quantized_weights": true}, "zero_extensions": {"quantized_weights_block": 0}}' >b.json
"$ZERO" train "${G[@]}" --ranks 2 --config b.json >/dev/null 2>err
rc=$?; expect_error "quantized_weights_block 0" 2 "zero_extensions.quantized_weights_block" "0"
exit $fail
