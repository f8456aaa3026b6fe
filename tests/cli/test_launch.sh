#!/usr/bin/env bash
# The `--ranks N` launcher: far more ranks than the CPUs the process may use are refused (exit 2,
# one line, nothing started) unless --oversubscribe; mpiexec failing by itself says so; a rank
# killed by a signal (SIGKILL, SIGSEGV) is named in one `zero: error: rank R ...` line with the
# signal, without mpiexec's banners, and the run ends with exit 1; SIGTERM or SIGINT to the launcher stops every rank and says where the
# last checkpoint is (which `zero inspect` verifies), or that there is none; no process is left.
set -u
: "${ZERO:?set ZERO to the zero binary}"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/shm"
export OMPI_MCA_btl_vader_backing_directory="$TMP/shm"
fail=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; return 1; fi
}
errors() { grep -c '^zero: error: ' "$TMP/err"; }
TAG="launch-test-$$" # in every command line below, to find our processes
train_bg() { # train_bg [args...]: a long 2-rank run in the background; sets job
    rm -f "$TMP/$TAG.json"
    "$ZERO" train --model tiny --seq 32 --ranks 2 --micro-batch 2 --val-every 0 --steps 100000 --data /usr/share/games/fortunes \
        --log-json "$TMP/$TAG.json" "$@" >"$TMP/out" 2>"$TMP/err" &
    job=$!
}
running() { grep -q '"step":3,' "$TMP/$TAG.json" 2>/dev/null; }
wait_for() { # wait_for COMMAND...: up to 60 s
    for _ in $(seq 1 1200); do "$@" && return 0; sleep 0.05; done
    return 1
}
rank_pid() { # the rank process (not its monitor) of MPI rank $1 of our run
    local p pp
    for p in /proc/[0-9]*; do
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$TAG" || continue
        { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" || continue
        pp=$(awk '{print $4}' "$p/stat" 2>/dev/null)
        # the monitor's parent is mpiexec; the rank's parent is its monitor, a zero
        [ "$(cat "/proc/$pp/comm" 2>/dev/null)" = zero ] && { echo "${p#/proc/}"; return 0; }
    done
    return 1
}
inspects() { "$ZERO" inspect "$1" >/dev/null 2>&1; }
leftovers() { # processes of our run still alive
    local p n=0
    for p in /proc/[0-9]*; do
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$TAG" && n=$((n + 1))
    done
    [ "$n" -eq 0 ]
}

# --- far too many ranks
cpus=$(nproc)
start=$(date +%s)
"$ZERO" train --model tiny --ranks 1000 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "--ranks 1000 on $cpus CPUs: exit 2 (got $rc)" test $rc -eq 2
check "--ranks 1000: one line naming the ranks, the CPUs and --oversubscribe" \
    test "$(errors)" -eq 1 -a "$(wc -l <"$TMP/err")" -eq 1
grep -q "^zero: error: --ranks 1000: this process may use $cpus CPUs\?, .*--oversubscribe" "$TMP/err" || { echo "FAIL message: $(cat "$TMP/err")"; fail=1; }
check "--ranks 1000: refused at once" test $(($(date +%s) - start)) -le 5
# the CPUs the process may use, not the machine's: one CPU allows 8 ranks
taskset -c 0 "$ZERO" bench comm --ranks 9 --min-bytes 1K --max-bytes 1K --iters 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "taskset 1 CPU, --ranks 9: exit 2 (got $rc)" test $rc -eq 2
check "taskset 1 CPU, --ranks 9: 'may use 1 CPU'" grep -q "may use 1 CPU, and more than 8 ranks" "$TMP/err"
taskset -c 0 "$ZERO" bench comm --ranks 9 --oversubscribe --min-bytes 1K --max-bytes 1K --iters 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "taskset 1 CPU, --ranks 9 --oversubscribe: runs (exit $rc)" test $rc -eq 0 || cat "$TMP/err"
check "--oversubscribe: 9 ranks measured" grep -q "9 ranks" "$TMP/out"

# --- mpiexec failing by itself (its messages are off: --quiet) is not silent
OMPI_MCA_plm=no-such-component "$ZERO" bench comm --ranks 2 --min-bytes 1K --max-bytes 1K --iters 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "mpiexec fails by itself: exit 1 (got $rc)" test $rc -eq 1
check "mpiexec fails by itself: one line saying so" \
    test "$(errors)" -eq 1 -a "$(grep -c "the MPI launcher '.*' exited with status [0-9]* before any rank said why" "$TMP/err")" -eq 1 ||
    cat "$TMP/err"

# --- a rank killed by a signal: one line naming it, exit 1, nothing left running
for sig in KILL SEGV; do
    train_bg
    wait_for running && pid=$(rank_pid 1)
    check "SIG$sig: rank 1 found (pid ${pid:-none})" test -n "${pid:-}" || { kill $job; wait $job; continue; }
    num=$(kill -l "$sig")
    kill -"$sig" "$pid"
    wait $job; rc=$?
    check "SIG$sig of rank 1: exit 1 (got $rc)" test $rc -eq 1
    check "SIG$sig of rank 1: one error line" test "$(errors)" -eq 1
    check "SIG$sig of rank 1: it names rank 1, its pid and the signal" \
        grep -q "^zero: error: rank 1 (pid $pid) was killed by signal $num (SIG$sig" "$TMP/err" || cat "$TMP/err"
    check "SIG$sig of rank 1: no mpiexec banner" test -z "$(grep -e '-----' -e 'mpiexec noticed' "$TMP/err")"
    check "SIG$sig of rank 1: no process left" wait_for leftovers
done

# --- a rank that stops without dying (SIGSTOP closes no socket): its peer ends after
# ZERO_COMM_TIMEOUT seconds in a collective with one line naming the call, and the job goes down
export ZERO_COMM_TIMEOUT=3
train_bg
unset ZERO_COMM_TIMEOUT
wait_for running && pid=$(rank_pid 1)
check "SIGSTOP: rank 1 found (pid ${pid:-none})" test -n "${pid:-}" || { kill $job; wait $job; }
if [ -n "${pid:-}" ]; then
    start=$(date +%s)
    kill -STOP "$pid"
    for _ in $(seq 1 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
    if kill -0 $job 2>/dev/null; then # the watchdog missed: fail, and leave nothing hanging
        echo "FAIL SIGSTOP of rank 1: the job still runs 60 s later"; fail=1
        kill -9 "$pid"; kill $job
    fi
    wait $job; rc=$?
    took=$(($(date +%s) - start))
    check "SIGSTOP of rank 1: exit 1 (got $rc)" test $rc -eq 1
    check "SIGSTOP of rank 1: rank 0 says what waited, for how long and why" \
        grep -q "^zero: error: rank 0 of 2: [a-z_ -]* has waited [0-9]* s for the other ranks, more than the 3 s of ZERO_COMM_TIMEOUT" "$TMP/err" ||
        cat "$TMP/err"
    check "SIGSTOP of rank 1: ended in ${took} s (3 s of timeout, at most 30)" test "$took" -le 30
    check "SIGSTOP of rank 1: no process left (the stopped one killed)" wait_for leftovers
fi

# --- the launcher stopped: where the last checkpoint is
for sig in TERM INT; do
    rm -rf "$TMP/ck"
    train_bg --save "$TMP/ck" --save-every 2
    wait_for test -s "$TMP/ck/latest"
    sleep 0.5
    kill -"$sig" $job
    wait $job; rc=$?
    num=$(kill -l "$sig")
    check "SIG$sig to the launcher: dies of it (status $((128 + num)), got $rc)" test $rc -eq $((128 + num))
    latest=$(cat "$TMP/ck/latest" 2>/dev/null)
    check "SIG$sig: says it stopped and where the last checkpoint is ($latest)" \
        grep -qxF "zero: stopped by SIG$sig: the last checkpoint is $TMP/ck/$latest (continue with --resume $TMP/ck)" "$TMP/err" ||
        cat "$TMP/err"
    check "SIG$sig: no error line" test "$(errors)" -eq 0
    check "SIG$sig: the checkpoint named verifies" inspects "$TMP/ck/$latest"
    check "SIG$sig: no process left" wait_for leftovers
done
train_bg
wait_for running
kill -TERM $job
wait $job
check "SIGTERM without --save: says nothing was saved" grep -qx "zero: stopped by SIGTERM: nothing was saved (no --save DIR)" "$TMP/err" ||
    cat "$TMP/err"
check "SIGTERM without --save: no process left" wait_for leftovers
exit $fail
