#!/usr/bin/env bash
# `zero train --objective dpo|orpo`: preference tuning of the chat fixture (tests/data/finetune) on
# 8 pairs of tests/data/finetune/pairs.jsonl, against tests/data/finetune/pref_golden.json
# (scripts/make_pref_fixtures.py): ORPO's losses, rewards and gradient norms equal TRL's ORPOTrainer
# for 3 AdamW steps; DPO's first loss and rewards equal TRL's DPOTrainer, and its 3 steps the DPO
# definition written out in PyTorch (TRL's fused LM head moves its gradients by ~4e-4: its later
# losses within 5e-3). On 1 rank and on 2 ranks at stage 3, with accumulation; 3 ranks equal 1 at
# the same global batch; the chat (messages) form; LoRA (the reference is the base); a resumed ORPO
# run goes on as the uninterrupted one, and a resumed DPO run; --deterministic is bitwise on 1-3 ranks (its reference from the record); DPO validates --val-data's pairs against their own reference;
# every refusal (a missing field, an empty or identical
# completion, a pair longer than a row, an odd micro-batch, flags that do not go with the
# objective) is one line naming the line or the flag.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
FT="$SRC/tests/data/finetune"
M="$FT/qwen2_chat"
PAIRS="$FT/pairs.jsonl"
GOLD="$FT/pref_golden.json"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
expect_error() { # NAME STATUS NEEDLE...: exit STATUS, one stderr line "zero: error: ..." with every NEEDLE
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(grep -c . "$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
    [ "$(grep -c . "$TMP/err")" -eq 1 ] || cat "$TMP/err"
}
# AdamW as the goldens ran it: lr 1e-2, no weight decay, constant, no clipping
printf '{"optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}}}' \
    >"$TMP/adamw.json"
run() { # run NAME ARGS...: 3 steps on the pairs, --log-json to $TMP/NAME.json; a failure ends the test
    local name=$1; shift
    "$ZERO" train --init-from "$M" --data "$PAIRS" --seq 63 --steps 3 --config "$TMP/adamw.json" --val-every 0 \
        --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { echo "FAIL run $name"; cat "$TMP/$name.err"; exit 1; }
}
# golden NAME KEY N TOL FIELDS...: the first N steps' FIELDS (zero's name=golden's name) within relative TOL
golden() {
    local name=$1 key=$2 n=$3 tol=$4; shift 4
    "$PY" - "$GOLD" "$TMP/$name.json" "$key" "$n" "$tol" "$@" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))[sys.argv[3]]; n = int(sys.argv[4]); tol = float(sys.argv[5])
z = [json.loads(l) for l in open(sys.argv[2]) if '"step"' in l]
worst = 0.0
for s in range(n):
    for f in sys.argv[6:]:
        a, b = f.split("=")
        d = abs(z[s][a] - g[s][b]) / max(abs(g[s][b]), 1e-2)  # rewards start at 0
        worst = max(worst, d)
        assert d <= tol, ("step", s + 1, a, z[s][a], b, g[s][b], d)
print("    worst relative deviation %.2g" % worst)
EOF
}
R="loss=loss rewards_chosen=rewards/chosen rewards_rejected=rewards/rejected reward_margin=rewards/margins"

run dpo1 --objective dpo --micro-batch 16
check "the start names the objective and the reference" grep -q "^objective: dpo (beta 0.1), 8 train pairs, 1.00 steps of 8 pairs; the reference" "$TMP/dpo1.out"
check "DPO, step 1: TRL's loss and rewards (1e-5)" golden dpo1 dpo 1 1e-5 $R
check "DPO, 3 steps: the PyTorch DPO's losses and gradient norms (1e-5)" golden dpo1 dpo_torch 3 1e-5 loss=loss grad_norm=grad_norm
check "DPO, 3 steps: TRL's losses within 5e-3 (its fused LM head)" golden dpo1 dpo 3 5e-3 loss=loss
run dpo2 --objective dpo --micro-batch 4 --grad-accum 2 --ranks 2 --stage 3
check "DPO on 2 ranks at stage 3 x 2 micro-batches: the same (1e-5)" golden dpo2 dpo_torch 3 1e-5 loss=loss grad_norm=grad_norm
run orpo1 --objective orpo --micro-batch 16
check "ORPO, 3 steps: TRL's losses, rewards and gradient norms (1e-5)" golden orpo1 orpo 3 1e-5 $R grad_norm=grad_norm
run orpo2 --objective orpo --micro-batch 8 --ranks 2 --stage 3
check "ORPO on 2 ranks at stage 3: the same (1e-5)" golden orpo2 orpo 3 1e-5 $R grad_norm=grad_norm
check "the step records carry the accuracy" "$PY" -c "
import json; z = [json.loads(l) for l in open('$TMP/orpo1.json') if '\"step\"' in l]
g = json.load(open('$GOLD'))['orpo']
assert all(abs(a['reward_accuracy'] - b['rewards/accuracies']) < 1e-9 for a, b in zip(z, g)), z"
# 3 ranks = 1 rank at the same global batch of 6 pairs
run r1 --objective dpo --micro-batch 12 --steps 2
run r3 --objective dpo --micro-batch 4 --ranks 3 --stage 3 --steps 2
check "3 ranks at stage 3 = 1 rank, 6 pairs a step (1e-5)" "$PY" -c "
import json; a = [json.loads(l) for l in open('$TMP/r1.json') if '\"step\"' in l]; b = [json.loads(l) for l in open('$TMP/r3.json') if '\"step\"' in l]
assert len(a) == len(b) == 2 and all(abs(x['loss'] - y['loss']) <= 1e-5 * x['loss'] and abs(x['grad_norm'] - y['grad_norm']) <= 1e-5 * x['grad_norm'] for x, y in zip(a, b)), (a, b)"

