#!/usr/bin/env bash
# The step time of `zero estimate` and `zero plan`: figures worked out by hand from a rates file,
# where the rates come from (file, cache, defaults, --link-gbps), the choice flipping from stage 3
# to stage 1 + checkpointing when the link slows, monotonicity in the link rate, bad rates files.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset ZERO_RATES
export XDG_CACHE_HOME="$TMP/cache"
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...

# --- by hand: tiny (L=2, C=64, H=4, V=256, context 64) at 1 GFLOP/s and 1 GB/s, one rank.
# Forward FLOPs per token: 2 x (24 x 64^2 + 4 x 64 x 64) + 2 x 64 x 256 = 262144; a step of one
# sequence of 64 tokens computes 3 x 64 x 262144 = 50331648 FLOPs (0.050331648 s); the update
# streams 120576 parameters x 32 bytes (fp32 AdamW: 8 + 8 x 2 + 2 x 4) = 0.003858432 s.
# Checkpointing redoes one of the two blocks: 64 x 114688 FLOPs = 0.007340032 s.
cat >"$TMP/round.json" <<'EOF'
{"version": 1, "kind": "cpu", "gemm_gflops": 5, "model_gflops": 1, "mem_gbps": 1,
 "node_all_reduce_gbps": 0.5, "node_reduce_scatter_gbps": 0.25, "node_all_gather_gbps": 0.125,
 "link_gbps": 0.8, "latency_us": 10, "disk_read_gbps": null, "overlap": 0}
EOF
"$ZERO" estimate --model tiny --ranks 1 --rates "$TMP/round.json" --json >"$TMP/e1.json"
check "estimate: exit 0" test $? -eq 0
check "by hand: one rank" "$PY" - "$TMP/e1.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
r0 = d["rows"][0]
assert d["fwd_flops_per_token"] == 262144 and d["recompute_flops_per_token"] == 114688, d
assert d["rates"]["compute_from"] == "model_gflops" and d["rates"]["compute_gflops"] == 1, d["rates"]
def near(a, b): return abs(a - b) <= 1e-12 * abs(b)
assert near(r0["time"]["compute"], 0.050331648), r0["time"]
assert near(r0["time"]["optimizer"], 0.003858432), r0["time"]
assert near(r0["step_seconds"], 0.050331648 + 0.003858432), r0
assert near(r0["step_seconds_checkpointed"], 0.050331648 + 0.007340032 + 0.003858432), r0
assert r0["time"]["comm_node"] == r0["time"]["comm_cross"] == 0, r0["time"]
EOF

# --- the FLOPs of a Llama (SmolLM2-135M: L=30, C=576, 9 query heads and 3 key/value heads of 64,
# SwiGLU width 1536, vocabulary 49152) over 256 tokens, by hand: a layer's products
# 2 x (576 x (576 + 2 x 192) + 576 x 576 + 576 x 2 x 1536 + 1536 x 576) = 7077888, attention
# 4 x 256 x 576 = 589824; 30 layers and the head 2 x 576 x 49152: 286654464; the recompute 29 layers
"$ZERO" estimate --model smollm2-135m --seq 256 --ranks 1 --json >"$TMP/llama.json"
check "by hand: a Llama's FLOPs per token" "$PY" -c "
import json; d = json.load(open('$TMP/llama.json'))
assert d['arch'] == 'LlamaForCausalLM' and d['time_seq'] == 256, d
assert d['fwd_flops_per_token'] == 286654464 and d['recompute_flops_per_token'] == 29 * 7667712, d"

