#!/usr/bin/env bash
# `zero train --resume`: N steps straight against N/2 + save + resume N/2 give bitwise the same
# losses, gradient norms and loss scales at the same ranks and stage (fp32, fp16 with a loss
# scaler that skips, shrinks and grows across the save, bf16 at stage 3); resuming on another
# world size and stage (4 ranks stage 3 -> 2 ranks stage 1 -> 1 rank stage 0 or 3 ranks stage 0;
# 3 ranks stage 2 -> 2 ranks stage 3) continues within 1e-4 of the straight run (global batch 12
# throughout); the load's memory is one 256 KiB chunk, not the model.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
run() { # run NAME RANKS STAGE MICRO [args...]: --model tiny, global batch RANKS*MICRO; a failure ends the test
    local name=$1 r=$2 s=$3 b=$4; shift 4
    "$ZERO" train --model tiny --seq 32 --lr 3e-3 --val-every 0 --ranks "$r" --stage "$s" --micro-batch "$b" \
        --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || {
        echo "FAIL run $name: zero train --ranks $r --stage $s --micro-batch $b $*"; cat "$TMP/$name.err"; exit 1; }
}
# fields NAME: "step loss grad_norm loss_scale skipped" of each step record, as printed (%.17g)
fields() {
    "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    if "\"step\"" in l:
        print(*(str(x).lower() for x in (lambda d: (d["step"], l.split("\"loss\":")[1].split(",")[0],
              d["grad_norm"], d["loss_scale"], d["skipped"]))(json.loads(l))))' "$TMP/$1.json"
}
# same NAME REF FIRST: NAME's records are bitwise REF's records from step FIRST on
same() {
    fields "$1" >"$TMP/$1.f"
    fields "$2" | awk -v f="$3" '$1 >= f' >"$TMP/$2.from$3"
    test -s "$TMP/$1.f" && cmp -s "$TMP/$1.f" "$TMP/$2.from$3" || { diff "$TMP/$1.f" "$TMP/$2.from$3" | head -6; return 1; }
}
# near NAME REF: each of NAME's losses within 1e-4 relative of REF's at the same step
near() {
    fields "$2" >"$TMP/$2.f"
    fields "$1" | awk 'NR == FNR { ref[$1] = $2; next }
        { n++; d = $2 - ref[$1]; if (d < 0) d = -d; if (!($1 in ref) || d > 1e-4 * ref[$1]) { print "step " $1 ": " $2 " vs " ref[$1]; bad = 1 } }
        END { exit bad || !n }' "$TMP/$2.f" -
}
step_dir() { printf '%s/step_%08d' "$1" "$2"; }

# --- same world and stage: bitwise
run ref 1 0 12 --steps 6 --save-every 3 --save "$TMP/ref"
run half 1 0 12 --steps 3 --save "$TMP/half"
run rest 1 0 12 --steps 6 --resume "$TMP/half"
check "1 rank stage 0 fp32: 3 steps + save + resume 3 = 6 straight (bitwise)" same rest ref 4
check "resume says where it starts" grep -q "resumed from $TMP/half at step 3 of 6" "$TMP/rest.err"
check "the resumed run's last validation loss is the straight run's" \
    test "$(grep -o '"done".*"val_loss":[^,]*' "$TMP/rest.json" | sed 's/.*://')" = "$(grep -o '"done".*"val_loss":[^,]*' "$TMP/ref.json" | sed 's/.*://')"
# fp16: a dynamic scaler that starts too high (skips), shrinks, then grows every 2 good steps
echo '{"fp16": {"enabled": true, "initial_scale_power": 18, "loss_scale_window": 2, "hysteresis": 1}}' >"$TMP/fp16.json"
run f16 2 2 6 --config "$TMP/fp16.json" --steps 8 --save-every 4 --save "$TMP/f16"
run f16r 2 2 6 --config "$TMP/fp16.json" --steps 8 --resume "$(step_dir "$TMP/f16" 4)"
check "2 ranks stage 2 fp16: resume at 4 of 8 (bitwise, loss scale and skips included)" same f16r f16 5
fields f16 >"$TMP/f16.all"
check "fp16: the scaler skipped before and after the save, and changed scale after it" "$PY" - "$TMP/f16.all" <<'EOF'
import sys
r = [l.split() for l in open(sys.argv[1])]
skips = [int(x[0]) for x in r if x[4] == "true"]; scales = [float(x[3]) for x in r]
assert any(s <= 4 for s in skips) and any(s > 4 for s in skips), skips
assert len(set(scales[4:])) > 1, scales
EOF
run b16 2 3 6 --precision bf16 --steps 6 --save-every 3 --save "$TMP/b16"
run b16r 2 3 6 --precision bf16 --steps 6 --resume "$(step_dir "$TMP/b16" 3)"
check "2 ranks stage 3 bf16: resume at 3 of 6 (bitwise)" same b16r b16 4