# the chat form: lists of messages through the model's chat template
"$PY" - "$PAIRS" "$TMP/chat.jsonl" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as f:
    for l in open(sys.argv[1]):
        p = json.loads(l)
        f.write(json.dumps({"prompt": [{"role": "user", "content": p["prompt"].strip()}],
                            "chosen": [{"role": "assistant", "content": p["chosen"]}],
                            "rejected": [{"role": "assistant", "content": p["rejected"]}]}) + "\n")
EOF
"$ZERO" train --init-from "$M" --data "$TMP/chat.jsonl" --seq 63 --steps 3 --objective dpo --micro-batch 16 --val-every 0 --config "$TMP/adamw.json" \
    --log-json "$TMP/chat.json" >"$TMP/out" 2>&1
check "chat pairs: DPO trains from ln 2 down" "$PY" -c "
import json, math; z = [json.loads(l)['loss'] for l in open('$TMP/chat.json') if '\"step\"' in l]
assert abs(z[0] - math.log(2)) < 1e-6 and z[-1] < z[0], z"
# LoRA: the reference is the base (the adapters start at 0)
"$ZERO" train --init-from "$M" --data "$PAIRS" --seq 63 --steps 3 --objective dpo --micro-batch 4 --val-every 0 \
    --lora r=4,alpha=8 --lr 1e-2 --log-json "$TMP/lora.json" >"$TMP/out" 2>&1
check "LoRA DPO: ln 2 first, then lower" "$PY" -c "
import json, math; z = [json.loads(l)['loss'] for l in open('$TMP/lora.json') if '\"step\"' in l]
assert abs(z[0] - math.log(2)) < 1e-6 and z[-1] < z[0], z"
# DPO with --val-data: its pairs get their own reference. Validating on the training pairs in the
# reverse order (all 8 in each step's batch; a reference taken by the training data's pair numbers
# would be another pair's), the validation loss after step s is the training loss of step s + 1
# (the same weights and pairs), and the first is below ln 2
tac "$PAIRS" >"$TMP/pairs_rev.jsonl"
run dval --objective dpo --micro-batch 16 --val-data "$TMP/pairs_rev.jsonl" --val-every 1
check "DPO --val-data: the validation loss after step s is step s + 1's training loss (1e-6)" "$PY" -c "
import json, math; z = [json.loads(l) for l in open('$TMP/dval.json') if '\"step\"' in l]
assert len(z) == 3 and all('val_loss' in r for r in z), z
for a, b in zip(z, z[1:]): assert abs(a['val_loss'] - b['loss']) <= 1e-6 * b['loss'], (a['val_loss'], b['loss'])
assert abs(z[0]['loss'] - math.log(2)) < 1e-6 and z[0]['val_loss'] < math.log(2) - 1e-3, z[0]"
# --deterministic: passes of whole pairs (atoms of 2 sequences), the preference sums rounded per
# atom and summed exactly: the same global batch of 6 pairs on 1, 2 and 3 ranks at stage 3 gives
# the same bits (losses, rewards, gradient norms, the validation against --val-data's reference;
# without it 1 and 3 ranks differ in the last bits), and the DPO steps of the plain run within 1e-5
for ob in dpo orpo; do
    for rk in "1 12" "2 6" "3 4"; do
        set -- $rk
        "$ZERO" train --init-from "$M" --data "$PAIRS" --seq 63 --steps 3 --lr 1e-2 --objective $ob --deterministic \
            --ranks "$1" --micro-batch "$2" --stage 3 --val-data "$TMP/pairs_rev.jsonl" --val-every 1 \
            --log-json "$TMP/det_${ob}_$1.json" >"$TMP/out" 2>&1 || { echo "FAIL det $ob $1"; cat "$TMP/out"; fail=1; }
    done
    steps() { sed 's/,"step_ms.*//' "$1" | grep '"step"'; }
    check "--deterministic $ob: 3 steps on 1, 2 and 3 ranks, bitwise" test "$(steps "$TMP/det_${ob}_1.json" | wc -l)" -eq 3 -a \
        "$(steps "$TMP/det_${ob}_1.json")" = "$(steps "$TMP/det_${ob}_2.json")" -a \
        "$(steps "$TMP/det_${ob}_1.json")" = "$(steps "$TMP/det_${ob}_3.json")"
