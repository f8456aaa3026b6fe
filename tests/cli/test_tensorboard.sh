#!/usr/bin/env bash
# `zero train --tensorboard DIR` and the config's tensorboard section: the event file's every
# record (framing, masked CRC32C, the version record, each scalar's tag, step and value) checked
# against the run's --log-json records by scripts/check_tfevents.py, an independent reader in
# plain Python; rank 0 alone writes; a second run adds a new file and leaves the first as it was;
# a directory that cannot be made is one error line (exit 1).
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$HERE/../../scripts/check_tfevents.py"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; return 1; fi
}
one_file() { # one_file DIR: the single event file in DIR
    local f=("$1"/events.out.tfevents.*)
    [ ${#f[@]} -eq 1 ] && [ -f "${f[0]}" ] && echo "${f[0]}"
}

"$ZERO" train --model tiny --seq 32 --steps 6 --val-every 2 --tensorboard "$TMP/tb/a" --log-json "$TMP/a.jsonl" \
    >/dev/null 2>"$TMP/err" || { echo "FAIL train --tensorboard: $(cat "$TMP/err")"; exit 1; }
ev=$(one_file "$TMP/tb/a") || { echo "FAIL --tensorboard: not one event file in $TMP/tb/a"; ls -la "$TMP/tb/a"; exit 1; }
check "--tensorboard: records, CRCs, tags, steps and values as the log has them" "$PY" "$CHECK" "$ev" "$TMP/a.jsonl"
check "the name: events.out.tfevents.<10-digit unix time>.<hostname>.<pid>" \
    grep -qE "/events\.out\.tfevents\.[0-9]{10}\.$(hostname)\.[0-9]+$" <<<"$ev"
# 6 steps x 6 scalars + 3 validations + the version record: 40 records
check "40 records (6 steps x 6 scalars, 3 eval losses, the version)" \
    bash -c "'$PY' '$CHECK' '$ev' '$TMP/a.jsonl' | grep -q '^ok 40 records, CRCs good, 39 scalars'"
# a broken byte is found: the checker is not a rubber stamp
cp "$ev" "$TMP/broken"
printf '\x7f' | dd of="$TMP/broken" bs=1 seek=100 conv=notrunc 2>/dev/null
check "a flipped byte fails the check" bash -c "! '$PY' '$CHECK' '$TMP/broken' '$TMP/a.jsonl' >/dev/null"

# the config's section, DeepSpeed's way: output_path/job_name
cat >"$TMP/ds.json" <<JSON
{"tensorboard": {"enabled": true, "output_path": "$TMP/runs", "job_name": "job1"}}
JSON
"$ZERO" train --model tiny --seq 32 --steps 4 --val-every 0 --config "$TMP/ds.json" --log-json "$TMP/b.jsonl" \
    >/dev/null 2>"$TMP/err" || { echo "FAIL train --config: $(cat "$TMP/err")"; exit 1; }
ev=$(one_file "$TMP/runs/job1") && check "config: output_path/job_name, checked against the log" "$PY" "$CHECK" "$ev" "$TMP/b.jsonl" ||
    { echo "FAIL config: not one event file in $TMP/runs/job1"; fail=1; }

# a second run into the same directory: a file of its own, the first untouched
cp "$ev" "$TMP/first"
"$ZERO" train --model tiny --seq 32 --steps 2 --config "$TMP/ds.json" >/dev/null 2>"$TMP/err" ||
    { echo "FAIL second run: $(cat "$TMP/err")"; fail=1; }
n=$(ls "$TMP/runs/job1" | grep -c '^events\.out\.tfevents\.')
check "a second run: a second file ($n)" test "$n" -eq 2
check "... the first as it was" cmp -s "$ev" "$TMP/first"

# two ranks: rank 0 alone writes
"$ZERO" train --model tiny --seq 32 --steps 3 --ranks 2 --tensorboard "$TMP/tb2" --log-json "$TMP/c.jsonl" \
    >/dev/null 2>"$TMP/err" || { echo "FAIL train --ranks 2: $(cat "$TMP/err")"; fail=1; }
ev=$(one_file "$TMP/tb2") && check "--ranks 2: one file, as the log has it" "$PY" "$CHECK" "$ev" "$TMP/c.jsonl" ||
    { echo "FAIL --ranks 2: not one event file"; ls -la "$TMP/tb2"; fail=1; }

# a path through a regular file: one error line, exit 1
: >"$TMP/plain"
"$ZERO" train --model tiny --seq 32 --steps 1 --tensorboard "$TMP/plain/x" >/dev/null 2>"$TMP/err"
rc=$?
check "a directory that cannot be made: exit 1 ($rc)" test "$rc" -eq 1
check "... one line: zero: error: --tensorboard: ... $(head -1 "$TMP/err")" \
    bash -c "[ \$(wc -l <'$TMP/err') -eq 1 ] && grep -qx \"zero: error: --tensorboard: '$TMP/plain' is not a directory\" '$TMP/err'"
exit $fail
