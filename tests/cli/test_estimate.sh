#!/usr/bin/env bash
# `zero estimate`: the ZeRO paper's example, every row of a GPT-2 preset against an independent
# re-derivation of the formulas in Python, activations, and the usage errors.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset ZERO_RATES # the step times use the defaults, not a rates file of this machine
export XDG_CACHE_HOME="$TMP/cache"
fail=0
check() { # check NAME COMMAND...: runs the command, counts a failure when it fails
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

# --- the ZeRO paper (SC20, figure 1): 7.5B params, 64 ranks, fp16 Adam: 120, 31.4, 16.6, 1.9 GB
"$ZERO" estimate --params 7.5e9 --ranks 64 --precision fp16 --optimizer adam --json >"$TMP/paper.json"
check "paper: exit 0" test $? -eq 0
check "paper: four figures" "$PY" - "$TMP/paper.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["params"] == 7500000000 and d["ranks"] == 64 and d["precision"] == "fp16", d
rows = {(r["stage"], r["offload"]): r for r in d["rows"]}
psi, n = 7.5e9, 64
exact = [16 * psi, (4 + 12 / n) * psi, (2 + 14 / n) * psi, 16 * psi / n]   # the paper's formulas
paper = [120, 31.4, 16.6, 1.9]                                               # its printed figures
for s in range(4):
    got = rows[(s, "none")]["device_bytes"]
    assert abs(got - exact[s]) <= 0.01 * exact[s], (s, got, exact[s])
    # the paper rounds to one decimal (stage 0: to an integer): ours must print the same digits
    gb = got / 1e9
    shown = round(gb) if s == 0 else round(gb, 1)
    assert abs(shown - paper[s]) < 1e-9, (s, gb, paper[s])
    assert rows[(s, "none")]["host_bytes"] == 0 and rows[(s, "none")]["nvme_bytes"] == 0
print("paper figures:", [round(rows[(s, "none")]["device_bytes"] / 1e9, 3) for s in range(4)])
EOF

# --- gpt2 (124M) on 3 ranks in bf16, every row against the formulas re-derived here
for prec in fp32 bf16; do
"$ZERO" estimate --model gpt2 --ranks 3 --precision $prec --json >"$TMP/gpt2_$prec.json"
check "gpt2 $prec: exit 0" test $? -eq 0
check "gpt2 $prec: every row" "$PY" - "$TMP/gpt2_$prec.json" $prec <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); prec = sys.argv[2]
L, C, T, V, N, align = 12, 768, 1024, 50257, 3, 16
units = [V * C + T * C] + [12 * C * C + 13 * C] * L + [2 * C]
assert d["params"] == sum(units) == 124439808, d["params"]
grain = N * align
pad = [-(-u // grain) * grain for u in units]
P = sum(pad); S = P // N
U = sorted(pad, reverse=True); U1, U2 = U[0], U[1]
w = 4 if prec == "fp32" else 2
k = 2
assert d["padded_params"] == P and d["largest_unit"] == U1
expect_rows = [(0, "none", "none", False), (1, "none", "none", False), (1, "cpu", "none", False),
               (1, "nvme", "none", False), (2, "none", "none", False), (2, "cpu", "none", False),
               (2, "nvme", "none", False), (3, "none", "none", False), (3, "none", "none", True),
               (3, "cpu", "cpu", False), (3, "nvme", "nvme", False)]
assert [(r["stage"], r["offload"], r["offload_param"], r["quantized_weights"]) for r in d["rows"]] == expect_rows
B = 2048                                                  # qwZ's default block
msg = lambda n: -(-(4 * -(-n // B) + n) // 16) * 16       # zero_quant_msg_bytes
for r in d["rows"]:
    s, qwz = r["stage"], r["quantized_weights"]
    params = (S if s == 3 else P) * w
    grads = (S if s >= 2 else P) * w
    # fp32: the master is the working copy, except under ZeRO-Offload on a GPU: the host's step
    # keeps an fp32 master of its own beside the states (docs/ENGINE.md §3)
    master = 0 if w == 4 and r["offload"] not in ("cpu", "nvme") else (P if s == 0 else S) * 4
    optim = (P if s == 0 else S) * 4 * k
    half = w != 4
    U3 = U[2]
    trans = 0
    if half: trans += U1 * 4 + 16384 * 4                 # fp32 view, the step's chunk
    if s == 3: trans += (U1 + U2) * w                    # gathered + prefetched
    # fp32 grad buffers (one held open); a device rank whose gradients are on the host computes them there
    if half or s >= 2 or r["offload"] != "none": trans += (U1 + U2) * 4
    if s >= 2:                                           # reductions in flight
        trans += (U1 + U2 + U3) * w + (U1 + U2) // N * w if half else (U1 + U2) * 4 + (U1 + U2 + U3) // N * 4
    if qwz:                                              # the messages in flight, the coder's chunk
        trans += (N + 1) * max(msg(p // N) for p in pad) + (4 * (65536 // B * B) if half else 0)
    pool = 0
    if r["offload"] == "nvme": pool += 4 * (1 << 20)
    if r["offload_param"] == "nvme": pool += 5 * min(10**8, U1 // N) * w
    dev, host, nvme = 0, pool, 0
    # ZeRO-Offload: with the update on the host (optimizer on cpu or nvme) the gradient shard is
    # accumulated in pinned host memory, where the host optimizer reads it
    staging = grads if r["offload"] != "none" else 0
    host += staging
    for where, b in ((r["offload_param"], params), ("none", grads - staging), (r["offload"], master + optim)):
        if where == "cpu": host += b
        elif where == "nvme": nvme += b
        else: dev += b
    got = (r["params_bytes"], r["grads_bytes"], r["master_bytes"], r["optim_bytes"],
           r["transient_bytes"], r["device_bytes"], r["host_bytes"], r["nvme_bytes"], r["pool_bytes"],
           r["pinned_bytes"], r["grad_staging_bytes"])
    want = (params, grads, master, optim, trans, dev, host, nvme, pool, host, staging)
    assert got == want, (r, want)
    vol = P * w + 2 * P * (1 + 4 / B) if qwz else (3 if s == 3 else 2) * P * w
    assert abs(r["traffic_bytes"] - vol) < 1e-6 * vol, (r["traffic_bytes"], vol)
    assert abs(r["traffic_counted_bytes"] - 2 * vol * (N - 1) / N) < 1e-6 * vol
a, ac = d["activation_bytes"], d["activation_checkpointed_bytes"]
assert a > ac > 0, (a, ac)
EOF
done

# --- activations grow with the micro-batch; a bare --params model has none
"$ZERO" estimate --model small --ranks 1 --micro-batch 4 --json >"$TMP/mb4.json"
"$ZERO" estimate --model small --ranks 1 --json >"$TMP/mb1.json"
check "activations grow with the micro-batch" "$PY" - "$TMP/mb1.json" "$TMP/mb4.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["micro_batch"] == 1 and b["micro_batch"] == 4
assert 3 * a["activation_bytes"] < b["activation_bytes"] <= 4 * a["activation_bytes"], (a, b)
assert b["activation_checkpointed_bytes"] < b["activation_bytes"]
EOF
"$ZERO" estimate --params 1.5B --ranks 8 --optimizer sgd --json >"$TMP/sgd.json"
check "--params 1.5B, sgd: one state, no activations" "$PY" - "$TMP/sgd.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["params"] == 1500000000 and d["state_count"] == 1 and d["units"] == 32, d
assert d["activation_bytes"] is None
r0 = d["rows"][0]
assert r0["optim_bytes"] == d["padded_params"] * 4, r0
EOF
"$ZERO" estimate --model gpt2 --ranks 8 --nodes 2 --precision fp16 >"$TMP/text.txt"
check "text table: one line per row" test "$(grep -cE '^[0-3] +(none|cpu|nvme)' "$TMP/text.txt")" -eq 10
check "--help" bash -c "\"\$0\" estimate --help | grep -q '^usage: zero estimate'" "$ZERO"

# --- LoRA (docs/PLANNING.md, LoRA): llama-3.1-8b on 2 ranks, r=16 on q_proj and v_proj; the base
# frozen in bf16 with bf16 training, then in fp32 beside it; every row's model states against the
# formula re-derived here from the preset's shape (each unit's trainable and frozen parts padded
# on their own to a multiple of 2 x 16 elements)
for fd in bf16 fp32; do
    "$ZERO" estimate --model llama-3.1-8b --ranks 2 --lora r=16,alpha=32 --precision bf16 --frozen-dtype $fd --json >"$TMP/lora.json"
    check "lora $fd: exit 0" test $? -eq 0
    check "lora $fd: trainable and frozen counts, model states of every row, traffic" "$PY" - "$TMP/lora.json" $fd <<'EOF'
import json, sys
d, fd = json.load(open(sys.argv[1])), sys.argv[2]
L, C, H, G, F, V, r, N = 32, 4096, 32, 8, 14336, 128256, 16, 2
D = C // H
layer = 2 * C * H * D + 2 * C * G * D + 3 * C * F + 2 * C           # q, o, k, v, gate/up/down, two norms
units = [V * C] + [layer] * L + [C + V * C]                          # embeddings, layers, norm + untied head
adapters = [0] + [r * ((C + H * D) + (C + G * D))] * L + [0]          # q_proj, v_proj: r (in + out)
pad = lambda n: -(-n // (N * 16)) * (N * 16)
Pt, Pf = sum(pad(a) for a in adapters), sum(pad(u) for u in units)
St, Sf = Pt // N, Pf // N
lo = d["lora"]
assert lo["r"] == 16 and lo["alpha"] == 32 and lo["targets"] == "q_proj,v_proj" and lo["frozen_dtype"] == fd, lo
assert lo["trainable_params"] == sum(adapters) == 6815744 and lo["frozen_params"] == sum(units) == 8030261248, lo
assert d["params"] == sum(units) + sum(adapters), d["params"]
assert lo["trainable_padded"] == Pt and lo["frozen_padded"] == Pf, (lo, Pt, Pf)
w, wf = 2, {"bf16": 2, "fp32": 4}[fd]
for row in d["rows"]:
    s = row["stage"]
    if row["offload_param"] != "none":
        continue
    params = (St * w + Sf * wf) if s == 3 else (Pt * w + Pf * wf)
    grads = (Pt if s <= 1 else St) * w                                 # in the working dtype
    master = (Pt if s == 0 else St) * 4                                # bf16 training: an fp32 master of the adapters
    optim = 2 * (Pt if s == 0 else St) * 4                             # AdamW: two fp32 states
    got = (row["params_bytes"], row["grads_bytes"], row["master_bytes"], row["optim_bytes"])
    assert got == (params, grads, master, optim), (s, row["offload"], got, (params, grads, master, optim))
    traffic = (3 if s == 3 else 2) * Pt * w + (2 * Pf * wf if s == 3 else 0)
    if row["quantized_weights"]:                                       # qwZ: both parts' gathers in int8
        traffic = Pt * w + 2 * (Pt + Pf) * (1 + 4 / 2048)
    assert abs(row["traffic_bytes"] - traffic) <= 1e-9 * traffic, (s, row["traffic_bytes"], traffic)
# the base dominates: stages 0-2 hold it whole, stage 3 halves it
by = {(r["stage"], r["offload"]): r["device_bytes"] for r in d["rows"] if not r["quantized_weights"]}
assert by[(3, "none")] < 0.51 * by[(0, "none")], by
EOF
done
"$ZERO" estimate --model llama-3.1-8b --ranks 2 --lora r=16 >"$TMP/lora.txt"
check "lora text: the LoRA line" grep -q "^LoRA r=16 alpha=8 on q_proj,v_proj: 6815744 trainable parameters (0.085%); the base's 8030261248 frozen" "$TMP/lora.txt"
check "lora text: traffic of the adapters" grep -q "2Psi of the adapters" "$TMP/lora.txt"

# --- --deterministic: a grid byte per block of 32 elements joins the gradients; the transient gains
# the seen bytes and masses (9 bytes a block), the norm's records and, fp32 gradients kept whole, the two units' buffers handed
# to the model; a deterministic run on 3 ranks stays within its row
det_rows() {
    "$ZERO" estimate --model tiny --ranks 3 --seq 32 --json >"$TMP/det0.json" &&
        "$ZERO" estimate --model tiny --ranks 3 --seq 32 --deterministic --json >"$TMP/det1.json" || return 1
    "$PY" - "$TMP/det0.json" "$TMP/det1.json" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
P, units, U1, N = b["padded_params"], b["units"], b["largest_unit"], b["ranks"]
norm = 4104 * (N + 1)  # the norm's records, 513 int64 a rank and this rank's
for r0, r1 in zip(a["rows"], b["rows"]):
    assert r0["accumulator_bytes"] == 0, r0
    acc, B = r1["accumulator_bytes"], r1["grads_bytes"] - r0["grads_bytes"]
    assert P // 32 <= B <= P // 32 + units, (B, P)  # the grids: ceil(padded / 32) bytes a unit
    assert r1["transient_bytes"] - r0["transient_bytes"] == acc, (r0, r1)
    if r1["stage"] <= 1: assert 9 * B + norm + 4 * U1 < acc <= 9 * B + norm + 8 * U1, (acc, B, U1)
    else: assert acc == 9 * B + norm, (acc, B)  # seen bytes and masses; fp32 sharded: the sums are the gradients
    for k in ("params_bytes", "master_bytes", "optim_bytes", "nvme_bytes"):
        assert r0[k] == r1[k], (k, r0, r1)
    assert r1["device_bytes"] + r1["host_bytes"] - r0["device_bytes"] - r0["host_bytes"] == B, (r0, r1)
EOF
}
check "--deterministic: the grids in the gradients, the sums' bytes in the transient, nothing else changes" det_rows
det_trains() {
    (cd "$TMP" && "$ZERO" train --model tiny --ranks 3 --stage 2 --seq 32 --micro-batch 2 --deterministic --steps 2 \
        --val-every 0 --val-batches 1 --log-json "$TMP/det.log" >"$TMP/det.out" 2>&1) || { tail -3 "$TMP/det.out"; return 1; }
    "$PY" - "$TMP/det.log" "$TMP/det1.json" "$TMP/det0.json" <<'EOF'
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
row = [r for r in json.load(open(sys.argv[2]))["rows"] if r["stage"] == 2 and r["offload"] == "none"][0]
row0 = [r for r in json.load(open(sys.argv[3]))["rows"] if r["stage"] == 2 and r["offload"] == "none"][0]
assert done.get("done") and done["stage"] == 2 and done["ranks"] == 3, done
for cat in ("params", "grads", "master", "optim"):
    assert done["mem"][cat] == row[cat + "_bytes"], (cat, done["mem"], row)
B = row["grads_bytes"] - row0["grads_bytes"]
assert 9 * B <= done["mem"]["buffers"] <= row["transient_bytes"], (done["mem"], row)
EOF
}
check "--deterministic: a 3-rank stage-2 run's gradients as estimated, its buffers within the row" det_trains

# --- usage errors: exit 2, one line "zero: error: ..." naming the value
usage_error() { # usage_error EXPECTED_TEXT ARGS...
    local want=$1; shift
    "$ZERO" estimate "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "^zero: error: .*$want" "$TMP/err" ||
        { echo "  rc=$rc stderr: $(cat "$TMP/err")"; return 1; }
}
check "unknown model" usage_error "gpt5" --model gpt5 --ranks 2
check "no ranks" usage_error "--ranks" --model gpt2
check "ranks not a multiple of nodes" usage_error "--ranks 3 on --nodes 2" --model gpt2 --ranks 3 --nodes 2
check "bad precision" usage_error "int8" --model gpt2 --ranks 2 --precision int8
check "bad optimizer" usage_error "adagrad" --model gpt2 --ranks 2 --optimizer adagrad
check "bad size" usage_error "7Q" --params 7Q --ranks 2
check "model and params" usage_error "not both" --model gpt2 --params 7e9 --ranks 2
check "no model" usage_error "expected --model" --ranks 2
check "unknown option" usage_error "--frobnicate" --model gpt2 --ranks 2 --frobnicate
check "heads not dividing dim" usage_error "n_head" --model gpt2 --dim 100 --ranks 2
check "lora: bad spec" usage_error "unknown key 'x'" --model llama-3.1-8b --ranks 2 --lora r=16,x=1
check "lora: r 0" usage_error "--lora r '0'" --model llama-3.1-8b --ranks 2 --lora r=0
check "lora: a GPT-2 target on Llama" usage_error "'c_attn'" --model llama-3.1-8b --ranks 2 --lora r=16,targets=c_attn
check "lora: a bare --params model" usage_error "not --params" --params 7e9 --ranks 2 --lora r=16
check "lora: bad frozen dtype" usage_error "--frozen-dtype 'int4'" --model gpt2 --ranks 2 --lora r=4 --frozen-dtype int4
check "lora: frozen dtype without --lora" usage_error "expected --lora too" --model gpt2 --ranks 2 --frozen-dtype bf16
check "lora with --deterministic" usage_error "deterministic mode with frozen parameters (LoRA): not supported yet" \
    --model gpt2 --ranks 2 --lora r=4 --deterministic

# --params with a shape: the shape's units, the count shared among them; half a shape is refused
"$ZERO" estimate --params 1B --layers 2 --dim 64 --ranks 1 --json >"$TMP/pshape.json" 2>"$TMP/err"
check "--params with --layers and --dim: the shape's units, 1e9 parameters" "$PY" -c "
import json; e = json.load(open('$TMP/pshape.json')); assert e['params'] == 10**9 and e['units'] == 4, (e['params'], e['units'])"
check "--params with --dim alone" usage_error "--params with --dim but not --layers and --dim" --params 1B --dim 64 --ranks 1
check "--params with --vocab alone" usage_error "without one --vocab would change nothing" --params 1B --vocab 7 --ranks 1

exit $fail
