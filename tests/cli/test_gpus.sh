#!/usr/bin/env bash
# `zero estimate` / `zero plan` on GPUs (--gpus, --gpu-memory, --host-mem): every row's per-rank
# device, host and pinned bytes against the ZeRO paper's formulas computed here (Ψ parameters:
# 2Ψ bf16 parameters, 2Ψ gradients, 12Ψ fp32 master + Adam moments, divided by N per stage) on
# 1, 2 and 3 GPUs, the fit of each row, the pick for a 24 GiB card (a 0.5B and a 7B model), and
# the usage errors.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset ZERO_RATES
export XDG_CACHE_HOME="$TMP/cache"
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...

# --- Ψ = 1.536e9 in 32 equal units of 48e6 elements (a multiple of 3 x 16: no padding on 1-3 GPUs)
for n in 1 2 3; do
    "$ZERO" estimate --params 1.536e9 --gpus $n --gpu-memory 24GiB --host-mem 512GiB --precision bf16 --json >"$TMP/e$n.json"
    check "estimate --gpus $n: exit 0" test $? -eq 0
    check "estimate --gpus $n: every row against the paper's formulas, pinned named apart, fits" "$PY" - "$TMP/e$n.json" $n <<'EOF'
import json, sys
d, N = json.load(open(sys.argv[1])), int(sys.argv[2])
psi = 1.536e9
assert d["params"] == psi and d["padded_params"] == psi and d["ranks"] == N and d["gpus"] == N, d
u1 = 48e6
usable_dev, usable_host = 0.9 * 24 * 2**30, 0.9 * 512 * 2**30
for r in d["rows"]:
    s, off, offp = r["stage"], r["offload"], r["offload_param"]
    # bytes per rank by kind (the paper's table): params 2Ψ (stage 3: /N), grads 2Ψ (stages 2-3: /N),
    # master + moments 12Ψ (stages 1-3: /N); one GPU keeps everything whole whatever the stage
    params = 2 * psi / (N if s == 3 else 1)
    grads = 2 * psi / (N if s >= 2 else 1)
    states = 12 * psi / (N if s >= 1 else 1)
    dev, pinned, nvme, pool = 0.0, 0.0, 0.0, 0.0
    if off == "nvme": pool += 4 * 2**20                               # optimizer swap pool: 4 x 1 MiB
    if offp == "nvme": pool += 5 * min(1e8, u1 / N) * 2               # parameter pool: 5 buffers of a shard
    # the model states, each where its offload puts it; ZeRO-Offload: a host optimizer's gradient
    # shard is in pinned host memory with the master and moments
    for where, b in ((offp, params), (off, grads), (off, states)):
        if where == "cpu": pinned += b
        elif where == "nvme" and b is not grads: nvme += b
        elif where == "nvme": pinned += b
        else: dev += b
    pinned += pool
    if off == "none" and offp == "none":
        paper = [16 * psi, (4 + 12 / N) * psi, (2 + 14 / N) * psi, 16 * psi / N][s]
        assert dev == paper, (s, dev, paper)
    got = (r["device_bytes"], r["host_bytes"], r["pinned_bytes"], r["nvme_bytes"])
    assert got == (dev, pinned, pinned, nvme), (s, off, offp, got, (dev, pinned, pinned, nvme))
    assert r["grad_staging_bytes"] == (grads if off != "none" else 0), r
    need = dev + r["transient_bytes"]                                 # a --params model: no activations
    assert r["need_device"] == need, (r["need_device"], need)
    assert r["fits"] == (need <= usable_dev and pinned * N <= usable_host), (s, off, need, usable_dev)
fits = {(r["stage"], r["offload"]): r["fits"] for r in d["rows"]}
if N == 1: assert not fits[(0, "none")] and fits[(2, "cpu")], fits    # 16Ψ = 24.6 GB does not fit 24 GiB
if N == 3: assert fits[(3, "none")] and not fits[(0, "none")], fits
print("device bytes, stages 0-3:", [r["device_bytes"] for r in d["rows"] if r["offload"] == "none" and r["hpz_partition_size"] == 1 and not r["quantized_weights"]])
EOF
done
"$ZERO" estimate --params 1.536e9 --gpus 2 --gpu-memory 24GiB --precision bf16 >"$TMP/e.txt"
check "estimate text: a pinned and a fits column" grep -q "pinned .*fits" "$TMP/e.txt"
check "estimate text: host not checked without --host-mem" grep -q "host not checked" "$TMP/e.txt"

