#!/usr/bin/env bash
# `zero train --elastic 1:3 --hostfile FILE` across 3 emulated hosts (tests/multinode/netns.sh),
# stage 3, global batch 6, a checkpoint every 20 steps:
#   1. host 2 goes down mid-run (every process on it killed and its link cut at once, so that no
#      peer sees a connection close: a crashed machine): the launcher restarts the job from the
#      latest checkpoint on hosts 0 and 1 (3 -> 2 ranks);
#   2. host 2's link comes back and, 30 steps into restart 1, rank 1 is killed: the next restart
#      takes host 2 again (2 -> 3 ranks);
#   3. rank 1 is killed while that restart starts: restarted again, on the same 3 hosts.
# Each restart is one line naming the step it resumes, the world before and after; the run ends
# with every step to 400 and exit 0. What each restart trained equals, bitwise, a plain run on its
# hosts resumed from the same checkpoint (no data lost, none trained twice: the global batch and
# the data order are the checkpoint's). Bad input: MIN above the hosts, --elastic under mpirun.
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
printf '%s slots=1\n' "${MN_HOSTS[@]}" >"$tmp/hosts"
common=(--model tiny --seq 32 --data "$data" --val-every 0 --lr 3e-3 --stage 3 --print-every 50)

# wait_for PATTERN FILE SECONDS
wait_for() {
    local i
    for i in $(seq $((${3} * 10))); do
        grep -q "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "     timed out waiting for '$1' in $2"
    return 1
}

# --- bad input
MN_TIMEOUT=60 mn_launch 0 "$ZERO" train "${common[@]}" --steps 2 --save "$tmp/x" --elastic 4:4 \
    --hostfile "$tmp/hosts" >"$tmp/bad1.out" 2>"$tmp/bad1.err"
rc=$?
check "--elastic 4:4 on 3 hosts: usage error naming MIN and the hosts (exit $rc)" \
    bash -c '[ "$1" = 2 ] && grep -q "MIN 4 is more hosts than the job has (3 in --hostfile" "$2"' bad "$rc" "$tmp/bad1.err"
MN_TIMEOUT=60 mn_mpirun "1 1" -- "$ZERO" train "${common[@]}" --steps 2 --save "$tmp/x" --elastic 1:2 \
    >"$tmp/bad2.out" 2>"$tmp/bad2.err"
rc=$?
check "--elastic under mpirun: refused (exit $rc)" \
    bash -c '[ "$1" != 0 ] && grep -q "zero.s own launcher starts and restarts the ranks" "$2"' bad "$rc" "$tmp/bad2.err"

# --- the elastic run
ZERO_ELASTIC_PROBE_TIMEOUT=10 MN_TIMEOUT=600 mn_launch 0 env ZERO_ELASTIC_PROBE_TIMEOUT=10 "$ZERO" train "${common[@]}" \
    --micro-batch 2 --steps 400 --save "$tmp/ck" --save-every 20 --elastic 1:3 --max-restarts 5 \
    --hostfile "$tmp/hosts" --log-json "$tmp/el.json" >"$tmp/el.out" 2>"$tmp/el.err" &
job=$!
ok=1
wait_for '"step":45,' "$tmp/el.json" 120 || ok=0
if [ $ok = 1 ]; then
    echo "     host 2 down after step $(grep -c '"step"' "$tmp/el.json")"
    # shellcheck disable=SC2046 # one pid per word
    kill -9 $(ip netns pids "${MN_HOSTS[2]}")
    mn_cut 2
    wait_for "elastic restart 1 " "$tmp/el.err" 120 || ok=0
fi
if [ $ok = 1 ]; then # 30 steps on 2 hosts; host 2's link back; then rank 1 killed
    wait_for '"elastic_restart":1' "$tmp/el.json" 120 || ok=0
    from1=$(grep -o '"elastic_restart":1,[^}]*"from_step":[0-9]*' "$tmp/el.json" | grep -o '[0-9]*$')
    mn_relink 2 || echo "     host 2's link did not come back"
    wait_for "\"step\":$((from1 + 30))," "$tmp/el.json" 120 || ok=0
    p=$(mn_pid_of_rank 1 1) && kill -9 "$p"
    echo "     restart 1 at step $(grep -o "\"step\":[0-9]*" "$tmp/el.json" | tail -1 | cut -d: -f2): rank 1 killed"
    wait_for "elastic restart 2 " "$tmp/el.err" 120 || ok=0
fi
if [ $ok = 1 ]; then # kill rank 1 as soon as the restarted job has it
    for _ in $(seq 300); do p=$(mn_pid_of_rank 1 1) && break; sleep 0.02; done
    echo "     restart 2 started: killing rank 1 (pid ${p:-none})"
    [ -n "${p:-}" ] && kill -9 "$p"
