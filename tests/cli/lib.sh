# tests/cli/lib.sh — sourced by the CLI tests (. "$(dirname "$0")/lib.sh"): the check helper, and
# expect_error and done_field for the tests that do not define their own.
# check NAME COMMAND...: runs COMMAND; prints "ok   NAME", or "FAIL NAME" and sets fail=1 (the
# test exits with $fail at its end).
check() {
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
# expect_error NAME STATUS NEEDLE...: the last command's status ($rc) is STATUS and its stderr
# ($TMP/err) one line holding every NEEDLE (printed when it is not one line).
expect_error() {
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(grep -c . "$TMP/err")" -eq 1
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
    [ "$(grep -c . "$TMP/err")" -eq 1 ] || cat "$TMP/err"
}
# done_field FILE KEY...: a key path of the final {"done": true} record of a --log-json file.
done_field() {
    /usr/bin/python3 -c "import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '\"done\"' in l][-1]
for k in sys.argv[2:]: r = r[k]
print(r)" "$@"
}
