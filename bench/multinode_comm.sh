#!/usr/bin/env bash
# `zero bench comm` across emulated hosts (tests/multinode/netns.sh) on links shaped to 1 and
# 10 Gbit/s: zero's collectives and OpenMPI's own against the link's ceiling, as ratios.
# Usage (as root): bench/multinode_comm.sh [BUILD_DIR]; exit 77 (and why) where hosts cannot be emulated
#   MN_RATES    link rates (default "1gbit 10gbit"); MN_DELAY one-way delay (default 50us; needs sch_netem)
#   MN_LAYOUTS  ranks per host, layouts separated by commas (default "1 1,2 2": 2 hosts x 1 and x 2)
#   MN_SIZES    "MIN MAX" message sizes (default "64KiB 16MiB"); MN_ITERS iterations (default 8)
# ceiling = the busbw at which each host's link is full in both directions: any algorithm must
# move (K-1)/K of the message out of (reduce-scatter) or into (all-gather) every one of K hosts,
# twice for all-reduce, so busbw <= R K (N-1) / (N (K-1)) with N ranks (= R with one rank per host).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
zero=$(cd "$build" 2>/dev/null && pwd)/zero
[ -x "$zero" ] || { echo "bench/multinode_comm.sh: $build/zero not found (make build first)" >&2; exit 1; }
. "$root/tests/multinode/netns.sh"
mn_prereq || { echo "bench/multinode_comm.sh: cannot emulate hosts: $MN_WHY" >&2; exit 77; }
rates=${MN_RATES:-1gbit 10gbit}
delay=${MN_DELAY-50us}
IFS=, read -r -a layouts <<<"${MN_LAYOUTS:-1 1,2 2}"
read -r min max <<<"${MN_SIZES:-64KiB 16MiB}"
iters=${MN_ITERS:-8}
hosts=0
for l in "${layouts[@]}"; do
    k=$(wc -w <<<"$l")
    [ "$k" -gt "$hosts" ] && hosts=$k
done
mn_up "$hosts" || { echo "bench/multinode_comm.sh: cannot make the hosts" >&2; exit 1; }
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg) =="
status=0
for rate in $rates; do
    mn_shape "$rate" "$delay" || { echo "bench/multinode_comm.sh: cannot shape the links to $rate" >&2; exit 1; }
    for layout in "${layouts[@]}"; do
        echo
        echo "== hosts ($layout), links: $MN_SHAPED =="
        out=$MN_WORK/out.json
        if ! mn_mpirun "$layout" -- "$zero" bench comm --json --min-bytes "$min" --max-bytes "$max" --iters "$iters" >"$out"; then
            echo "== zero bench comm failed on hosts ($layout) =="
            status=1
            continue
        fi
        /usr/bin/python3 - "$out" "$(mn_bits "$rate")" "$(wc -w <<<"$layout")" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
R, K = int(sys.argv[2]) / 8e9, int(sys.argv[3])  # GB/s per direction; hosts
print("%-15s %9s %8s %11s %11s %7s %9s %10s %9s" % ("collective", "bytes", "backend", "ours_busbw", "mpi_busbw",
      "ratio", "ceiling", "ours/ceil", "mpi/ceil"))
for r in rows:
    N = r["ranks"]
    ceil = R * K * (N - 1) / (N * (K - 1))
    print("%-15s %9d %8s %11.3f %11.3f %7.3f %9.3f %10.3f %9.3f" % (r["collective"], r["bytes"], r["backend"],
          r["ours_busbw_gbps"], r["mpi_busbw_gbps"], r["ratio"], ceil, r["ours_busbw_gbps"] / ceil,
          r["mpi_busbw_gbps"] / ceil))
EOF
    done
done
echo
echo "== done, load average: $(cut -d' ' -f1-3 /proc/loadavg) =="
exit $status