fi
wait "$job"
rc=$?
grep -v "^step" "$tmp/el.err" | sed 's/^/     | /'
check "the elastic run ends with exit 0 (got $rc)" test "$rc" = 0
check "restart 1: at most 3 of 5, 3 ranks -> 2 ranks, host 2 named as not answering" \
    grep -Eq "elastic restart 1 of at most 5: the job on 3 ranks .* on 2 ranks \(${MN_HOSTS[0]} ${MN_HOSTS[1]}; ${MN_HOSTS[2]}: no answer in 10 s\)" "$tmp/el.err"
check "restart 2: host 2 is back, 2 ranks -> 3 ranks" \
    grep -Eq "elastic restart 2 of at most 5: the job on 2 ranks .* on 3 ranks \(${MN_HOSTS[0]} ${MN_HOSTS[1]} ${MN_HOSTS[2]}\)$" "$tmp/el.err"
check "restart 3 (rank 1 killed while restart 2 started): 3 ranks -> 3 ranks" \
    grep -Eq "elastic restart 3 of at most 5: the job on 3 ranks .* on 3 ranks \(${MN_HOSTS[0]} ${MN_HOSTS[1]} ${MN_HOSTS[2]}\)$" "$tmp/el.err"

# Each restart's stretch of the log against a plain run resumed from its checkpoint on its hosts.
"$PY" - "$tmp/el.json" "$tmp" <<'PYEOF'
import json, sys
seg, out = None, {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "elastic_restart" in d:
        seg = d; out[d["elastic_restart"]] = {"from": d["from_step"], "world": d["world"], "steps": []}
    elif "step" in d and seg is not None:
        out[seg["elastic_restart"]]["steps"].append((d["step"], line.split('"loss":')[1].split(",")[0], d["grad_norm"]))
for k, v in out.items():
    with open(f"{sys.argv[2]}/seg{k}", "w") as f:
        print(v["from"], v["world"], file=f)
        for s in v["steps"]:
            print(*s, file=f)
PYEOF
for k in 1 2 3; do
    if [ ! -s "$tmp/seg$k" ]; then # restart 2 was killed as it started: before its first record, maybe
        [ $k = 2 ] && { echo "     restart 2 was stopped before it wrote to the log"; continue; }
        echo "FAIL restart $k: no record of it in the log"; fail=1; continue
    fi
    read -r from world <"$tmp/seg$k"
    layout="1 1"
    [ "$world" = 3 ] && layout="1 1 1"
    # the restart keeps the global batch 6 with the largest micro-batch up to --micro-batch 2
    # that divides a rank's share: 1 x 3 on 2 ranks, 2 x 1 on 3
    share=$((6 / world)) b=2
    while [ $((share % b)) != 0 ]; do b=$((b - 1)); done
    tail -n +2 "$tmp/seg$k" >"$tmp/seg$k.steps"
    n=$(wc -l <"$tmp/seg$k.steps")
    [ "$n" -gt 0 ] || { echo "     restart $k trained no step before the next (from step $from)"; continue; }
    last=$(tail -1 "$tmp/seg$k.steps" | cut -d' ' -f1)
    MN_TIMEOUT=300 mn_mpirun "$layout" -- "$ZERO" train "${common[@]}" --steps "$last" \
        --micro-batch $b --grad-accum $((share / b)) --resume "$(printf '%s/step_%08d' "$tmp/ck" "$from")" --log-json "$tmp/ref$k.json" >/dev/null 2>"$tmp/ref$k.err" ||
        { echo "FAIL reference run $k"; tail -5 "$tmp/ref$k.err"; fail=1; continue; }
    "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "step" in d: print(d["step"], l.split("\"loss\":")[1].split(",")[0], d["grad_norm"])' "$tmp/ref$k.json" >"$tmp/ref$k.steps"
    check "restart $k: steps $((from + 1))-$last on $world ranks bitwise a plain run resumed from step $from ($n steps)" \
        cmp -s "$tmp/seg$k.steps" "$tmp/ref$k.steps"
done
check "the last stretch reaches step 400" bash -c 'tail -1 "$1" | grep -q "^400 "' l "$tmp/seg3.steps"
check "the checkpoint's latest is step 400" grep -qx "step_00000400" "$tmp/ck/latest"
check "one done record, of 400 steps on 3 ranks" \
    bash -c '[ "$(grep -c "\"done\"" "$1")" = 1 ] && grep -q "\"done\":true,\"steps\":400,\"ranks\":3" "$1"' d "$tmp/el.json"
echo "multinode elastic: $(($(date +%s) - t0)) s"
exit $fail