done
"$ZERO" train --init-from "$M" --data "$PAIRS" --seq 63 --steps 3 --lr 1e-2 --objective dpo --ranks 3 --micro-batch 4 \
    --stage 3 --val-data "$TMP/pairs_rev.jsonl" --val-every 1 --log-json "$TMP/nodet3.json" >/dev/null 2>&1
check "--deterministic DPO: the plain run's losses, gradient norms and validation within 1e-5, not its bits" "$PY" -c "
import json
a = [json.loads(l) for l in open('$TMP/det_dpo_1.json') if '\"step\"' in l]
b = [json.loads(l) for l in open('$TMP/nodet3.json') if '\"step\"' in l]
assert len(a) == len(b) == 3 and any(x != y for x, y in zip(a, b))
for x, y in zip(a, b):
    for k in ('loss', 'grad_norm', 'val_loss'): assert abs(x[k] - y[k]) <= 1e-5 * abs(y[k]), (k, x[k], y[k])"
# a resumed DPO run: the reference of its start comes from the checkpoint's record (the weights it
# resumes from are not the initial ones): its third step is the uninterrupted run's, and so is its
# validation against --val-data's own recorded reference
run dhalf --objective dpo --micro-batch 16 --steps 2 --save "$TMP/dck"
"$ZERO" train --resume "$TMP/dck" --steps 3 --log-json "$TMP/dres.json" >"$TMP/out" 2>&1 ||
    { echo "FAIL DPO resume"; cat "$TMP/out"; fail=1; }
run dvhalf --objective dpo --micro-batch 16 --val-data "$TMP/pairs_rev.jsonl" --val-every 1 --steps 2 --save "$TMP/dvck"
"$ZERO" train --resume "$TMP/dvck" --steps 3 --log-json "$TMP/dvres.json" >"$TMP/out" 2>&1 ||
    { echo "FAIL DPO resume with --val-data"; cat "$TMP/out"; fail=1; }
check "a resumed DPO run: step 3 and its validation as the uninterrupted runs' (1e-6)" "$PY" -c "
import json
def rec(p, s): return [json.loads(l) for l in open(p) if '\"step\"' in l and json.loads(l)['step'] == s][0]
a, b = rec('$TMP/dpo1.json', 3), rec('$TMP/dres.json', 3)
assert abs(a['loss'] - b['loss']) <= 1e-6 * a['loss'] and abs(a['reward_margin'] - b['reward_margin']) <= 1e-6, (a, b)
a, b = rec('$TMP/dval.json', 3), rec('$TMP/dvres.json', 3)
assert abs(a['val_loss'] - b['val_loss']) <= 1e-6 * a['val_loss'] and abs(a['loss'] - b['loss']) <= 1e-6 * a['loss'], (a, b)"
# a resumed ORPO run: its objective from the record, the steps of the uninterrupted run
run half --objective orpo --micro-batch 16 --steps 2 --save "$TMP/ck"
"$ZERO" train --resume "$TMP/ck" --data "$PAIRS" --steps 3 --log-json "$TMP/res.json" >"$TMP/out" 2>&1 ||
    { echo "FAIL resume"; cat "$TMP/out"; fail=1; }
check "a resumed ORPO run: step 3 as the uninterrupted run's" "$PY" -c "
import json; a = [json.loads(l) for l in open('$TMP/orpo1.json') if '\"step\"' in l][2]; b = [json.loads(l) for l in open('$TMP/res.json') if '\"step\"' in l][0]
assert b['step'] == 3 and abs(a['loss'] - b['loss']) <= 1e-6 * a['loss'], (a['loss'], b['loss'])"

