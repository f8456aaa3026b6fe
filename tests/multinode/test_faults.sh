#!/usr/bin/env bash
# A rank killed on one emulated host (tests/multinode/netns.sh) ends `zero train` on every host:
# mpirun exits non-zero within 60 s naming the rank, the host and the signal, no process of the
# job is left on any host, and no "done" record is written; before the kill, every rank ignores
# SIGPIPE (a peer's death must not kill the others by a signal of their own). Cases: one rank on a host other than
# mpirun's (2 hosts x 2, stage 3, in the middle of its gathers), a rank on mpirun's own host
# (3 hosts x 1, stage 1), and a whole host at once (its daemon and ranks: a crashed machine).
# A rank stopped (SIGSTOP) alone on its host, with no node peer to see its heartbeat page, ends the
# job within ZERO_COMM_HEARTBEAT=3 s through the heartbeats across nodes (UDP), with one line
# naming it and its host (before them it waited out ZERO_COMM_TIMEOUT, set to 60 here); a healthy
# 2-host run under a 1 s heartbeat limit finishes.
set -u
: "${ZERO:?set ZERO to the zero binary}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/netns.sh"
mn_prereq || { echo "SKIP: multinode tests: $MN_WHY"; exit 77; }
if "$ZERO" bench comm --max-bytes 1KiB 2>&1 | head -1 | grep -q "self backend"; then
    echo "SKIP: multinode tests: this zero was built without MPI"
    exit 77
fi
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


# sigpipe_ignored: every zero rank of the job, on every host, ignores SIGPIPE (bit 13 of SigIgn),
# so that a write to the socket of a peer that died fails instead of killing the writer (whose
# signal mpirun could then name before the victim's: seen once in CI as exit 141)
sigpipe_ignored() {
    local i p n=0 mask
    for i in "${!MN_HOSTS[@]}"; do
        for p in $(ip netns pids "${MN_HOSTS[$i]}"); do
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = zero ] || continue
            mask=$(awk '/^SigIgn:/ {print $2}' "/proc/$p/status" 2>/dev/null)
            [ -n "$mask" ] && (((0x$mask >> 12) & 1)) || { echo "     rank pid $p: SigIgn $mask"; return 1; }
            n=$((n + 1))
        done
    done
    [ "$n" -gt 0 ]
}

# case NAME "LAYOUT" STAGE HOST RANK|all: start a long run, wait for its second step, kill
# rank RANK on host HOST (or every process on HOST), then the job must end everywhere.
case_kill() {
    local name=$1 layout=$2 s=$3 host=$4 victim=$5 n=0 x
    for x in $layout; do n=$((n + x)); done
    MN_TIMEOUT=120 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 -- "$ZERO" train --model tiny --seq 32 --data "$data" \
        --steps 100000 --val-every 0 --stage "$s" --micro-batch $((12 / n)) --log-json "$tmp/$name.json" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    local job=$! i
    for i in $(seq 300); do
        grep -q '"step":2,' "$tmp/$name.json" 2>/dev/null && break
        sleep 0.2
    done
    if ! grep -q '"step":2,' "$tmp/$name.json" 2>/dev/null; then
        echo "FAIL $name: the run did not reach step 2"; tail -5 "$tmp/$name.err"; kill "$job"; wait "$job"; fail=1; return
    fi
    check "$name: every rank ignores SIGPIPE" sigpipe_ignored
    local t1 pids what
    t1=$(date +%s%N)
    if [ "$victim" = all ]; then
        pids=$(ip netns pids "${MN_HOSTS[$host]}")
        what="every process on ${MN_HOSTS[$host]}"
    else
        pids=$(mn_pid_of_rank "$host" "$victim") || { echo "FAIL $name: rank $victim not found on ${MN_HOSTS[$host]}"; fail=1; return; }
        what="rank $victim on ${MN_HOSTS[$host]}"
    fi
    # shellcheck disable=SC2086 # one pid per word
    kill -9 $pids
    wait "$job"
    local rc=$? dt
    dt=$((($(date +%s%N) - t1) / 1000000)) # ms
    echo "     $name: killed $what after step $(grep -c '"step"' "$tmp/$name.json"); mpirun exit $rc after $dt ms"
    sed 's/^/     | /' "$tmp/$name.err" | grep -v "^     | *$" | grep -iv "^     | step\|^     | zero train:" | head -12
    # (mpirun passes on the killed rank's status, 137 = signal 9, as timeout's KILL would: the
    # time tells them apart)
    check "$name: the job failed (exit $rc) within 60 s (not the harness's 120 s timeout)" \
        test "$rc" -ne 0 -a "$rc" -ne 124 -a "$dt" -lt 60000
    check "$name: no record of a finished run" bash -c '! grep -q "\"done\"" "$1"' mn "$tmp/$name.json"
    local left=""
    for i in "${!MN_HOSTS[@]}"; do left="$left$(ip netns pids "${MN_HOSTS[$i]}")"; done
    check "$name: no process of the job left on any host" test -z "$left"
    if [ "$victim" = all ]; then
        check "$name: the message names the lost host" grep -q "${MN_HOSTS[$host]}" "$tmp/$name.err"
    else
        check "$name: the message names the rank, the host and the signal" \
            grep -Eq "rank $victim .*on node ${MN_HOSTS[$host]} exited on signal 9" "$tmp/$name.err"
    fi
}

