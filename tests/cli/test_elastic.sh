#!/usr/bin/env bash
# `zero train --elastic MIN:MAX` and `--hostfile FILE` on this machine (cli/launch_elastic.c;
# docs/CLI.md "Elastic restarts"; across emulated hosts: tests/multinode/test_elastic.sh):
# - a rank killed mid-run (2 ranks, stage 2, --elastic 1:1): the launcher restarts the job from the
#   latest checkpoint, says so in one line, and the run ends with exit 0 at its last step; what it
#   trained after the restart is bitwise a plain run resumed from that checkpoint, the log holds a
#   restart record, and the checkpoint's latest is the last step;
# - with --max-restarts 0 the same kill ends the job: exit 1, one line naming the checkpoint;
# - --hostfile naming this machine runs the ranks as --ranks does (the same loss to the bit);
# - bad input: one line each, exit 2.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
. "$here/lib.sh" # check, expect_error, done_field
if "$ZERO" bench comm --max-bytes 1KiB 2>&1 | head -1 | grep -q "self backend"; then
    echo "SKIP: this zero was built without MPI"
    exit 77
fi

# --- bad input
T=(--model tiny --seq 16 --steps 2 --val-every 0)
bad() { # bad NAME ARGS...: runs zero train with ARGS (NAME: for the reader); $rc, $TMP/err
    shift
    "$ZERO" train "${T[@]}" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
}
bad nosave --elastic 1:2
expect_error "--elastic without --save" 2 "--elastic 1:2: expected --save DIR too"
bad order --elastic 3:1 --save ck
expect_error "--elastic 3:1" 2 "--elastic '3:1': expected MIN:MAX hosts"
bad word --elastic two --save ck
expect_error "--elastic two" 2 "--elastic 'two': expected MIN:MAX hosts"
bad min --elastic 2:3 --save ck
expect_error "--elastic 2:3 on this machine alone" 2 "MIN 2 is more hosts than the job has (1: this machine"
bad restarts --max-restarts 2
expect_error "--max-restarts without --elastic" 2 "--max-restarts 2: expected --elastic MIN:MAX too"
bad nofile --hostfile "$TMP/none"
expect_error "--hostfile that does not exist" 2 "--hostfile '$TMP/none': No such file"
printf '# only a comment\n\n' >empty.hosts
bad empty --hostfile empty.hosts
expect_error "--hostfile without hosts" 2 "no hosts in it"
printf 'a slots=2\nb slots=0\n' >zero.hosts
bad zero --hostfile zero.hosts
expect_error "slots=0" 2 "zero.hosts line 2: slots=0: expected a whole number in [1, 4096]"
printf 'a cpus=2\n' >cpus.hosts
bad cpus --hostfile cpus.hosts
expect_error "an unknown hostfile key" 2 "line 1: 'cpus' is not supported yet (zero reads slots and max_slots)"
printf 'a slots=4 max_slots=2\n' >max.hosts
bad max --hostfile max.hosts
expect_error "max_slots below slots" 2 "max_slots=2 is below slots=4"
printf 'a slots\n' >pair.hosts
bad pair --hostfile pair.hosts
expect_error "a key without a value" 2 "expected key=value after the host name"
printf 'localhost slots=2\n' >local.hosts
bad both --ranks 2 --hostfile local.hosts
expect_error "--ranks with --hostfile" 2 "--ranks 2 and --hostfile local.hosts"

# --- --hostfile on this machine: the --ranks run's numbers
G=(--model tiny --seq 32 --val-every 0 --lr 3e-3)
OMP_NUM_THREADS=1 "$ZERO" train "${G[@]}" --steps 5 --hostfile local.hosts --log-json hf.json >hf.out 2>hf.err
check "--hostfile localhost slots=2: exit 0" test $? -eq 0
OMP_NUM_THREADS=1 "$ZERO" train "${G[@]}" --steps 5 --ranks 2 --log-json r2.json >/dev/null 2>&1
check "--hostfile localhost slots=2: 2 ranks, the --ranks 2 run's loss to the bit" \
    test "$(done_field hf.json ranks) $(done_field hf.json loss)" = "2 $(done_field r2.json loss)"

