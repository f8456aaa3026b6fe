#!/usr/bin/env bash
# clang-format (layout) and clang-tidy (bugs) over the files of scripts/format-checked.txt, with
# the project's .clang-format and .clang-tidy; clang-tidy reads the compile commands of BUILD
# (default build/, so run it after `make build`) and skips files that are not compiled there (the
# fuzz targets: the fuzz build compiles them with clang's -Werror). Exit 1 on any finding.
# usage: bash scripts/lint.sh [--format-only]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FMT=$(command -v clang-format-14 || command -v clang-format) || { echo "zero: error: lint: clang-format is not installed" >&2; exit 1; }
TIDY=$(command -v clang-tidy-14 || command -v clang-tidy) || { echo "zero: error: lint: clang-tidy is not installed" >&2; exit 1; }
list=$(grep -v '^#' scripts/format-checked.txt | grep .)
if [ "$list" = ALL ]; then list=$(git ls-files '*.c' '*.h'); fi
fail=0
nf=0
for f in $list; do
    [ -f "$f" ] || { echo "zero: error: lint: $f (in scripts/format-checked.txt) does not exist" >&2; fail=1; continue; }
    nf=$((nf + 1))
    if ! "$FMT" --style=file --dry-run --Werror "$f" 2>/dev/null; then
        echo "zero: error: lint: $f is not formatted as .clang-format says (clang-format -i $f):" >&2
        "$FMT" --style=file "$f" | diff -u "$f" - | head -20 >&2
        fail=1
    fi
done
echo "clang-format: $nf files checked"
[ "${1:-}" = --format-only ] && exit $fail
[ -f "$BUILD/compile_commands.json" ] || { echo "zero: error: lint: no $BUILD/compile_commands.json (make build first)" >&2; exit 1; }
tidy_files=()
for f in $list; do
    case $f in *.c) grep -qF "\"$PWD/$f\"" "$BUILD/compile_commands.json" && tidy_files+=("$f") ;; esac
done
if [ ${#tidy_files[@]} -gt 0 ]; then
    if ! printf '%s\n' "${tidy_files[@]}" | xargs -P "$(nproc)" -n 1 "$TIDY" -p "$BUILD" --quiet >"$BUILD/clang-tidy.log" 2>&1; then
        echo "zero: error: lint: clang-tidy found problems:" >&2
        grep -E "(error|warning):" "$BUILD/clang-tidy.log" >&2
        fail=1
    fi
fi
echo "clang-tidy: ${#tidy_files[@]} files checked"
exit $fail