# --- zero estimate --objective: DPO's extra forward (its time, stage 3's gathers), ORPO's 3 sequences a pair
for ob in lm dpo orpo; do
    "$ZERO" estimate --model "$M" --ranks 2 --micro-batch 4 --seq 63 --objective $ob --json >"$TMP/est_$ob.json" 2>"$TMP/err" ||
        { echo "FAIL estimate $ob"; cat "$TMP/err"; fail=1; }
done
check "estimate: DPO 4/3 of the compute and stage 3's gathers, ORPO 1.5x the activations and 2x the compute" "$PY" -c "
import json; e = {k: json.load(open('$TMP/est_%s.json' % k)) for k in ('lm', 'dpo', 'orpo')}
row = lambda j: [x for x in j['rows'] if x['stage'] == 3 and x['offload'] == 'none'][0]['time']
assert e['dpo']['objective'] == 'dpo' and e['lm']['activation_bytes'] == e['dpo']['activation_bytes']
assert abs(e['orpo']['activation_bytes'] / e['lm']['activation_bytes'] - 1.5) < 0.02, e['orpo']['activation_bytes']
assert abs(row(e['dpo'])['compute'] / row(e['lm'])['compute'] - 4 / 3) < 1e-9
assert abs(row(e['orpo'])['compute'] / row(e['lm'])['compute'] - 2) < 1e-9
assert row(e['dpo'])['node_bytes'] > row(e['lm'])['node_bytes']"

# --- refusals
bad() { "$ZERO" train --init-from "$M" --seq 63 --steps 1 --micro-batch 2 "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
printf '{"prompt": "a", "chosen": "b"}\n' >"$TMP/b1.jsonl"
bad --data "$TMP/b1.jsonl" --objective dpo
expect_error "a missing field" 2 "b1.jsonl:1:" 'missing "rejected"'
printf '{"prompt": "a", "chosen": "b", "rejected": "b"}\n' >"$TMP/b2.jsonl"
bad --data "$TMP/b2.jsonl" --objective orpo
expect_error "chosen = rejected" 2 "b2.jsonl:1:" '"chosen" and "rejected" are the same'
printf '{"prompt": "a", "chosen": "", "rejected": "c"}\n' >"$TMP/b3.jsonl"
bad --data "$TMP/b3.jsonl" --objective dpo
expect_error "an empty completion" 2 "b3.jsonl:1:" '"chosen" is empty'
"$PY" -c "import json; print(json.dumps({'prompt': 'word ' * 80, 'chosen': 'a', 'rejected': 'b'}))" >"$TMP/b4.jsonl"
bad --data "$TMP/b4.jsonl" --objective dpo
expect_error "a pair longer than a row" 2 "b4.jsonl:1:" "longer than a sequence of 63 + 1"
printf '{"prompt": "a", "chosen": ["x"], "rejected": "c"}\n' >"$TMP/b5.jsonl"
bad --data "$TMP/b5.jsonl" --objective dpo
expect_error "mixed forms" 2 "b5.jsonl:1:" "expected two strings, or two lists of messages"
bad --data "$PAIRS" --objective dpo --micro-batch 3
expect_error "an odd micro-batch" 2 "--micro-batch 3" "an even number of sequences"
bad --data "$PAIRS" --objective dpo --deterministic --det-atom 3 --micro-batch 6
expect_error "--deterministic with an odd atom" 2 "--det-atom 3" "an even number of sequences"
bad --data "$PAIRS" --objective kto
expect_error "--objective kto" 2 "--objective 'kto'" "lm, dpo or orpo"
bad --data "$FT/chats.jsonl" --beta 0.2
expect_error "--beta without a preference objective" 2 "--beta and --label-smoothing" "--objective dpo|orpo"
bad --data "$PAIRS" --objective orpo --label-smoothing 0.1
expect_error "--label-smoothing with ORPO" 2 "--label-smoothing 0.1" "with --objective dpo"
# a resumed DPO run on other pairs: its reference is of the pairs it started on
cp "$PAIRS" "$TMP/pairs_copy.jsonl"
bad --resume "$TMP/dck" --data "$TMP/pairs_copy.jsonl" --steps 3
expect_error "resuming DPO on other data" 2 "--resume $TMP/dck" "--data is not the run's" "the pairs it started on"
bad --resume "$TMP/dck" --val-data "$TMP/pairs_copy.jsonl" --steps 3
expect_error "resuming DPO with another --val-data" 2 "--val-data: the run had none" "the pairs it started on"

exit $fail
