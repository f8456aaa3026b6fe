#!/usr/bin/env bash
# `make bench`: every benchmark of zero in one command (bench comm, adam, step, the progress
# thread's A/B, io when this build has it, the collectives across emulated hosts and the planner's
# step time against training there), each printing its figures and ratios; docs/BENCHMARKS.md
# records and explains them.
# Usage: scripts/bench.sh [BUILD_DIR]; ZERO_BENCH_STEP_ARGS adds flags to bench step (e.g. --repeat 3).
set -uo pipefail
build=${1:-build}
zero="$build/zero"
[ -x "$zero" ] || { echo "scripts/bench.sh: $zero not found (make build first)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

status=0
run() {
    echo "== zero $* =="
    "$zero" "$@"
    local rc=$?
    if [ $rc -ne 0 ]; then echo "== zero $*: failed (exit $rc) =="; status=1; fi
    echo
}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg) =="
echo
run bench comm --ranks 2
run bench adam
# shellcheck disable=SC2086 # word splitting of the extra flags is wanted
run bench step ${ZERO_BENCH_STEP_ARGS:-}
echo "== bench/progress_thread.sh $build =="
bash "$(dirname "$0")/../bench/progress_thread.sh" "$build" || { echo "== bench/progress_thread.sh: failed =="; status=1; }
echo
# bench io fails with "not supported yet" until it exists
if "$zero" bench io --help >/dev/null 2>&1; then run bench io; fi
# collectives across emulated hosts at 1 and 10 Gbit/s (network namespaces: root only)
if [ "$(id -u)" -eq 0 ]; then
    echo "== bench/multinode_comm.sh $build =="
    bash "$(dirname "$0")/../bench/multinode_comm.sh" "$build"
    case $? in
    0) ;;
    77) echo "== bench/multinode_comm.sh: skipped (no network namespaces here) ==" ;;
    *) echo "== bench/multinode_comm.sh: failed =="; status=1 ;;
    esac
    # the planner's predicted step time against zero train on the same emulated hosts
    echo "== bench/plan_validate.sh $build =="
    bash "$(dirname "$0")/../bench/plan_validate.sh" "$build"
    case $? in
    0) ;;
    77) echo "== bench/plan_validate.sh: skipped (no network namespaces here) ==" ;;
    *) echo "== bench/plan_validate.sh: failed =="; status=1 ;;
    esac
else
    echo "== bench/multinode_comm.sh, bench/plan_validate.sh: skipped (need root to emulate hosts with network namespaces) =="
fi
echo
echo "== load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) =="
exit $status