# --- by hand, 4 ranks on 2 nodes, micro-batch 2: every collective of M = P x 4 bytes costs, in the
# node, f x 1/2 x M / busbw, across nodes f x 1/2 x M / 0.1 GB/s + (f + 1) x 4 units x 10 us (f = 2
# for all-reduce; the one: the engine's control exchange); the update covers P (stage 0) or P / 4
"$ZERO" estimate --model tiny --ranks 4 --nodes 2 --micro-batch 2 --rates "$TMP/round.json" --json >"$TMP/e4.json"
check "by hand: 4 ranks on 2 nodes, every stage" "$PY" - "$TMP/e4.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
P = d["padded_params"]; M = 4.0 * P
assert d["link_gbps"] == 0.8 and d["rates"]["link_from"] == "measured", d
def near(a, b): return abs(a - b) <= 1e-9 * abs(b)
busbw = {"ar": 0.5e9, "rs": 0.25e9, "ag": 0.125e9}
colls = {0: ["ar"], 1: ["rs", "ag"], 2: ["rs", "ag"], 3: ["rs", "ag", "ag"]}
# stage 3 + hpZ 2 (the ranks per node): the backward all-gather runs inside the node only
hpz_rows = [r for r in d["rows"] if r["hpz_partition_size"] == 2]
assert len(hpz_rows) == 1 and hpz_rows[0]["stage"] == 3, d["rows"]
# stage 3 + qwZ: the two all-gathers at 1 + 4/2048 bytes an element; the coder, 2 P elements, at
# dequant_gelems; + qgZ: the reduce-scatter's cross-node step at those bytes too (its node step in
# fp32), its coder 2 (K-1)/K P/L elements
qwz_rows = [r for r in d["rows"] if r["quantized_weights"]]
assert [(r["stage"], r["quantized_gradients"]) for r in qwz_rows] == [(3, False), (3, True)], d["rows"]
dq = d["rates"]["dequant_gelems"] * 1e9
for r in d["rows"]:
    if r["offload"] != "none":
        continue
    s = r["stage"]; t = r["time"]; h = r["hpz_partition_size"] > 1; q = r["quantized_weights"]; g = r["quantized_gradients"]
    Mc = lambda c: P * (1 + 4 / 2048) if q and c == "ag" else M
    Mx = lambda c: P * (1 + 4 / 2048) if g and c == "rs" else Mc(c)  # what crosses
    node = sum((2 if c == "ar" else 1) * 0.5 * Mc(c) / busbw[c] for c in colls[s])
    crossing = colls[s][:2] if h else colls[s]
    cross = sum((2 if c == "ar" else 1) * 0.5 * Mx(c) / 0.1e9 + (3 if c == "ar" else 2) * 4 * 10e-6 for c in crossing)
    upd = (P if s == 0 else P / 4) * 32 / 1e9
    comp = 3 * 2 * 64 * 262144 / 1e9
    assert near(t["comm_node"], node) and near(t["comm_cross"], cross), (s, t, node, cross)
    assert near(t["cross_bytes"], sum((2 if s == 0 else 1) * 0.5 * Mx(c) for c in crossing)), (s, t)
    deq = (2 * P / dq if q else 0) + (2 * 0.5 * P / 2 / dq if g else 0)
    assert near(t["dequant"], deq) if q else t["dequant"] == 0, (s, t, deq)
    if h:  # the secondary shard P/2 in the parameters, on the device
        r3 = [x for x in d["rows"] if x["stage"] == 3 and x["offload"] == "none" and x["hpz_partition_size"] == 1 and not x["quantized_weights"]][0]
        assert r["params_bytes"] == r3["params_bytes"] + 4 * P // 2 and r["device_bytes"] == r3["device_bytes"] + 4 * P // 2, r
    assert near(r["step_seconds"], comp + node + cross + upd + deq), (s, r["step_seconds"], comp + node + cross + upd + deq)
EOF

