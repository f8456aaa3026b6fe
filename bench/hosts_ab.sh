#!/usr/bin/env bash
# bench/hosts_ab.sh — two builds of zero side by side on emulated hosts (tests/multinode/netns.sh):
# `zero train` at the given stages with each build, interleaved over rounds, on links shaped to
# each rate (bench/hosts_runs.sh with a set per build and stage: per run the median step time,
# exposed communication, all-gather bytes and final loss; per rate each set's median and its ratio
# to the first), so that a change in the engine's communication is measured against its parent on
# the same hosts in one run.
# Usage (as root): bench/hosts_ab.sh BUILD_A BUILD_B; exit 77 (and why) where hosts cannot be emulated.
#   AB_RATES (default "1gbit"), AB_LAYOUT ranks per host (default "1 1"), AB_STAGES (default "1 3"),
#   AB_ROUNDS (default 2), AB_MODEL/AB_SEQ/AB_MB (default small, 128, 4), AB_STEPS (default 6)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: bench/hosts_ab.sh BUILD_A BUILD_B" >&2; exit 2; }
a=$(cd "$1" 2>/dev/null && pwd) && b=$(cd "$2" 2>/dev/null && pwd) || { echo "bench/hosts_ab.sh: $1 or $2 not found" >&2; exit 2; }
sets=()
for s in ${AB_STAGES:-1 3}; do sets+=("A-stage$s=@$a --stage $s" "B-stage$s=@$b --stage $s"); done
HR_RATES=${AB_RATES:-1gbit} HR_LAYOUT=${AB_LAYOUT:-1 1} HR_ROUNDS=${AB_ROUNDS:-2} HR_MODEL=${AB_MODEL:-small} \
    HR_SEQ=${AB_SEQ:-128} HR_MB=${AB_MB:-4} HR_STEPS=${AB_STEPS:-6} exec "$root/bench/hosts_runs.sh" "$a" "${sets[@]}"
