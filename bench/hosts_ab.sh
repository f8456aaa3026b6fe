#!/usr/bin/env bash
# bench/hosts_ab.sh — two builds of zero side by side on emulated hosts (tests/multinode/netns.sh):
# `zero train` at the given stages with each build, interleaved over rounds, on links shaped to
# each rate; prints per run the median step time and exposed communication (`step_ms`,
# `comm_wait_ms` of --log-json, the first 2 steps untimed) and the final loss, so that a change in
# the engine's communication is measured against its parent on the same hosts in one run.
# Usage (as root): bench/hosts_ab.sh BUILD_A BUILD_B; exit 77 (and why) where hosts cannot be emulated.
#   AB_RATES (default "1gbit"), AB_LAYOUT ranks per host (default "1 1"), AB_STAGES (default "1 3"),
#   AB_ROUNDS (default 2), AB_MODEL/AB_SEQ/AB_MB (default small, 128, 4), AB_STEPS (default 6)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: bench/hosts_ab.sh BUILD_A BUILD_B" >&2; exit 2; }
za=$(cd "$1" 2>/dev/null && pwd)/zero
zb=$(cd "$2" 2>/dev/null && pwd)/zero
for z in "$za" "$zb"; do [ -x "$z" ] || { echo "bench/hosts_ab.sh: $z not found" >&2; exit 2; }; done
. "$root/tests/multinode/netns.sh"
mn_prereq || { echo "bench/hosts_ab.sh: cannot emulate hosts: $MN_WHY" >&2; exit 77; }
layout=${AB_LAYOUT:-1 1}
hosts=0
for x in $layout; do hosts=$((hosts + 1)); done
mn_up "$hosts" || { echo "bench/hosts_ab.sh: cannot make the hosts" >&2; exit 1; }
work=$MN_WORK
data=/usr/share/games/fortunes
[ -e "$data" ] && data_args=(--data "$data") || data_args=()
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg) =="
echo "== A: $za; B: $zb; hosts ($layout), model ${AB_MODEL:-small}, seq ${AB_SEQ:-128}, micro-batch ${AB_MB:-4} =="
status=0
for rate in ${AB_RATES:-1gbit}; do
    mn_shape "$rate" || { echo "bench/hosts_ab.sh: cannot shape the links to $rate" >&2; exit 1; }
    echo "== links: $MN_SHAPED =="
    for ((r = 1; r <= ${AB_ROUNDS:-2}; r++)); do
        for s in ${AB_STAGES:-1 3}; do
            for ab in A B; do
                z=$za; [ $ab = B ] && z=$zb
                log=$work/t_${rate}_${s}_${ab}_$r.json
                if ! MN_TIMEOUT=1200 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 -- "$z" train --model "${AB_MODEL:-small}" \
                    --seq "${AB_SEQ:-128}" --micro-batch "${AB_MB:-4}" --stage "$s" --steps "${AB_STEPS:-6}" \
                    --val-every 0 --val-batches 1 --log-json "$log" "${data_args[@]}" >"$work/o.txt" 2>&1; then
                    echo "== $ab stage $s failed: $(tail -2 "$work/o.txt") =="
                    status=1
                    continue
                fi
                python3 - "$log" "$rate stage $s $ab round $r" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"step_ms"' in l]
ms = [r["step_ms"] for r in recs][2:]
cw = [r.get("comm_wait_ms", 0) for r in recs][2:]
print("%-28s step ms median %6.0f (min %6.0f)  comm wait ms %6.0f  loss %s" %
      (sys.argv[2], statistics.median(ms), min(ms), statistics.median(cw), recs[-1].get("loss")))
PY
            done
        done
    done
done
exit $status