# --- where the rates come from
"$ZERO" estimate --model tiny --ranks 2 >"$TMP/def.txt"
check "no file: the defaults, said so" grep -q "rates: defaults for a CPU-only machine, not measured" "$TMP/def.txt"
mkdir -p "$XDG_CACHE_HOME/zero" && cp "$TMP/round.json" "$XDG_CACHE_HOME/zero/rates.json"
"$ZERO" estimate --model tiny --ranks 2 --json >"$TMP/cache.json"
"$ZERO" estimate --model tiny --ranks 2 >"$TMP/cache.txt"
check "the cached file is read" "$PY" -c "
import json; d = json.load(open('$TMP/cache.json'))
assert d['rates']['source'] == '$XDG_CACHE_HOME/zero/rates.json' and d['rates']['compute_gflops'] == 1, d['rates']"
check "the cached file is named" grep -q "rates: measured by zero bench rates ($XDG_CACHE_HOME/zero/rates.json)" "$TMP/cache.txt"
ZERO_RATES="$TMP/none.json" "$ZERO" estimate --model tiny --ranks 2 --json >"$TMP/zr.json" 2>/dev/null
check "ZERO_RATES names another file (absent: defaults)" "$PY" -c "
import json; d = json.load(open('$TMP/zr.json')); assert d['rates']['source'] == 'defaults', d['rates']"
"$ZERO" estimate --model tiny --ranks 2 --rates gpu --json >"$TMP/gpu.json"
check "--rates gpu: the GPU defaults" "$PY" -c "
import json; d = json.load(open('$TMP/gpu.json')); r = d['rates']
assert r['source'] == 'defaults' and r['kind'] == 'gpu' and r['compute_gflops'] == 100000, r"
"$ZERO" estimate --model tiny --ranks 4 --nodes 2 --link-gbps 3 --json >"$TMP/lk.json"
"$ZERO" estimate --model tiny --ranks 4 --nodes 2 --link-gbps 3 >"$TMP/lk.txt"
check "--link-gbps over the file's link, with a note" "$PY" -c "
import json; d = json.load(open('$TMP/lk.json')); assert d['link_gbps'] == 3 and d['rates']['link_from'] == '--link-gbps', d"
check "the note" grep -q "the rates file measured the links at 0.8 Gbit/s; --link-gbps 3 is used" "$TMP/lk.txt"

# --- each collective's own cross-node rate (zero bench rates measures them): stage 0's all-reduce
# at link_all_reduce_gbps; with --link-gbps each keeps its share of the measured link
sed 's/"link_gbps": 0.8,/"link_gbps": 0.8, "link_all_reduce_gbps": 0.4, "link_reduce_scatter_gbps": 0.8, "link_all_gather_gbps": 0.8,/' \
    "$TMP/round.json" >"$TMP/coll.json"
"$ZERO" estimate --model tiny --ranks 4 --nodes 2 --micro-batch 2 --rates "$TMP/coll.json" --json >"$TMP/c4.json"
"$ZERO" estimate --model tiny --ranks 4 --nodes 2 --micro-batch 2 --rates "$TMP/coll.json" --link-gbps 1.6 --json \
    >"$TMP/c4n.json"
check "each collective's cross-node rate" "$PY" - "$TMP/e4.json" "$TMP/c4.json" "$TMP/c4n.json" <<'EOF'
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
def row(d, s):
    return [r for r in d["rows"] if r["stage"] == s and r["offload"] == "none" and r["hpz_partition_size"] == 1 and not r["quantized_weights"]][0]["time"]
def near(x, y): return abs(x - y) <= 1e-9 * abs(y)
M = 4.0 * a["padded_params"]
# stage 0: the all-reduce's 2 x 1/2 x M bytes at 0.05 GB/s instead of the link's 0.1
assert near(row(b, 0)["comm_cross"] - row(a, 0)["comm_cross"], M / 0.05e9 - M / 0.1e9), (row(a, 0), row(b, 0))
# stages 1-3: their collectives at the link's own rate: unchanged
for s in (1, 2, 3):
    assert near(row(b, s)["comm_cross"], row(a, s)["comm_cross"]), s
