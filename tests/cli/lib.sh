# tests/cli/lib.sh — sourced by the CLI tests (. "$(dirname "$0")/lib.sh"): the one check helper.
# check NAME COMMAND...: runs COMMAND; prints "ok   NAME", or "FAIL NAME" and sets fail=1 (the
# test exits with $fail at its end).
check() {
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
