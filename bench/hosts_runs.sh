#!/usr/bin/env bash
# bench/hosts_runs.sh — named sets of `zero train` flags side by side on emulated hosts
# (tests/multinode/netns.sh), one build: each set interleaved with the others over rounds, on links
# shaped to each rate; prints per run the median step time and exposed communication (`step_ms`,
# `comm_wait_ms` of --log-json, the first 2 steps untimed), the counted all-gather bytes a step and
# the final loss, then per rate each set's median over the rounds and its ratio to the first set.
# The way to measure a communication option (ZeRO++ qwZ against plain stage 3 and stage 1, say)
# against its alternatives on the same hosts in one run.
# Usage (as root): bench/hosts_runs.sh BUILD [NAME=FLAGS ...]; exit 77 (and why) where hosts
# cannot be emulated. Default sets: "stage1=--stage 1" "stage3=--stage 3"
# "stage3+qwZ=--stage 3 --quantized-weights". FLAGS starting with "@DIR " run DIR/zero instead of
# BUILD's (two builds side by side: bench/hosts_ab.sh); leading VAR=VALUE words (before the flags)
# set the ranks' environment (e.g. "ZERO_COMM_CROSS_OVERLAP=1 --stage 3").
#   HR_RATES (default "1gbit"), HR_LAYOUT ranks per host (default "1 1"), HR_ROUNDS (default 3),
#   HR_MODEL/HR_SEQ/HR_MB (default small, 128, 4), HR_STEPS (default 6), HR_ARGS (flags for every set)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: bench/hosts_runs.sh BUILD [NAME=FLAGS ...]" >&2; exit 2; }
z=$(cd "$1" 2>/dev/null && pwd)/zero
[ -x "$z" ] || { echo "bench/hosts_runs.sh: $z not found" >&2; exit 2; }
shift
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=("stage1=--stage 1" "stage3=--stage 3" "stage3+qwZ=--stage 3 --quantized-weights")
for s in "${sets[@]}"; do
    case $s in *=*) ;; *) echo "bench/hosts_runs.sh: '$s': expected NAME=FLAGS" >&2; exit 2 ;; esac
    case ${s#*=} in @*) d=${s#*=@}; d=${d%% *}; [ -x "$d/zero" ] || { echo "bench/hosts_runs.sh: $d/zero not found" >&2; exit 2; } ;; esac
done
. "$root/tests/multinode/netns.sh"
mn_prereq || { echo "bench/hosts_runs.sh: cannot emulate hosts: $MN_WHY" >&2; exit 77; }
layout=${HR_LAYOUT:-1 1}
hosts=0
for x in $layout; do hosts=$((hosts + 1)); done
mn_up "$hosts" || { echo "bench/hosts_runs.sh: cannot make the hosts" >&2; exit 1; }
work=$MN_WORK
data=/usr/share/games/fortunes
[ -e "$data" ] && data_args=(--data "$data") || data_args=()
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg) =="
echo "== $z; hosts ($layout), model ${HR_MODEL:-small}, seq ${HR_SEQ:-128}, micro-batch ${HR_MB:-4}, ${HR_STEPS:-6} steps =="
status=0
for rate in ${HR_RATES:-1gbit}; do
    mn_shape "$rate" || { echo "bench/hosts_runs.sh: cannot shape the links to $rate" >&2; exit 1; }
    echo "== links: $MN_SHAPED =="
    : >"$work/medians_$rate"
    for ((r = 1; r <= ${HR_ROUNDS:-3}; r++)); do
        for s in "${sets[@]}"; do
            name=${s%%=*}
            read -r -a flags <<<"${s#*=}"
            zs=$z
            if [[ ${flags[0]:-} == @* ]]; then zs=$(cd "${flags[0]#@}" && pwd)/zero; flags=("${flags[@]:1}"); fi
            envs=() # leading VAR=VALUE words: the ranks' environment (mpirun -x)
            while [[ ${flags[0]:-} =~ ^[A-Z_][A-Z0-9_]*= ]]; do envs+=(-x "${flags[0]}"); flags=("${flags[@]:1}"); done
            read -r -a extra <<<"${HR_ARGS:-}"
            log=$work/t_${rate}_${r}_${name//[^A-Za-z0-9]/_}.json
            if ! MN_TIMEOUT=1200 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 "${envs[@]}" -- "$zs" train --model "${HR_MODEL:-small}" \
                --seq "${HR_SEQ:-128}" --micro-batch "${HR_MB:-4}" --steps "${HR_STEPS:-6}" --val-every 0 \
                --val-batches 1 --log-json "$log" "${data_args[@]}" "${flags[@]}" "${extra[@]}" >"$work/o.txt" 2>&1; then
                echo "== $name failed: $(tail -2 "$work/o.txt") =="
                status=1
                continue
            fi
            python3 - "$log" "$rate round $r $name" "$name" "${HR_STEPS:-6}" >>"$work/medians_$rate" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in lines if "step_ms" in r]
done = [r for r in lines if r.get("done")][-1]
ms = [r["step_ms"] for r in recs][2:]
cw = [r.get("comm_wait_ms", 0) for r in recs][2:]
ag = done["comm"]["all_gather"] / float(sys.argv[4])
print("%s\t%.1f" % (sys.argv[3], statistics.median(ms)))
print("%-30s step ms median %6.0f (min %6.0f)  comm wait ms %6.0f  all-gather %7.2f MB/step  loss %.4f" %
      (sys.argv[2], statistics.median(ms), min(ms), statistics.median(cw), ag / 1e6, done["loss"]), file=sys.stderr)
PY
        done
    done
    python3 - "$work/medians_$rate" "$rate" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if "\t" in l]
names = []
for n, _ in rows:
    if n not in names: names.append(n)
med = {n: statistics.median(float(v) for m, v in rows if m == n) for n in names}
base = med[names[0]]
for n in names:
    print("%-8s %-14s median of rounds %7.0f ms  ratio to %s %.2f" % (sys.argv[2], n, med[n], names[0], med[n] / base))
PY
done
exit $status
