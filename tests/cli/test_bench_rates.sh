#!/usr/bin/env bash
# `zero bench rates`: the rates file it writes (where plan and estimate look, or -o), its keys and
# plausible figures on 1 and 2 ranks (GEMM FLOPs equal to the planner's formula, in-node busbw with
# 2 ranks), the disk, and that plan/estimate then read it; one-line usage errors (exit 2).
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset ZERO_RATES
export XDG_CACHE_HOME="$TMP/cache"
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...

# one rank, the default location (created), the human table
"$ZERO" bench rates --model tiny --iters 2 >"$TMP/one.txt"
check "one rank: exit 0" test $? -eq 0
check "one rank: written where plan and estimate look" test -s "$XDG_CACHE_HOME/zero/rates.json"
check "one rank: the table names the file" grep -q "^wrote $XDG_CACHE_HOME/zero/rates.json" "$TMP/one.txt"
check "one rank: the file" "$PY" - "$XDG_CACHE_HOME/zero/rates.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1 and d["kind"] == "cpu" and d["ranks"] == 1 and d["nodes"] == 1, d
for k in ("gemm_gflops", "model_gflops", "mem_gbps", "q8_update_gelems", "dequant_gelems"):
    assert isinstance(d[k], (int, float)) and 0.001 < d[k] < 1e6, (k, d[k])
for k in ("node_all_reduce_gbps", "node_reduce_scatter_gbps", "node_all_gather_gbps", "link_gbps",
          "link_all_reduce_gbps", "link_reduce_scatter_gbps", "link_all_gather_gbps",
          "link_all_reduce_progress", "link_reduce_scatter_progress", "link_all_gather_progress", "latency_us",
          "disk_read_gbps",
          "disk_write_gbps"):
    assert d[k] is None, (k, d[k])  # one rank on one node, no --disk: not measured
# tiny at micro-batch 4 x 64 tokens: 3 x 256 x 262144 FLOPs (the planner's formula, by hand)
s = d["shape"]
assert (s["model"], s["layers"], s["dim"], s["seq"], s["micro_batch"]) == ("tiny", 2, 64, 64, 4), s
assert s["gemm_flops"] == 3 * 256 * 262144, s
EOF
"$ZERO" estimate --model tiny --ranks 1 --json >"$TMP/est.json"
check "estimate reads it" "$PY" - "$TMP/est.json" "$XDG_CACHE_HOME/zero/rates.json" <<'EOF'
import json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert e["rates"]["source"] == sys.argv[2] and e["rates"]["compute_from"] == "model_gflops", e["rates"]
assert abs(e["rates"]["compute_gflops"] - r["model_gflops"]) <= 1e-9 * r["model_gflops"], (e["rates"], r)
t = e["rows"][0]["time"]
assert abs(t["compute"] - 3 * 64 * 262144 / (r["model_gflops"] * 1e9)) <= 1e-6 * t["compute"], t
EOF
# the 8-bit step's rate in the update: llama_gqa4's units are under 4,096 elements (fp32 states),
# so a --params model of 1e6 in one unit: its 2^20 padded elements step at the measured rate
"$ZERO" estimate --params 1e6 --layers 1 --ranks 1 --optimizer-states int8 --json >"$TMP/q8.json"
check "estimate times the 8-bit step at the file's rate" "$PY" - "$TMP/q8.json" "$XDG_CACHE_HOME/zero/rates.json" <<'EOF'
import json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = e["rows"][0]["time"]
assert abs(t["optimizer"] - e["padded_params"] / (r["q8_update_gelems"] * 1e9)) <= 1e-9 * t["optimizer"], (t, r)
EOF

# -o FILE, --json on stdout, the disk
"$ZERO" bench rates --model tiny --iters 1 --disk "$TMP" --disk-size 4MiB --json -o "$TMP/r.json" >"$TMP/r.out"
check "-o and --json: exit 0" test $? -eq 0
check "--json prints the file" "$PY" - "$TMP/r.out" "$TMP/r.json" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a == b, (a, b)
assert b["disk_read_gbps"] > 0 and b["disk_write_gbps"] > 0, b
EOF
check "the disk file is gone" bash -c "! ls '$TMP' | grep -q swp"
"$ZERO" bench rates --model tiny --iters 1 -o - --json >"$TMP/dash.json"
check "-o -: printed, nothing written" "$PY" -c "import json; json.load(open('$TMP/dash.json'))"

# two ranks: the in-node collectives (a build with MPI)
if "$ZERO" bench comm --max-bytes 1KiB 2>/dev/null | head -1 | grep -q "self backend"; then
    echo "ok   (no MPI in this build: two-rank rates not run)"
else
    "$ZERO" bench rates --model tiny --iters 2 --ranks 2 -o "$TMP/r2.json" >"$TMP/r2.out" 2>"$TMP/r2.err"
    check "two ranks: exit 0" test $? -eq 0
    check "two ranks: in-node busbw" "$PY" - "$TMP/r2.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 2 and d["ranks_per_node"] == 2 and d["nodes"] == 1, d
for k in ("node_all_reduce_gbps", "node_reduce_scatter_gbps", "node_all_gather_gbps"):
    assert 1e-4 < d[k] < 1e4, (k, d[k])
assert d["link_gbps"] is None, d
assert d["message_bytes"] == 120576, d  # the mean unit: 120576 parameters / 4 units x 4 bytes
EOF
    "$ZERO" estimate --model tiny --ranks 2 --rates "$TMP/r2.json" >"$TMP/e2.txt"
    check "estimate: the rates of the file, named" grep -q "rates: measured by zero bench rates at .* ($TMP/r2.json)" "$TMP/e2.txt"
fi

usage_error() { # usage_error EXPECTED_TEXT ARGS...
    local want=$1; shift
    "$ZERO" bench rates "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "^zero: error: .*$want" "$TMP/err" ||
        { echo "  rc=$rc stderr: $(cat "$TMP/err")"; return 1; }
}
check "--params has no shape" usage_error "--params" --params 7e9
check "unknown option" usage_error "'--gpus'" --gpus 8
check "bad model" usage_error "--model" --model nope
check "--nodes comes from MPI" usage_error "--nodes" --model tiny --nodes 2
check "--disk-size too small" usage_error "--disk-size" --model tiny --disk "$TMP" --disk-size 1KiB
check "--help" bash -c "\"\$0\" bench rates --help | grep -q '^usage: zero bench rates'" "$ZERO"
exit $fail
