#!/usr/bin/env bash
# `zero train --save/--resume` across emulated hosts (tests/multinode/netns.sh), the checkpoint
# on the filesystem every host shares (as a cluster's shared directory): saved by 2 hosts x 2
# ranks at stage 3 and resumed on the same layout, bitwise as the straight run; then resumed
# on another layout and stage at each step (2x2 stage 3 -> hosts 1+2+1 stage 1 -> 3x2 stage 2
# -> one rank stage 0), each within 1e-4 of the one-rank straight run (global batch 12).
set -u
: "${ZERO:?set ZERO to the zero binary}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/netns.sh"
mn_prereq || { echo "SKIP: multinode tests: $MN_WHY"; exit 77; }
if "$ZERO" bench comm --max-bytes 1KiB 2>&1 | head -1 | grep -q "self backend"; then
    echo "SKIP: multinode tests: this zero was built without MPI"
    exit 77
fi
PY=/usr/bin/python3
data=/usr/share/games/fortunes
t0=$(date +%s)
mn_up 3 || { echo "FAIL: cannot make the emulated hosts"; exit 1; }
mn_shape 1gbit 50us || { echo "FAIL: cannot shape the links"; exit 1; }
echo "hosts: ${MN_HOSTS[*]}; links: $MN_SHAPED"
tmp=$MN_WORK
fail=0
check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
run() { # run NAME "LAYOUT" STAGE [args...]: global batch 12; a failure ends the test
    local name=$1 layout=$2 s=$3 n=0 x
    shift 3
    for x in $layout; do n=$((n + x)); done
    MN_TIMEOUT=240 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 -- "$ZERO" train --model tiny --seq 32 --data "$data" \
        --val-every 0 --lr 3e-3 --stage "$s" --micro-batch $((12 / n)) --log-json "$tmp/$name.json" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" || {
        echo "FAIL run $name: hosts ($layout) stage $s $*"; tail -20 "$tmp/$name.err"; exit 1; }
}
# fields NAME: "step loss grad_norm loss_scale skipped" of each step record, as printed
fields() {
    "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    if "\"step\"" in l:
        d = json.loads(l)
        print(d["step"], l.split("\"loss\":")[1].split(",")[0], d["grad_norm"], d["loss_scale"], d["skipped"])' "$tmp/$1.json"
}
same() { # same NAME REF FIRST: NAME's records are bitwise REF's from step FIRST on
    fields "$1" >"$tmp/$1.f"
    fields "$2" | awk -v f="$3" '$1 >= f' >"$tmp/$2.from$3"
    test -s "$tmp/$1.f" && cmp -s "$tmp/$1.f" "$tmp/$2.from$3" || { diff "$tmp/$1.f" "$tmp/$2.from$3" | head -6; return 1; }
}
near() { # near NAME REF STEPS: NAME logs exactly STEPS, each loss within 1e-4 relative of REF's
    fields "$2" >"$tmp/$2.f"
    test "$(fields "$1" | awk '{printf "%s ", $1}')" = "$3 " || { echo "steps: $(fields "$1" | awk '{printf "%s ", $1}')"; return 1; }
    fields "$1" | awk 'NR == FNR { ref[$1] = $2; next }
        { d = $2 - ref[$1]; if (d < 0) d = -d; if (!($1 in ref) || d > 1e-4 * ref[$1]) { print "step " $1 ": " $2 " vs " ref[$1]; bad = 1 } }
        END { exit bad }' "$tmp/$2.f" -
}
step_dir() { printf '%s/step_%08d' "$1" "$2"; }

run ref "1" 0 --steps 6
# same layout and stage: bitwise
run s3 "2 2" 3 --steps 6 --save-every 3 --save "$tmp/s3"
run s3r "2 2" 3 --steps 6 --resume "$(step_dir "$tmp/s3" 3)"
check "2 hosts x 2 stage 3: resume at 3 of 6 on the same layout (bitwise)" same s3r s3 4
check "resume says where it starts" grep -q "resumed from $(step_dir "$tmp/s3" 3) at step 3 of 6" "$tmp/s3r.err"
# another layout and stage at each step
check "2 hosts x 2 stage 3, steps 1-6, near one rank" near s3 ref "1 2 3 4 5 6"
run a "1 2 1" 1 --steps 4 --resume "$(step_dir "$tmp/s3" 3)" --save "$tmp/a"
check "2x2 stage 3 -> hosts 1+2+1 stage 1: step 4 within 1e-4" near a ref "4"
run b "2 2 2" 2 --steps 5 --resume "$tmp/a" --save "$tmp/b"
check "hosts 1+2+1 stage 1 -> 3x2 stage 2: step 5 within 1e-4" near b ref "5"
run c "1" 0 --steps 6 --resume "$tmp/b"
check "3x2 stage 2 -> one rank stage 0: step 6 within 1e-4" near c ref "6"
check "the 6-rank checkpoint holds one file per rank" test "$(ls "$(step_dir "$tmp/b" 5)"/*.safetensors | wc -l)" -eq 6
echo "multinode resume: $(($(date +%s) - t0)) s"
exit $fail
