#!/usr/bin/env bash
# hpZ (zero_optimization.zero_hpz_partition_size) across emulated hosts (tests/multinode/netns.sh):
# on 2 hosts x 2 ranks and 3 hosts x 2, stage 3 with groups of the 2 ranks of a host gives plain
# stage 3's losses and gradient norms to the last digit printed; the bytes counted as crossing hosts
# are, per step, 2/3 of plain stage 3's (only the forward all-gather and the reduce-scatter cross;
# docs/PLANNING.md §5), the group's all-gathers run through the host's shared memory, and host 1's
# link carries less than 0.8 of plain's.
set -u
: "${ZERO:?set ZERO to the zero binary}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/netns.sh"
mn_prereq || { echo "SKIP: multinode tests: $MN_WHY"; exit 77; }
if "$ZERO" bench comm --max-bytes 1KiB 2>&1 | head -1 | grep -q "self backend"; then
    echo "SKIP: multinode tests: this zero was built without MPI"
    exit 77
fi
PY=/usr/bin/python3
data=/usr/share/games/fortunes
t0=$(date +%s)
mn_up 3 || { echo "FAIL: cannot make the emulated hosts"; exit 1; }
mn_shape 1gbit 50us || { echo "FAIL: cannot shape the links"; exit 1; }
echo "hosts: ${MN_HOSTS[*]}; links: $MN_SHAPED"
tmp=$MN_WORK
fail=0
printf '{"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2}}\n' >"$tmp/hpz.json"
check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
link_bytes() { # host 1's link, both ways
    ip netns exec "${MN_HOSTS[1]}" sh -c 'echo $(( $(cat /sys/class/net/eth0/statistics/rx_bytes) + $(cat /sys/class/net/eth0/statistics/tx_bytes) ))'
}
run() { # run NAME "LAYOUT" [args...]: stage 3, global batch 12, 6 steps; records host 1's link bytes
    local name=$1 layout=$2 n=0 x b0
    shift 2
    for x in $layout; do n=$((n + x)); done
    b0=$(link_bytes)
    MN_TIMEOUT=240 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 -- "$ZERO" train --model tiny --seq 32 --data "$data" \
        --val-every 0 --lr 3e-3 --stage 3 --steps 6 --micro-batch $((12 / n)) --log-json "$tmp/$name.json" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" || {
        echo "FAIL run $name: hosts ($layout) $*"; tail -20 "$tmp/$name.err"; exit 1; }
    echo $(($(link_bytes) - b0)) >"$tmp/$name.wire"
}
# compare PLAIN HPZ: the same losses and norms as printed. Cross-node bytes: each step after the
# first 2/3 of plain's (its forward all-gather and reduce-scatter cross, the backward's stays in the
# host); the first step 1/3 (train writes the whole model at init, which fills the secondary copies:
# its forward gathers inside the host too). In-host bytes as plain's: with groups of a host's L = 2
# ranks the group's all-gather moves through shared memory what the in-host step of the world's
# did. Host 1's link carries under 0.8 of plain's.
compare() {
    "$PY" - "$tmp/$1.json" "$tmp/$2.json" "$(cat "$tmp/$1.wire")" "$(cat "$tmp/$2.wire")" <<'EOF'
import json, sys
def recs(p): return [json.loads(l) for l in open(p) if '"step"' in l]
def end(p): return [json.loads(l) for l in open(p) if '"done"' in l][-1]["comm_paths"]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
sa = [(r["step"], r["loss"], r["grad_norm"]) for r in a]
sb = [(r["step"], r["loss"], r["grad_norm"]) for r in b]
assert len(sa) == 6 and sa == sb, (sa, sb)
def per_step(rs): return [rs[0]["comm_paths"]["cross_node"]] + [y["comm_paths"]["cross_node"] - x["comm_paths"]["cross_node"] for x, y in zip(rs, rs[1:])]
ca, cb = per_step(a), per_step(b)
pa, pb = end(sys.argv[1]), end(sys.argv[2])
wa, wb = int(sys.argv[3]), int(sys.argv[4])
print("     cross-node bytes per step, plain %s, hpZ %s; in all plain %s, link %d B; hpZ %s, link %d B (link %.3f of plain's)" % (
    ca, cb, pa, wa, pb, wb, wb / wa))
assert all(x > 0 for x in ca) and len(set(ca)) == 1, ca
assert abs(3 * cb[0] - ca[0]) <= 1e-3 * ca[0], (ca, cb)
assert all(abs(3 * y - 2 * x) <= 1e-3 * x for x, y in zip(ca[1:], cb[1:])), (ca, cb)
assert pb["shm"] == pa["shm"] and pb["mpi"] <= pa["mpi"], (pa, pb)
assert wb < 0.8 * wa, (wa, wb)
EOF
}

for layout in "2 2" "2 2 2"; do
    tag=${layout// /-}
    run "p$tag" "$layout"
    run "h$tag" "$layout" --config "$tmp/hpz.json"
    check "hosts ($layout), stage 3 + hpZ 2: plain stage 3's numbers, 2/3 of its cross-node bytes" compare "p$tag" "h$tag"
done
echo "multinode hpZ: $(($(date +%s) - t0)) s"
exit $fail