# --link-gbps 1.6, twice the measured 0.8: the all-reduce at twice its measured rate, 0.1 GB/s
lat = row(a, 0)["comm_cross"] - M / 0.1e9
assert near(row(c, 0)["comm_cross"], lat + M / 0.1e9), row(c, 0)
EOF
rm -rf "$XDG_CACHE_HOME"

# --- what the backward hides (docs/PLANNING.md §9), tiny on 2 nodes x 1 rank, micro-batch 1, by
# hand: the backward (2/3 of 0.050331648 s) runs the head (4 C V = 65536 FLOPs a token), then
# layer 1 and layer 0 (2 x 114688 each; under checkpointing layer 0 also redoes its 114688), then
# the embeddings (none): 0.004194304 s, 0.014680064 s twice (+ 0.007340032), 0. Each unit's
# reduction joins the queue when its piece ends, in proportion to its elements (final norm 128,
# layers 49984, embeddings 20480 of 120576), and drains at the progress share while later pieces run.
sed 's/"overlap": 0}/"overlap": 0, "link_all_reduce_progress": 0.5, "link_reduce_scatter_progress": 0.25}/' \
    "$TMP/round.json" >"$TMP/prog.json"
"$ZERO" estimate --model tiny --ranks 2 --nodes 2 --rates "$TMP/prog.json" --json >"$TMP/p2.json"
"$ZERO" estimate --model tiny --ranks 2 --nodes 2 --rates "$TMP/prog.json" --link-gbps 0.0008 --json >"$TMP/p2s.json"
"$ZERO" estimate --model tiny --ranks 2 --nodes 2 --rates "$TMP/round.json" --json >"$TMP/p2z.json"
"$ZERO" estimate --model tiny --ranks 2 --nodes 2 --rates "$TMP/prog.json" >"$TMP/p2.txt"
check "by hand: the reductions the backward hides" "$PY" - "$TMP/p2.json" "$TMP/p2s.json" "$TMP/p2z.json" <<'EOF'
import json, sys
fast, slow, none = (json.load(open(p)) for p in sys.argv[1:4])
def row(d, s):
    return [r for r in d["rows"] if r["stage"] == s and r["offload"] == "none" and r["hpz_partition_size"] == 1 and not r["quantized_weights"]][0]
def near(x, y): return abs(x - y) <= 1e-9 * abs(y)
M = 4.0 * fast["padded_params"]
# 0.8 Gbit/s: every reduction drains during the next layer's piece at either share; what the last
# layer and the embeddings post (after the last piece with FLOPs) stays exposed
for s, f, lat in ((0, 2, 3), (1, 1, 2), (2, 1, 2)):
    cc0 = f * 0.5 * M / 0.1e9 + lat * 4 * 10e-6
    for key in ("time", "time_checkpointed"):
        t = row(fast, s)[key]
        assert near(t["comm_hidden_backward"], cc0 * 50112 / 120576), (s, key, t, cc0)
        assert near(t["comm_hidden"], t["comm_hidden_backward"]), t
    assert near(row(none, s)["step_seconds"] - row(fast, s)["step_seconds"], cc0 * 50112 / 120576), s
# 0.0008 Gbit/s (1e5 bytes/s: the queue never empties): the final norm's share drains in layer 1's
# piece, then layer 0's piece runs at the share: 0.5 x 0.014680064 (+ 0.007340032 recomputed)
ar = M / 1e5 + 3 * 4 * 10e-6
assert near(row(slow, 0)["time"]["comm_cross"], ar), row(slow, 0)["time"]
assert near(row(slow, 0)["time"]["comm_hidden_backward"], ar * 128 / 120576 + 0.5 * 0.014680064), row(slow, 0)["time"]
assert near(row(slow, 0)["time_checkpointed"]["comm_hidden_backward"], ar * 128 / 120576 + 0.5 * 0.022020096)
rs = 0.5 * M / 1e5 + 2 * 4 * 10e-6
assert near(row(slow, 1)["time"]["comm_hidden_backward"], rs * 128 / 120576 + 0.25 * 0.014680064), row(slow, 1)
# stage 3: every unit waits for its gather, the reduce-scatter shares the link: none hidden
assert row(fast, 3)["time"]["comm_hidden_backward"] == 0 and row(slow, 3)["time"]["comm_hidden_backward"] == 0
# no progress shares in the file: nothing hidden (the rates' defaults)
assert all(r["time"]["comm_hidden_backward"] == 0 for r in none["rows"]), none["rows"]
assert fast["rates"]["link_all_reduce_progress"] == 0.5 and fast["rates"]["link_reduce_scatter_progress"] == 0.25
EOF
check "the rates line names the progress shares" grep -q "the backward's reductions moving at 0.5 (all-reduce) / 0.25 (reduce-scatter) of their rate while it computes, stage 3's prefetched gathers at 0" "$TMP/p2.txt"