# --- another world size and stage: no conversion, within fp32 tolerance of the straight run
run w4s3 4 3 3 --steps 3 --save "$TMP/w4"
check "4 ranks stage 3, steps 1-3, near the 1-rank run" near w4s3 ref
run w2s1 2 1 6 --steps 5 --resume "$TMP/w4" --save "$TMP/w2"
check "4 ranks stage 3 -> 2 ranks stage 1: steps 4-5 within 1e-4" near w2s1 ref
run w1s0 1 0 12 --steps 6 --resume "$TMP/w2"
check "2 ranks stage 1 -> 1 rank stage 0: step 6 within 1e-4" near w1s0 ref
run w3s0 3 0 4 --steps 6 --resume "$TMP/w2"
check "2 ranks stage 1 -> 3 ranks stage 0: step 6 within 1e-4" near w3s0 ref
run w3s2 3 2 4 --steps 3 --save "$TMP/w3"
run w3to2 2 3 6 --steps 6 --resume "$TMP/w3"
check "3 ranks stage 2 -> 2 ranks stage 3: steps 4-6 within 1e-4" near w3to2 ref
check "resharded runs log the resumed steps only" test "$(fields w3to2 | awk '{print $1}' | tr '\n' ' ')" = "4 5 6 "

# --- the load's memory: a model of 1.66M parameters (units of 3 MiB; fp32 states 19 MiB) on one
# rank at stage 0 fp32, where training itself allocates no transient buffers: the resumed run's
# buffers peak is the load's own, which reads every range straight into its shard through one
# chunk of 65536 floats (src/engine/save.c), and its peak RSS is the straight run's.
run wide 1 0 2 --dim 256 --steps 2 --save-every 1 --save "$TMP/wide"
run wider 1 0 2 --dim 256 --steps 2 --resume "$(step_dir "$TMP/wide" 1)"
check "wide model: resume bitwise" same wider wide 2
check "the load's peak memory is one chunk, not a unit or the model" "$PY" - "$TMP/wide.json" "$TMP/wider.json" <<'EOF'
import json, sys
def last(p): return [json.loads(l) for l in open(p) if '"done"' in l][0]
s, r = last(sys.argv[1]), last(sys.argv[2])
states = s["mem"]["params"] + s["mem"]["optim"]
print("     load: engine buffers peak %d B (straight run: %d B); peak RSS %.1f MiB resumed vs %.1f MiB straight; "
      "model states %.1f MiB" % (r["mem"]["buffers"], s["mem"]["buffers"], r["rss_peak"] / 2**20, s["rss_peak"] / 2**20,
                                 states / 2**20))
assert s["mem"]["buffers"] == 0 and 0 < r["mem"]["buffers"] <= 65536 * 4, (s["mem"], r["mem"])
assert states > 18 * 2**20 and r["rss_peak"] <= s["rss_peak"] + 2 * 2**20, (r["rss_peak"], s["rss_peak"])
EOF

# --- a resume restores the run (a fine-tune: model directory, chats, stage 3 and a learning rate
# on 2 ranks): --resume alone continues bitwise as the straight run, on the same data, stage and
# learning rate (it had fallen back to the built-in corpus, stage 0 and lr 1e-3 without a word);
# flags given again change it and say so; data that changed since is refused unless given again.
FT=$(cd "$(dirname "$0")/../data/finetune" && pwd)
cp "$FT/chats.jsonl" "$TMP/chats.jsonl"
ft() { # ft NAME [args...]
    local name=$1; shift
    "$ZERO" train --ranks 2 --val-every 0 --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}
ft ftstraight --init-from "$FT/qwen2_chat" --data "$TMP/chats.jsonl" --stage 3 --lr 2e-3 --steps 6
ft fthalf --init-from "$FT/qwen2_chat" --data "$TMP/chats.jsonl" --stage 3 --lr 2e-3 --steps 3 --save "$TMP/ft"
ft ftresumed --resume "$TMP/ft" --steps 6
check "a fine-tune resumed with --resume alone: bitwise the straight run" same ftresumed ftstraight 4
check "... at the recorded stage, learning rate and data" grep -q "stage 3, 2 ranks.*JSONL through the tokenizer" "$TMP/ftresumed.out"
check "... nothing said changed" bash -c "! grep -q '^resume: the run' '$TMP/ftresumed.out'"
ft ftlr --resume "$TMP/ft/step_00000003" --steps 4 --lr 1e-3 --stage 2
check "flags given again apply and are named" grep -q "^resume: the run's configuration, changed by --config or the flags: optimizer.params.lr 0.002 -> 0.001; zero_optimization.stage 3 -> 2$" "$TMP/ftlr.out"
check "... and the run has them" bash -c "grep -q '\"lr\":0.00100' '$TMP/ftlr.json' && grep -q 'stage 2, 2 ranks' '$TMP/ftlr.out'"
head -n 8 "$FT/chats.jsonl" >"$TMP/chats.jsonl" # the data changed since
ft ftchanged --resume "$TMP/ft/step_00000003" --steps 4
check "data that changed since the checkpoint: exit 1, one line naming it" \
    bash -c "test \$(grep -c '^zero: error: --resume .*the run.s data .*chats.jsonl changed since the checkpoint' '$TMP/ftchanged.err') -eq 1"
ft ftgiven --resume "$TMP/ft/step_00000003" --steps 4 --data "$TMP/chats.jsonl"
check "... given again: trained as it is now, and said" grep -q "^resume: data .*chats.jsonl changed since the checkpoint (--data given again" "$TMP/ftgiven.out"

exit $fail