# --- the pick on a 24 GiB card, bf16 AdamW: a 0.5B model trains at stage 0; a 7B model needs its
# optimizer and parameters on the host (16Ψ pinned), every rung above it missing device memory
"$ZERO" plan --model qwen2.5-0.5b --gpus 1 --gpu-memory 24GiB --host-mem 64GiB --precision bf16 --json >"$TMP/p05.json"
check "plan 0.5B on 24 GiB: exit 0" test $? -eq 0
"$ZERO" plan --model qwen2.5-7b --gpus 1 --gpu-memory 24GiB --host-mem 256GiB --precision bf16 --json >"$TMP/p7.json"
check "plan 7B on 24 GiB + 256 GiB host: exit 0" test $? -eq 0
check "plan: the picks" "$PY" - "$TMP/p05.json" "$TMP/p7.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
usable = 0.9 * 24 * 2**30
ka = a["rungs"][a["chosen"]]
assert (ka["stage"], ka["offload_optimizer"], ka["offload_param"]) == (0, "none", "none"), ka
psi = a["params"]
assert abs(ka["device_bytes"] - 16 * psi) < 1e-3 * 16 * psi, ka     # 16Ψ, padding aside
assert ka["need_device"] <= usable, ka
kb = b["rungs"][b["chosen"]]
assert (kb["stage"], kb["offload_optimizer"], kb["offload_param"]) == (3, "cpu", "cpu"), kb
psi = b["params"]
assert kb["device_bytes"] == 0 and abs(kb["pinned_bytes"] - 16 * psi) < 1e-3 * 16 * psi, kb
assert kb["need_device"] <= usable and kb["activation_checkpointing"], kb
for r in b["rungs"][:b["chosen"]]:
    assert not r["fits"] and r["need_device"] > usable, r
print("0.5B:", a["chosen_name"], "; 7B:", b["chosen_name"], round(kb["need_device"] / 2**30, 2), "GiB device,",
      round(kb["pinned_bytes"] / 2**30, 2), "GiB pinned")
EOF

# --- usage errors: one line each, exit 2
err() { # err NAME EXPECTED-TEXT ARGS...: exit 2 and one line naming the value
    local name=$1 want=$2; shift 2
    "$ZERO" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -qF -- "$want" "$TMP/err" && [ ! -s "$TMP/out" ]; then
        echo "ok   $name"
    else
        echo "FAIL $name (rc $rc): $(cat "$TMP/err")"; fail=1
    fi
}
err "--gpus 0" "--gpus '0'" estimate --params 1e9 --gpus 0 --gpu-memory 24GiB
err "--gpus and --ranks disagree" "--gpus 2 and --ranks 3" plan --params 1e9 --gpus 2 --ranks 3 --gpu-memory 24GiB --host-mem 64GiB
err "--gpus without --gpu-memory" "--gpus 2: expected --gpu-memory" estimate --params 1e9 --gpus 2
err "--gpu-memory malformed" "--gpu-memory '24Gx'" plan --params 1e9 --gpus 1 --gpu-memory 24Gx --host-mem 64GiB
err "--host-mem without --gpu-memory" "--host-mem without --gpu-memory" estimate --params 1e9 --ranks 2 --host-mem 64GiB
# --device-mem stays an alias
"$ZERO" plan --params 1e9 --ranks 1 --device-mem 24GiB --host-mem 64GiB --json >"$TMP/alias.json" &&
    "$ZERO" plan --params 1e9 --gpus 1 --gpu-memory 24GiB --host-mem 64GiB --json >"$TMP/gpus.json"
check "--device-mem is --gpu-memory" cmp -s "$TMP/alias.json" "$TMP/gpus.json"
exit $fail