# --- what stage 3's gathers hide, by hand on the same model: the forward runs the pieces reversed
# at a third of their time (embeddings 0, layer 0 and layer 1 0.007340032 s each, the head
# 0.002097152), the backward in order as above; each piece hides the next one's gather (its share
# by elements of a pass's cross time g = comm_cross / 3: both gathers and the reduce-scatter move
# M at f = 1) up to 0.5 of its own time. At 0.8 Gbit/s every gather hides whole but the forward's
# layer 0 (behind the embeddings, which compute nothing): 3 layers' gathers, the embeddings' and
# the final norm's.
sed 's/"overlap": 0}/"overlap": 0, "link_all_gather_progress": 0.5}/' "$TMP/round.json" >"$TMP/progg.json"
"$ZERO" estimate --model tiny --ranks 2 --nodes 2 --rates "$TMP/progg.json" --json >"$TMP/g2.json"
"$ZERO" estimate --model tiny --ranks 2 --nodes 2 --rates "$TMP/progg.json" >"$TMP/g2.txt"
check "by hand: the gathers stage 3 hides" "$PY" - "$TMP/g2.json" "$TMP/p2z.json" <<'EOF'
import json, sys
g2, none = (json.load(open(p)) for p in sys.argv[1:3])
def row(d, s):
    return [r for r in d["rows"] if r["stage"] == s and r["offload"] == "none" and r["hpz_partition_size"] == 1 and not r["quantized_weights"]][0]
def near(x, y): return abs(x - y) <= 1e-9 * abs(y)
t = row(g2, 3)["time"]
g = t["comm_cross"] / 3
want = g * (3 * 49984 + 20480 + 128) / 120576
assert near(t["comm_hidden_gathers"], want), (t, want)
assert near(t["comm_hidden"], want), t
assert near(row(none, 3)["step_seconds"] - row(g2, 3)["step_seconds"], want)
# stages 0-2 gather nothing a unit waits for; without the key nothing is hidden
assert all(row(g2, s)["time"]["comm_hidden_gathers"] == 0 for s in (0, 1, 2))
assert all(r["time"]["comm_hidden_gathers"] == 0 for r in none["rows"])
EOF
check "the rates line names the gathers' share" grep -q "stage 3's prefetched gathers at 0.5" "$TMP/g2.txt"