# --- a rank killed mid-run
# kill_rank_at JOB STEP LOG: when LOG has STEP, kill -9 rank 1 (a zero process with that rank)
kill_rank_at() {
    local job=$1 step=$2 log=$3 p
    for _ in $(seq 600); do
        grep -q "\"step\":$step," "$log" 2>/dev/null && break
        kill -0 "$job" 2>/dev/null || return 1
        sleep 0.05
    done
    for p in $(pgrep -x zero); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" || continue
        grep -q "$TMP" "/proc/$p/cmdline" 2>/dev/null || continue # this test's job only
        kill -9 "$p" && return 0
    done
    return 1
}
steps() { # steps LOG [FROM]: "step loss grad_norm" of the step records after the restart record
    "$PY" -c '
import json, sys
on = len(sys.argv) > 2 # "all": every step record
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "elastic_restart" in d: on = True
    elif on and "step" in d: print(d["step"], l.split("\"loss\":")[1].split(",")[0], d["grad_norm"])' "$@"
}
E=("${G[@]}" --stage 2 --micro-batch 3 --steps 400 --save "$TMP/ck" --save-every 50)
OMP_NUM_THREADS=1 "$ZERO" train "${E[@]}" --ranks 2 --elastic 1:1 --log-json "$TMP/el.json" >el.out 2>el.err &
job=$!
kill_rank_at $job 60 "$TMP/el.json"
check "rank 1 killed at step 60" test $? -eq 0
wait $job
rc=$?
grep -v "^step" el.err | sed 's/^/     | /'
check "the elastic run: exit 0 (got $rc)" test $rc -eq 0
check "one restart line: 2 ranks -> 2 ranks on this machine, from a checkpoint" \
    grep -Eq "^zero: elastic restart 1 of at most 3: the job on 2 ranks \(this machine\) failed \(exit status [0-9]+.*\); resuming $TMP/ck/step_[0-9]{8} \(step [0-9]+\) on 2 ranks \(this machine\)$" el.err
check "one restart, no more" test "$(grep -c "elastic restart" el.err)" = 1
from=$("$PY" -c 'import json, sys
print([json.loads(l) for l in open(sys.argv[1]) if "elastic_restart" in l][0]["from_step"])' el.json 2>/dev/null)
check "the log's restart record: restart 1, world 2 before and after, from a checkpoint's step ($from)" \
    grep -Eq '^\{"elastic_restart":1,"world_before":2,"world":2,"from_step":(50|100|150|200|250|300|350)\}$' el.json
steps el.json >after.steps
OMP_NUM_THREADS=1 "$ZERO" train "${G[@]}" --stage 2 --micro-batch 3 --steps 400 --ranks 2 \
    --resume "$(printf '%s/step_%08d' "$TMP/ck" "${from:-0}")" --log-json ref.json >/dev/null 2>ref.err
steps ref.json all >ref.steps
check "after the restart: steps $((from + 1))-400, bitwise a plain run resumed from step $from" \
    bash -c 'test -s "$1" && cmp -s "$1" "$2" && test "$(head -1 "$1" | cut -d" " -f1)" = $(($3 + 1))' c after.steps ref.steps "${from:-0}"
check "the checkpoint's latest is step 400" grep -qx "step_00000400" ck/latest
check "the done record: 400 steps" test "$(done_field el.json steps)" = 400

# --- --max-restarts 0: the first failure ends the job
OMP_NUM_THREADS=1 "$ZERO" train "${E[@]}" --save "$TMP/ck0" --ranks 2 --elastic 1 --max-restarts 0 \
    --log-json "$TMP/m0.json" >m0.out 2>m0.err &
job=$!
kill_rank_at $job 60 "$TMP/m0.json"
wait $job
rc=$?
check "--max-restarts 0: exit 1 (got $rc)" test $rc -eq 1
check "--max-restarts 0: one line, the checkpoint to continue from" \
    grep -q "^zero: error: --elastic 1:1: the job failed (exit status .*) and its 0 restarts (--max-restarts) are used up; continue with --resume $TMP/ck0$" m0.err
check "--max-restarts 0: no restart" bash -c '! grep -q "elastic restart" "$1"' m m0.err
exit $fail