# case_stop NAME "LAYOUT" STAGE HOST RANK: as case_kill, but rank RANK on host HOST is stopped
# (SIGSTOP), not killed: it closes no socket, so only a heartbeat tells the others.
case_stop() {
    local name=$1 layout=$2 s=$3 host=$4 victim=$5 n=0 x
    for x in $layout; do n=$((n + x)); done
    MN_TIMEOUT=120 mn_mpirun "$layout" -x ZERO_COMM_ASYNC=0 -x ZERO_COMM_HEARTBEAT=3 -x ZERO_COMM_TIMEOUT=60 -- \
        "$ZERO" train --model tiny --seq 32 --data "$data" --steps 100000 --val-every 0 --stage "$s" \
        --micro-batch $((12 / n)) --log-json "$tmp/$name.json" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    local job=$! i pid
    for i in $(seq 300); do
        grep -q '"step":2,' "$tmp/$name.json" 2>/dev/null && break
        sleep 0.2
    done
    if ! grep -q '"step":2,' "$tmp/$name.json" 2>/dev/null; then
        echo "FAIL $name: the run did not reach step 2"; tail -5 "$tmp/$name.err"; kill "$job"; wait "$job"; fail=1; return
    fi
    pid=$(mn_pid_of_rank "$host" "$victim") || { echo "FAIL $name: rank $victim not found on ${MN_HOSTS[$host]}"; fail=1; return; }
    local t1
    t1=$(date +%s%N)
    kill -STOP "$pid"
    wait "$job"
    local rc=$? dt
    dt=$((($(date +%s%N) - t1) / 1000000)) # ms
    echo "     $name: stopped rank $victim (pid $pid) on ${MN_HOSTS[$host]}; mpirun exit $rc after $dt ms"
    sed 's/^/     | /' "$tmp/$name.err" | grep -v "^     | *$" | grep -iv "^     | step\|^     | zero train:" | head -8
    # 3 s of heartbeat, a tick, the launcher's teardown: well under ZERO_COMM_TIMEOUT's 60 s
    check "$name: the job failed (exit $rc) within 20 s (not ZERO_COMM_TIMEOUT's 60 s)" \
        test "$rc" -ne 0 -a "$rc" -ne 124 -a "$dt" -lt 20000
    check "$name: one line names the stopped rank, its pid and its host" \
        grep -q "rank $victim (pid $pid, on another node: ${MN_HOSTS[$host]}) has sent no heartbeat" "$tmp/$name.err"
    check "$name: not the timeout's line" bash -c '! grep -q "of ZERO_COMM_TIMEOUT" "$1"' mn "$tmp/$name.err"
    local left=""
    for i in "${!MN_HOSTS[@]}"; do left="$left$(ip netns pids "${MN_HOSTS[$i]}")"; done
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086 # one pid per word
        kill -CONT $left 2>/dev/null
    fi
    check "$name: no process of the job left on any host" test -z "$left"
}

# case_healthy NAME "LAYOUT": a run across hosts under ZERO_COMM_HEARTBEAT=1 finishes.
case_healthy() {
    local name=$1 layout=$2 rc
    MN_TIMEOUT=300 mn_mpirun "$layout" -x ZERO_COMM_HEARTBEAT=1 -- "$ZERO" train --model tiny --seq 32 \
        --data "$data" --steps 120 --val-every 0 --stage 3 --micro-batch 6 --log-json "$tmp/$name.json" \
        >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    [ "$rc" -eq 0 ] || sed 's/^/     | /' "$tmp/$name.err" | tail -5
    check "$name: a 2-host run under a 1 s heartbeat limit finishes (exit $rc)" test "$rc" -eq 0
    check "$name: its record says done" grep -q '"done"' "$tmp/$name.json"
}

case_stop stopped "2 1" 2 1 2
case_healthy healthy "1 1"
case_kill remote "2 2" 3 1 3
case_kill local "1 1 1" 1 0 0
case_kill host "2 1 2" 2 2 all
echo "multinode faults: $(($(date +%s) - t0)) s"
exit $fail
