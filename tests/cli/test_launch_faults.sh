#!/usr/bin/env bash
# A 2- and a 3-rank stage-3 run with --offload-param and --offload-optimizer nvme:DIR, stopped
# every way a job can be stopped: kill -9 of a rank, SIGSTOP of a rank (ZERO_COMM_HEARTBEAT=3: the
# job must end in seconds, the stopped rank with it), kill -9 of mpiexec, kill -9 of the `zero`
# launcher. After each: no process of the run is left; the last checkpoint verifies and a run
# resumes from it (the next run in the same NVMe directory); once that run is over, no swap file,
# no scratch directory of the job, no OpenMPI session directory and no shared-memory segment of
# either job is left. Then the exits that can run code remove their scratch at once: SIGTERM and
# SIGHUP to the launcher, SIGTERM to a single-process run, a rank ended by ZERO_COMM_TIMEOUT.
set -u
: "${ZERO:?set ZERO to the zero binary}"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
TAG="launch-faults-$$" # in every command line below, to find our processes
cleanup() {
    local p
    for p in $(ours); do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
NV="$TMP/nv"
CK="$TMP/ck"
mkdir -p "$NV"
fail=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; return 1; fi
}
ours() { pgrep -f -- "$TAG"; } # the processes of our runs: launcher, mpiexec, monitors, ranks
no_process() { [ -z "$(ours)" ]; }
gone_within() { # gone_within SECONDS: no process of ours is left by then (what is, is killed)
    wait_for "$1" no_process && return 0
    for p in $(ours); do kill -9 "$p" 2>/dev/null; done
    return 1
}
wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1)); shift
    until "$@"; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.05
    done
}
env_of() { { tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null | sed -n "s/^$2=//p" | head -1; }
comm_of() { cat "/proc/$1/comm" 2>/dev/null; }
parent_of() { awk '{print $4}' "/proc/$1/stat" 2>/dev/null; }
mpiexec_pid() { local p; for p in $(ours); do [ "$(comm_of "$p")" = mpiexec ] && echo "$p"; done | head -1; }
rank_pid() { # the rank process (not its monitor) of MPI rank $1
    local p
    for p in $(ours); do
        [ "$(env_of "$p" OMPI_COMM_WORLD_RANK)" = "$1" ] || continue
        [ "$(comm_of "$(parent_of "$p")")" = zero ] && { echo "$p"; return 0; }
    done
    return 1
}
train() { # train RANKS [args...]: the run every case uses
    local r=$1; shift
    "$ZERO" train --model tiny --seq 32 --ranks "$r" --micro-batch 2 --val-every 0 --data /usr/share/games/fortunes \
        --stage 3 --offload-param "nvme:$NV" --offload-optimizer "nvme:$NV" --save "$CK" --save-every 2 \
        --log-json "$TMP/$TAG.json" "$@"
}
running() { grep -q '"step":3,' "$TMP/$TAG.json" 2>/dev/null; }
swap_files() { find "$NV" -name 'zero_*.swp' 2>/dev/null | wc -l; }
# What one job puts outside the NVMe directory, read from its processes while it runs: the
# launcher's scratch directory, OpenMPI's session directory and the shared-memory segments' name.
note_scratch() {
    local m r jobid
    m=$(mpiexec_pid) r=$(rank_pid 0)
    JOBDIR=$(env_of "$m" ZERO_LAUNCH_DIR)
    SESSION=$(env_of "$r" OMPI_MCA_orte_jobfam_session_dir)
    jobid=$(env_of "$r" OMPI_MCA_ess_base_jobid)
    SEGMENT=$([ -n "$jobid" ] && printf 'vader_segment.*.%x.*' "$jobid")
}
segments() { # the segments named $1, wherever OpenMPI may have put them
    find /dev/shm /tmp "$TMP" -maxdepth 4 -name "$1" 2>/dev/null | wc -l
}
no_scratch() { # no_scratch WHAT: nothing of the jobs noted in OLD_* and now left
    local what=$1
    check "$what: no swap file in the NVMe directory" test "$(swap_files)" -eq 0 || ls -la "$NV"
    check "$what: the job's scratch directory is gone (${OLD_JOBDIR:-none noted})" \
        test -n "$OLD_JOBDIR" -a ! -e "$OLD_JOBDIR"
    check "$what: OpenMPI's session directory is gone (${OLD_SESSION:-none noted})" \
        test -n "$OLD_SESSION" -a ! -e "$OLD_SESSION"
    check "$what: no shared-memory segment ${OLD_SEGMENT:-none noted} left" \
        test -n "$OLD_SEGMENT" -a "$(segments "$OLD_SEGMENT")" -eq 0
    # what a failed check found is this test's own debris: not left on the machine
    [ -n "$OLD_SESSION" ] && rm -rf "$OLD_SESSION"
    [ -n "$OLD_SEGMENT" ] && find /dev/shm /tmp -maxdepth 4 -name "$OLD_SEGMENT" -delete 2>/dev/null
    rm -f "$NV"/zero_*.swp
}
# After a case: the last checkpoint verifies, and resuming from it (the next run in the same NVMe
# directory) runs 2 more steps; then nothing of either job is left.
resume_and_check() { # resume_and_check WHAT RANKS
    local what=$1 r=$2 latest step rc
    latest=$(cat "$CK/latest" 2>/dev/null)
    check "$what: the last checkpoint ($latest) verifies" "$ZERO" inspect "$CK/$latest" >/dev/null 2>&1
    step=$((10#${latest#step_}))
    OLD_JOBDIR=$JOBDIR OLD_SESSION=$SESSION OLD_SEGMENT=$SEGMENT
    train "$r" --resume "$CK" --steps $((step + 2)) >"$TMP/out2" 2>"$TMP/err2"
    rc=$?
    check "$what: a run resumes from it (exit $rc)" test $rc -eq 0 || cat "$TMP/err2"
    check "$what: the resumed run starts at step $((step + 1))" grep -q "\"step\":$((step + 1))," "$TMP/$TAG.json"
    check "$what: no process left after the resumed run" gone_within 10
    no_scratch "$what, then a resumed run"
}
start() { # start RANKS [env...]: a long run in the background, until step 3; sets job
    local r=$1; shift
    rm -rf "$CK" "$TMP/$TAG.json"
    env "$@" "$ZERO" train --model tiny --seq 32 --ranks "$r" --micro-batch 2 --val-every 0 \
        --data /usr/share/games/fortunes --stage 3 --offload-param "nvme:$NV" --offload-optimizer "nvme:$NV" \
        --save "$CK" --save-every 2 --log-json "$TMP/$TAG.json" --steps 100000 >"$TMP/out" 2>"$TMP/err" &
    job=$!
    wait_for 60 running && wait_for 10 test -s "$CK/latest" && note_scratch
}
ended() { ! kill -0 "$job" 2>/dev/null; }
# Waits up to $1 seconds for the launcher; past that the case failed: end everything so that the
# next case starts clean.
finish() {
    local took
    if ! wait_for "$1" ended; then
        echo "FAIL the job still runs $1 s later:"; fail=1
        ps -o pid,ppid,stat,wchan:24,comm -p "$(ours | paste -sd,)" 2>/dev/null
        cat "$TMP/err"
        for p in $(ours); do kill -9 "$p" 2>/dev/null; done
    fi
    wait "$job" 2>/dev/null
    rc=$?
}

for r in 2 3; do
    # --- kill -9 of rank 1: the job ends (exit 1, the rank named)
    start "$r"
    pid=$(rank_pid 1)
    check "$r ranks, kill -9 of rank 1: found (pid ${pid:-none})" test -n "${pid:-}"
    kill -9 "${pid:-0}"
    finish 30
    check "$r ranks, kill -9 of rank 1: exit 1 (got $rc)" test "$rc" -eq 1
    check "$r ranks, kill -9 of rank 1: no process left" gone_within 10
    check "$r ranks, kill -9 of rank 1: its swap files are gone with the job" test "$(swap_files)" -eq 0
    resume_and_check "$r ranks, kill -9 of rank 1" "$r"

    # --- SIGSTOP of rank 1: its node peers see its heartbeat stop and end the job
    start "$r" ZERO_COMM_HEARTBEAT=3
    pid=$(rank_pid 1)
    check "$r ranks, SIGSTOP of rank 1: found (pid ${pid:-none})" test -n "${pid:-}"
    t0=$(date +%s)
    kill -STOP "${pid:-0}"
    finish 60
    took=$(($(date +%s) - t0))
    check "$r ranks, SIGSTOP of rank 1: exit 1 (got $rc)" test "$rc" -eq 1
    check "$r ranks, SIGSTOP of rank 1: ended in $took s (heartbeat 3 s, at most 20)" test "$took" -le 20
    check "$r ranks, SIGSTOP of rank 1: a rank names rank 1 and its heartbeat" \
        grep -q "^zero: error: rank [0-9] of $r: [a-z_ -]* has waited [0-9]* s for the other ranks, and rank 1 (pid $pid, on this node) has shown no heartbeat for [0-9]* s, more than the 3 s of ZERO_COMM_HEARTBEAT" "$TMP/err" ||
        cat "$TMP/err"
    check "$r ranks, SIGSTOP of rank 1: no process left (the stopped one too)" gone_within 10
    check "$r ranks, SIGSTOP of rank 1: no swap file left at once" test "$(swap_files)" -eq 0
    resume_and_check "$r ranks, SIGSTOP of rank 1" "$r"

    # --- kill -9 of mpiexec: the monitors stop their ranks, the launcher says what happened
    start "$r"
    pid=$(mpiexec_pid)
    check "$r ranks, kill -9 of mpiexec: found (pid ${pid:-none})" test -n "${pid:-}"
    kill -9 "${pid:-0}"
    finish 30
    check "$r ranks, kill -9 of mpiexec: exit 1 (got $rc)" test "$rc" -eq 1
    check "$r ranks, kill -9 of mpiexec: says the MPI launcher was killed" \
        grep -q "^zero: error: --ranks $r: the MPI launcher '.*' was killed by SIGKILL" "$TMP/err" || cat "$TMP/err"
    check "$r ranks, kill -9 of mpiexec: no process left" gone_within 10
    resume_and_check "$r ranks, kill -9 of mpiexec" "$r"

    # --- kill -9 of the launcher: mpiexec and the ranks go with it
    start "$r"
    t0=$(date +%s)
    kill -9 "$job"
    finish 10
    check "$r ranks, kill -9 of the launcher: mpiexec and every rank gone within 30 s" gone_within 30
    echo "     (gone $(($(date +%s) - t0)) s after the kill)"
    resume_and_check "$r ranks, kill -9 of the launcher" "$r"
done

# --- the exits that run code remove their scratch at once
for sig in TERM HUP; do
    start 2
    kill -"$sig" "$job"
    finish 30
    num=$(kill -l "$sig")
    check "SIG$sig to the launcher: dies of it (status $((128 + num)), got $rc)" test "$rc" -eq $((128 + num))
    check "SIG$sig to the launcher: no process left" gone_within 10
    OLD_JOBDIR=$JOBDIR OLD_SESSION=$SESSION OLD_SEGMENT=$SEGMENT
    no_scratch "SIG$sig to the launcher, at once"
done
# one process, no launcher: its own handler removes its swap files
rm -rf "$CK" "$TMP/$TAG.json"
"$ZERO" train --model tiny --seq 32 --micro-batch 2 --val-every 0 --data /usr/share/games/fortunes --stage 3 \
    --offload-param "nvme:$NV" --offload-optimizer "nvme:$NV" --log-json "$TMP/$TAG.json" --steps 100000 \
    >"$TMP/out" 2>"$TMP/err" &
job=$!
wait_for 60 running
check "one process: its swap files exist while it runs" test "$(swap_files)" -eq 2
kill -TERM "$job" # (SIGINT is ignored by a background job of a script, as the shell set it)
finish 30
check "SIGTERM to one process: dies of it (status 143, got $rc)" test "$rc" -eq 143
check "SIGTERM to one process: no swap file left" test "$(swap_files)" -eq 0
# the watchdog's timeout (heartbeat off): the rank it ends removes its files, mpiexec stops the other
start 2 ZERO_COMM_TIMEOUT=3 ZERO_COMM_HEARTBEAT=0
kill -STOP "$(rank_pid 1)"
finish 60
check "ZERO_COMM_TIMEOUT: exit 1 (got $rc)" test "$rc" -eq 1
check "ZERO_COMM_TIMEOUT: the rank says so" grep -q "more than the 3 s of ZERO_COMM_TIMEOUT" "$TMP/err"
check "ZERO_COMM_TIMEOUT: no process left" gone_within 10
OLD_JOBDIR=$JOBDIR OLD_SESSION=$SESSION OLD_SEGMENT=$SEGMENT
no_scratch "ZERO_COMM_TIMEOUT, at once"
exit $fail
