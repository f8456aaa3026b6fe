#!/usr/bin/env bash
# `zero train --model tiny` across emulated hosts (tests/multinode/netns.sh: network namespaces
# with their own hostnames, TCP over 1 Gbit/s links, OpenMPI launching through ip netns exec):
# 2 hosts x 2 ranks, 3 hosts x 1-2 ranks (even and uneven) and 1 host x 4 ranks give the losses
# of one rank at every stage 0-3 (3 hosts x 1: stages 0 and 3; global batch 12; relative 1e-4);
# the path counters show the shared-memory collectives inside a host and MPI between hosts in
# the proportion the node layout dictates; and the bytes counted as crossing hosts are what the
# host's link carried.
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

run() { # run NAME "LAYOUT" STAGE [args...]: global batch 12 over the layout's ranks; a failure ends the test
    local name=$1 layout=$2 s=$3 n=0 x
    shift 3
    for x in $layout; do n=$((n + x)); done
    MN_TIMEOUT=240 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 -- "$ZERO" train --model tiny --seq 32 --data "$data" --val-every 6 --lr 3e-3 --stage "$s" \
        --micro-batch $((12 / n)) --log-json "$tmp/$name.json" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || {
        echo "FAIL run $name: hosts ($layout) stage $s $*"; tail -20 "$tmp/$name.err"; exit 1; }
}

# same NAME REF: every step's loss and validation loss within 1e-4 relative of REF's
same() {
    "$PY" - "$tmp/$1.json" "$tmp/$2.json" <<'EOF'
import json, sys
def recs(p): return {d["step"]: d for d in map(json.loads, open(p)) if "step" in d}
a, ref = recs(sys.argv[1]), recs(sys.argv[2])
assert a.keys() == ref.keys() and len(a) == 12, (sorted(a), sorted(ref))
for s in ref:
    for k in ("loss", "val_loss"):
        if k in ref[s] or k in a[s]:
            x, y = a[s][k], ref[s][k]
            assert abs(x - y) <= 1e-4 * abs(y), "step %d %s %r vs %r" % (s, k, x, y)
EOF
}

# paths NAME BACKEND K N: the end record's backend, and its path counters: the flat total split
# into MPI (small messages), shared memory and cross-node bytes, cross-node being (K-1)/(N-1)
# of what the window's collectives moved (docs/COMM.md, "Traffic counters"), none with K = 1.
paths() {
    "$PY" - "$tmp/$1.json" "$2" "$3" "$4" <<'EOF'
import json, sys
end = [json.loads(l) for l in open(sys.argv[1]) if '"done"' in l][-1]
backend, K, N = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p, total = end["comm_paths"], sum(end["comm"].values())
assert end["backend"] == backend, (end["backend"], backend)
assert total > 0, end["comm"]
if backend == "mpi":
    assert p["shm"] == 0 and p["cross_node"] == 0 and p["mpi"] == total, (p, total)
else:
    windowed = p["shm"] + p["cross_node"]
    assert p["mpi"] < 0.01 * total and windowed > 0, (p, total)
    assert abs(p["mpi"] + windowed - total) <= 1e-6 * total, (p, total)
    f = (K - 1) / (N - 1)
    assert abs(p["cross_node"] - f * windowed) <= 1e-4 * windowed, (p, "cross-node share", p["cross_node"] / windowed, "expected", f)
print("     %s: %s" % (sys.argv[1].rsplit("/", 1)[1], p))
EOF
}
check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

run ref "1" 0 --steps 12
# the loss must really fall, or equality would prove little
check "the one-rank loss falls" "$PY" -c '
import json, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1]) if "\"step\"" in x]
assert l[-1] < l[0] - 0.3, l' "$tmp/ref.json"
for layout in "2 2" "1 2 1" "2 2 2" "1 1 1"; do
    n=0; k=0
    for x in $layout; do n=$((n + x)); k=$((k + 1)); done
    stages="0 1 2 3"
    [ "$layout" = "1 1 1" ] && stages="0 3" # plain MPI over TCP only: the other layouts cover 1-2
    for s in $stages; do
        name="h${layout// /-}s$s"
        run "$name" "$layout" "$s" --steps 12
        check "hosts ($layout) stage $s: the losses of one rank" same "$name" ref
    done
    case $layout in
    "2 2") check "2 hosts x 2: shared memory in a host, 1/3 of it between hosts" paths h2-2s3 mpi+shm 2 4
        check "2 hosts x 2, stage 0: the same split for the all-reduce" paths h2-2s0 mpi+shm 2 4 ;;
    "2 2 2") check "3 hosts x 2: 2/5 between hosts" paths h2-2-2s3 mpi+shm 3 6 ;;
    *) check "hosts ($layout): unequal or single ranks, plain MPI for everything" paths "h${layout// /-}s3" mpi "$k" "$n" ;;
    esac
done
# one host, four ranks: one node, nothing crosses
run one4 "4" 3 --steps 12
check "1 host x 4, stage 3: the losses of one rank" same one4 ref
check "1 host x 4: shared memory only" paths one4 mpi+shm 1 4

# What host 1's link carried, against the bytes counted as crossing hosts: two runs that differ
# only by 8 training steps (the launch, the final validation and the shutdown cancel out). With
# two hosts every algorithm moves exactly the counted bytes between them, so the link carries
# 2 ranks x the cross-node count, plus Ethernet/IP/TCP headers; the in-host (shared-memory)
# bytes, twice as many, must not be on the wire.
link_bytes() {
    ip netns exec "${MN_HOSTS[1]}" sh -c 'echo $(( $(cat /sys/class/net/eth0/statistics/rx_bytes) + $(cat /sys/class/net/eth0/statistics/tx_bytes) ))'
}
b0=$(link_bytes)
run wire4 "2 2" 3 --steps 4 --val-every 0
b1=$(link_bytes)
run wire12 "2 2" 3 --steps 12 --val-every 0
b2=$(link_bytes)
check "host 1's link carried the counted cross-node bytes (plus headers), not the in-host ones" \
    "$PY" - "$tmp/wire4.json" "$tmp/wire12.json" $((b1 - b0)) $((b2 - b1)) <<'EOF'
import json, sys
def end(p): return [json.loads(l) for l in open(p) if '"done"' in l][-1]["comm_paths"]
a, b = end(sys.argv[1]), end(sys.argv[2])
wire = int(sys.argv[4]) - int(sys.argv[3])
cross = 2 * (b["cross_node"] - a["cross_node"])
shm = 2 * (b["shm"] - a["shm"])
print("     8 steps: link %d B, counted cross-node %d B (ratio %.3f), in-host %d B" % (wire, cross, wire / cross, shm))
assert cross > 0 and shm >= 1.9 * cross, (cross, shm)
assert cross <= wire <= 1.15 * cross + 65536, (wire, cross)
EOF
echo "multinode train: $(($(date +%s) - t0)) s"
exit $fail
