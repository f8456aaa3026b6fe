#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan+UBSan, coverage) in build-fuzz/, runs
# every committed seed of tests/fuzz/corpus/<target>/ once (the regression seeds), then fuzzes each
# target for SECONDS (default 12) from a copy of its corpus. A crash, a leak or a timeout fails the
# script; the input is kept in build-fuzz/crashes/<target>/ (fix the bug, then commit the input to
# tests/fuzz/corpus/<target>/ as a regression seed).
# usage: bash scripts/fuzz.sh [SECONDS] [TARGET...]     (CI: bash scripts/fuzz.sh 12)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-12}
shift || true
# every target of tests/fuzz (fuzz_NAME.c, its corpus in tests/fuzz/corpus/NAME/)
all=$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//' | tr '\n' ' ')
targets=${*:-$all}
B=${FUZZ_BUILD:-build-fuzz}
CC=${FUZZ_CC:-$(command -v clang-14 || command -v clang)}
cmake -S . -B "$B" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZERO_FUZZ=ON -DZERO_MPI=OFF \
    -DZERO_CUDA=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$B" -j "$(nproc)" --target $(printf 'fuzz_%s ' $targets) >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
status=0
for t in $targets; do
    bin="$B/tests/fuzz_$t"
    seeds=(tests/fuzz/corpus/"$t"/*)
    mkdir -p "$B/crashes/$t"
    work=$(mktemp -d)
    cp "${seeds[@]}" "$work/"
    echo "fuzz_$t: ${#seeds[@]} seeds, then ${secs}s"
    if ! "$bin" -runs=0 "${seeds[@]}" >"$B/fuzz_$t.log" 2>&1 ||
        ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$B/crashes/$t/" \
            -print_final_stats=1 "$work" >>"$B/fuzz_$t.log" 2>&1; then
        echo "zero: error: fuzz_$t failed: the input is in $B/crashes/$t/; the log is $B/fuzz_$t.log:" >&2
        grep -m 20 -E "ERROR|SUMMARY|^ +#[0-9]" "$B/fuzz_$t.log" >&2 || tail -20 "$B/fuzz_$t.log" >&2
        status=1
    else
        grep -E "^stat::number_of_executed_units|^Done [0-9]+ runs" "$B/fuzz_$t.log" | tail -1 | sed "s/^/  /"
    fi
    rm -rf "$work"
done
exit $status
