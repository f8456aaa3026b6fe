#!/usr/bin/env bash
# The emulated hosts themselves (tests/multinode/netns.sh): each has its own hostname and OpenMPI
# sees separate nodes; zero's node split follows the hosts (test_comm_paths on 2-3 hosts, even
# and uneven); a shaped link delivers its rate and no more; teardown leaves nothing, even after
# the harness is killed; without root it refuses and says why.
set -u
: "${ZERO:?set ZERO to the zero binary}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/netns.sh"
mn_prereq || { echo "SKIP: multinode tests: $MN_WHY"; exit 77; }
paths_test=${ZERO_BUILD_DIR:-$(dirname "$ZERO")}/tests/test_comm_paths
[ -x "$paths_test" ] || { echo "SKIP: multinode tests: $paths_test not built (a build without MPI)"; exit 77; }
PY=/usr/bin/python3
t0=$(date +%s)
fail=0
check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

# --- without root: a clear refusal (setpriv drops to nobody)
if command -v setpriv >/dev/null; then
    # a copy that user nobody can read: the checkout may sit in a directory only its owner enters
    # (a clone into mktemp -d)
    pub=$(mktemp /tmp/zero_netns.XXXXXX)
    cp "$here/netns.sh" "$pub" && chmod 644 "$pub"
    why=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash -c '. "$1"; mn_prereq || echo "$MN_WHY"' mn "$pub" 2>&1)
    rm -f "$pub"
    check "not root: refused, saying why ($why)" grep -q "needs root" <<<"$why"
fi

# --- a harness killed before its trap runs: the next one removes what it left
bash -c '. "$1"; mn_up 2 && echo up && exec sleep 600' mn "$here/netns.sh" >"/tmp/zmn_orphan.$$" 2>&1 &
orphan=$!
for _ in $(seq 50); do grep -q up "/tmp/zmn_orphan.$$" && break; sleep 0.2; done
check "a harness makes its namespaces" test "$(ip netns list | grep -c "^$MN_PREFIX${orphan}")" -eq 3
kill -9 "$orphan"
wait "$orphan" 2>/dev/null
rm -f "/tmp/zmn_orphan.$$"
mn_up 3 || { echo "FAIL: cannot make the emulated hosts"; exit 1; }
check "the next harness removed a killed one's namespaces and files" \
    test -z "$(ip netns list | grep "^$MN_PREFIX${orphan}")$(ls -d /etc/netns/"$MN_PREFIX${orphan}"* /tmp/"$MN_PREFIX${orphan}".* 2>/dev/null)"
echo "hosts: ${MN_HOSTS[*]}"

# --- hostnames, and OpenMPI's view of the nodes
check "each host has its own hostname" test "$(mn_exec 2 hostname)" = "${MN_HOSTS[2]}"
check "the calling namespace keeps its hostname" test "$(hostname)" != "${MN_HOSTS[0]}"
out=$(MN_TIMEOUT=60 mn_mpirun "2 1 2" -- sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname) $OMPI_COMM_WORLD_LOCAL_SIZE"' | sort -n)
want=$(printf '%s\n' "0 ${MN_HOSTS[0]} 2" "1 ${MN_HOSTS[0]} 2" "2 ${MN_HOSTS[1]} 1" "3 ${MN_HOSTS[2]} 2" "4 ${MN_HOSTS[2]} 2")
check "OpenMPI places ranks 0-1, 2, 3-4 on hosts 0, 1, 2 and sees them as separate nodes" test "$out" = "$want"

# --- zero's node split (MPI_COMM_TYPE_SHARED) against the hostnames, and the path counters
paths_on() {
    MN_TIMEOUT=120 mn_mpirun "$1" -- "$paths_test" >"$MN_WORK/paths.out" 2>&1 || { tail -20 "$MN_WORK/paths.out"; return 1; }
    grep "test_comm_paths: .* ranks on" "$MN_WORK/paths.out" | sed 's/^/     /'
}
for layout in "2 2" "1 2 1" "2 2 2" "1 1 1" "4"; do
    check "test_comm_paths on hosts ($layout)" paths_on "$layout"
done

# --- shaping: 2 hosts x 1 rank, all-gather of 16 MiB (8 MiB each way): OpenMPI's busbw
# (bytes on the wire / time) at most the link's rate at 200 Mbit/s (and at least 30% of it:
# 93% here at a load average of 10 from other jobs, 47% at 25), and at least
# 1.5x that unshaped (veth reaches several Gbit/s)
bw() { # bw: MPI's all_gather busbw in GB/s on hosts (1 1)
    MN_TIMEOUT=120 mn_mpirun "1 1" -- "$ZERO" bench comm --json --min-bytes 16MiB --max-bytes 16MiB --iters 4 |
        "$PY" -c 'import json, sys; print([json.loads(l) for l in sys.stdin if "all_gather" in l][0]["mpi_busbw_gbps"])'
}
mn_shape 200mbit || fail=1
shaped=$(bw)
# zero bench rates across the same shaped hosts: each collective's own rate across the link (what
# the planner's step time uses, and the share of it a reduction keeps behind the compute), on the 9.7 MB message of small's mean unit (a tiny model's fits in
# the shaper's burst and can pass faster than the rate): none above the link's 0.2 Gbit/s
MN_TIMEOUT=180 mn_mpirun "1 1" -- "$ZERO" bench rates --model small --iters 2 -o "$MN_WORK/rates.json" \
    >"$MN_WORK/rates.out" 2>&1 || tail -5 "$MN_WORK/rates.out"
check "bench rates across hosts: every collective's link rate, at most the link's" "$PY" - "$MN_WORK/rates.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["nodes"] == 2 and d["ranks_per_node"] == 1, d
rates = [d["link_%s_gbps" % k] for k in ("all_reduce", "reduce_scatter", "all_gather")]
assert all(0 < r <= 1.05 * 0.2 for r in rates), rates
assert d["message_bytes"] > 9e6, d
assert d["link_gbps"] == d["link_all_gather_gbps"], d
# the share a posted reduction keeps while the rank computes with progress calls (0.7-0.85 here at
# 1 Gbit/s): well above what it would be if the bytes moved only in the wait (about 0)
for k in ("all_reduce", "reduce_scatter"):
    assert 0.1 < d["link_%s_progress" % k] <= 1, (k, d)
EOF
mn_shape off
free=$(bw)
echo "     all_gather busbw: $shaped GB/s at 200 Mbit/s (0.025 GB/s), $free GB/s unshaped"
check "a 200 Mbit/s link carries at most its rate (and at least 30% of it)" "$PY" -c "assert 0.3 * 0.025 <= $shaped <= 1.05 * 0.025"
check "unshaped, the same hosts go at least 1.5x faster" "$PY" -c "assert $free >= 1.5 * $shaped"

# --- teardown: nothing of this run is left
id=$MN_ID
work=$MN_WORK
mn_down
check "teardown removed the namespaces, /etc/netns files, work and OpenMPI session directories" \
    test -z "$(ip netns list | grep "^$id")$(ls -d /etc/netns/"$id"* "$work" /tmp/ompi."$id"* 2>/dev/null)"
echo "multinode hosts: $(($(date +%s) - t0)) s"
exit $fail