# --- the choice flips: gpt2, bf16, 4 ranks on 2 CPU-only nodes, memory sized from estimate's own
# figures so that stage 3 fits without activation checkpointing and stages 0-2 only with it (stage
# 0 not at all); micro-batch 1. Checkpointing costs 1024 tokens x 11 blocks' forward at 100
# GFLOP/s (1.95 s); stage 3's extra all-gather moves P bf16 elements / 2 across each node's link:
# 0.01 s at 100 Gbit/s, 10 s at 0.1 Gbit/s.
"$ZERO" estimate --model gpt2 --ranks 4 --nodes 2 --precision bf16 --rates cpu --json >"$TMP/g.json"
D=$("$PY" - "$TMP/g.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
row = {(r["stage"], r["offload"]): r for r in d["rows"] if r["hpz_partition_size"] == 1 and not r["quantized_weights"]}
def need(s, a): return row[(s, "none")]["device_bytes"] + row[(s, "none")]["transient_bytes"] + a
A, Ac = d["activation_bytes"], d["activation_checkpointed_bytes"]
assert need(3, A) < need(2, A) and need(1, Ac) < need(3, A) < need(0, Ac), "the sizes do not allow the case"
print(need(3, A) + 1000)
EOF
)
for g in 100 0.1; do
    "$ZERO" plan --model gpt2 --ranks 4 --nodes 2 --precision bf16 --rates cpu --host-mem $((2 * D)) --headroom 0 \
        --micro-batch 1 --link-gbps $g --json >"$TMP/f$g.json"
    "$ZERO" plan --model gpt2 --ranks 4 --nodes 2 --precision bf16 --rates cpu --host-mem $((2 * D)) --headroom 0 \
        --micro-batch 1 --link-gbps $g >"$TMP/f$g.txt"
done
check "100 Gbit/s: stage 3 without checkpointing" "$PY" -c "
import json; p = json.load(open('$TMP/f100.json')); r = p['rungs']
assert [x['fits'] for x in r[:4]] == [False, True, True, True], r
assert not r[1]['variants'][0]['fits'] and r[1]['activation_checkpointing'], r[1]
assert p['stage'] == 3 and not p['activation_checkpointing'] and r[p['chosen']]['stage'] == 3, p['chosen_name']
assert p['chosen_name'] == 'stage 3, micro-batch 1', p['chosen_name']"
check "0.1 Gbit/s: stage 1 + checkpointing" "$PY" -c "
import json; p = json.load(open('$TMP/f0.1.json'))
assert p['stage'] == 1 and p['activation_checkpointing'] and p['chosen'] == 1, p['chosen_name']
assert p['chosen_name'] == 'stage 1 + checkpointing, micro-batch 1', p['chosen_name']
r = p['rungs']; assert r[1]['step_seconds'] < r[3]['step_seconds'], [x['step_seconds'] for x in r]
assert p['time']['recompute'] > 1, p['time']"
check "0.1 Gbit/s: the reason in one line" grep -q \
    "fastest that fits: stage 1 + checkpointing, micro-batch 1: .* s/step (.* tokens/s); next: stage 3 + hpZ 2 + checkpointing, micro-batch 1: .* s/step (.* tokens/s) on 0.1 Gbit/s links (as fast: stage 2 + checkpointing, micro-batch 1)" "$TMP/f0.1.txt"
# stage 3 + hpZ (groups of the 2 ranks per node): only the forward all-gather and the reduce-scatter
# cross, stage 1's bytes across nodes; it fits only with checkpointing (its secondary shard is P/2)
check "0.1 Gbit/s: the hpZ rung crosses with stage 1's bytes, 2/3 of stage 3's" "$PY" -c "
import json; p = json.load(open('$TMP/f0.1.json')); r = p['rungs']
h = [x for x in r if x['hpz_partition_size'] == 2]; s3 = [x for x in r if x['stage'] == 3 and x['hpz_partition_size'] == 1][0]
assert len(h) == 1 and h[0]['name'] == 'stage 3 + hpZ 2' and h[0]['fits'] and h[0]['activation_checkpointing'], h
near = lambda a, b: abs(a - b) <= 1e-9 * b
assert near(h[0]['time']['cross_bytes'], r[1]['time']['cross_bytes']), (h[0]['time'], r[1]['time'])
assert near(3 * h[0]['time']['cross_bytes'], 2 * s3['time']['cross_bytes']), (h[0]['time'], s3['time'])
assert h[0]['step_seconds'] < s3['step_seconds']"
check "100 Gbit/s: the reason names stage 1 + checkpointing next" grep -q \
    "fastest that fits: stage 3, micro-batch 1: .*; next: stage 1 + checkpointing, micro-batch 1: .* on 100 Gbit/s links" "$TMP/f100.txt"
check "the traffic line gives the cross-node bytes and their time" grep -q \
    "across nodes .* MiB per node each way: .* s on 0.1 Gbit/s links (in the step time above)" "$TMP/f0.1.txt"
check "the rung table shows time next to memory" grep -Eq "^  stage 3 +yes +1 +[0-9.]+ GiB +[0-9.]+ s +[0-9]+" "$TMP/f0.1.txt"

# --- slower links never make a step faster
"$PY" - "$ZERO" "$TMP" <<'EOF' >"$TMP/mono.out" 2>&1
import json, subprocess, sys
zero, tmp = sys.argv[1], sys.argv[2]
prev = None
for g in (0.01, 0.1, 1, 10, 100, 1000):
    out = subprocess.run([zero, "estimate", "--model", "small", "--ranks", "4", "--nodes", "2", "--rates", "cpu",
                          "--link-gbps", str(g), "--json"], capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)["rows"]
    t = [r["step_seconds"] for r in rows]
    if prev:
        assert all(a < b for a, b in zip(t, prev)), (g, t, prev)
    prev = t
print("ok")
EOF
check "monotonic in --link-gbps" grep -q '^ok$' "$TMP/mono.out"

# --- bad rates
usage_error() { # usage_error EXPECTED_TEXT ARGS...
    local want=$1; shift
    "$ZERO" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "^zero: error: .*$want" "$TMP/err" ||
        { echo "  rc=$rc stderr: $(cat "$TMP/err")"; return 1; }
}
echo '{"gemm_gflops": -3}' >"$TMP/neg.json"
echo 'not json' >"$TMP/bad.json"
echo '{"overlap": 2}' >"$TMP/ov.json"
echo '{"kind": "tpu"}' >"$TMP/kind.json"
echo '[1, 2]' >"$TMP/arr.json"
echo '{"link_reduce_scatter_progress": 1.5}' >"$TMP/prog.json"
check "missing rates file" usage_error "--rates '$TMP/nope.json': cannot open $TMP/nope.json: No such file" estimate --model tiny --ranks 2 --rates "$TMP/nope.json"
check "negative rate" usage_error '"gemm_gflops": expected a number' estimate --model tiny --ranks 2 --rates "$TMP/neg.json"
check "not JSON" usage_error "not valid JSON at line 1, column 1" plan --model tiny --ranks 2 --host-mem 1GiB --rates "$TMP/bad.json"
echo '{"gemm_gflops": 100, "mem_gbs": 10}' >"$TMP/typo.json"
check "a key bench rates does not write (a typo)" usage_error 'unknown key "mem_gbs"' estimate --model tiny --ranks 2 --rates "$TMP/typo.json"
check "a JSON array is not a rates file" usage_error "expected a JSON object of rates" estimate --model tiny --ranks 2 --rates "$TMP/arr.json"
check "overlap above 1" usage_error '"overlap": expected a number in \[0, 1\]' estimate --model tiny --ranks 2 --rates "$TMP/ov.json"
check "a progress share above 1" usage_error '"link_reduce_scatter_progress": expected a number in \[0, 1\]' estimate --model tiny --ranks 2 --rates "$TMP/prog.json"
check "unknown kind" usage_error '"kind": expected "cpu" or "gpu"' estimate --model tiny --ranks 2 --rates "$TMP/kind.json"
check "link 0" usage_error "--link-gbps" estimate --model tiny --ranks 2 --link-gbps 0
check "empty --rates" usage_error "--rates ''" plan --model tiny --ranks 2 --host-mem 1GiB --rates ""
echo '{"link_gbps": 0}' >"$TMP/nolink.json"
check "a rate the setup needs, at 0" usage_error "link_bytes 0: this setup needs it" estimate --model tiny --ranks 4 --nodes 2 --rates "$TMP/nolink.json"
exit $fail
