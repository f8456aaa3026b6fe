#!/usr/bin/env bash
# Scratch is private on a shared machine (docs/SECURITY.md): a 2-rank `zero train` with NVMe
# offload runs as one throwaway user (umask 002, as lab machines with per-user groups have it) in
# a world-writable sticky directory (what /tmp is); while it is stopped mid-run another throwaway
# user tries to read, overwrite, remove, rename and replace its swap files and to read its
# shared-memory segments, and fails at each; the swap files are 0600 while the checkpoint follows
# the umask (0664); a symbolic link the second user plants where the next run's swap file goes is
# refused, not followed, and its target is left as it was; what the second user plants where the
# first one's launcher sweeps the scratch of killed jobs (/dev/shm/zero-job-*: a link to a directory
# of the first user, a directory of its own) is left alone, and so is what they point to. Needs
# root (useradd, setpriv, runuser):
# exit 77 (skipped) otherwise. The users and every file are removed at the end.
set -uo pipefail
Z=${ZERO:?}
if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null ||
   ! command -v setpriv >/dev/null; then
    echo "SKIP: needs root with useradd, setpriv and runuser to make two throwaway users"
    exit 77
fi
ua=zsa$$
ub=zsb$$
S=$(mktemp -d /tmp/zero_private_XXXXXX)
job_pid=""
cleanup() {
    [ -n "$job_pid" ] && kill -CONT -- "-$job_pid" 2>/dev/null && kill -- "-$job_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$S"
    for u in "$ua" "$ub"; do
        if id "$u" >/dev/null 2>&1; then
            rm -rf "/tmp/ompi.$(hostname).$(id -u "$u")" 2>/dev/null
            find /dev/shm -maxdepth 1 -user "$u" -exec rm -rf {} + 2>/dev/null
            userdel "$u" 2>/dev/null
        fi
    done
}
trap cleanup EXIT
for u in "$ua" "$ub"; do
    if ! useradd -M -N -r -s /usr/sbin/nologin "$u" 2>"$S/useradd.err"; then
        echo "SKIP: useradd $u failed: $(cat "$S/useradd.err")"
        exit 77
    fi
done
fails=0
check() { # description command...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
as_b() { runuser -u "$ub" -- "$@" 2>/dev/null; }
# the binary where both users can run it (the build tree may not be theirs to read)
chmod 1777 "$S"
cp "$Z" "$S/zero" && chmod 755 "$S/zero"
data=/usr/share/games/fortunes
# setpriv, not runuser: it becomes the job itself. runuser stays as a parent that, once its child was
# stopped and continued, stops itself again and never reaps the job (the test would hang).
train() { # job-id steps [extra...]: as user A, umask 002, in a session of its own (to stop it whole)
    local job=$1 steps=$2; shift 2
    setsid setpriv --reuid="$ua" --regid="$(id -g "$ua")" --init-groups -- env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM HOME="$S" USER="$ua" LOGNAME="$ua" \
        ZERO_JOB_ID="$job" OMP_NUM_THREADS=1 sh -c 'umask 002; exec "$0" "$@"' "$S/zero" train --model tiny --seq 32 \
        --data "$data" --steps "$steps" --val-every 0 --micro-batch 2 --ranks 2 --stage 3 \
        --offload-optimizer "nvme:$S" "$@" >"$S/$job.out" 2>"$S/$job.err" &
    job_pid=$!
}

# --- a run, stopped while its swap files exist
train sec 100000 --save "$S/ck" --save-every 1
swaps=""
for _ in $(seq 1 1200); do
    swaps=$(find "$S" -maxdepth 1 -name 'zero_sec_rank*.optim.swp' 2>/dev/null | sort | tr '\n' ' ')
    [ "$(echo $swaps | wc -w)" -eq 2 ] && [ -f "$S/ck/latest" ] && break
    kill -0 "$job_pid" 2>/dev/null || break
    sleep 0.1
done
kill -STOP -- "-$job_pid" 2>/dev/null
check "the run's two swap files exist ($swaps)" test "$(echo $swaps | wc -w)" -eq 2
[ "$(echo $swaps | wc -w)" -eq 2 ] || cat "$S/sec.err"
for f in $swaps; do
    n=$(basename "$f")
    check "$n: owned by A, mode 0600 under umask 002" test "$(stat -c '%U %a' "$f")" = "$ua 600"
    check "$n: B cannot read it" bash -c "! runuser -u $ub -- head -c 1 '$f' >/dev/null 2>&1"
    check "$n: B cannot write it" bash -c "! runuser -u $ub -- dd if=/dev/zero of='$f' bs=1 count=1 conv=notrunc 2>/dev/null"
    check "$n: B cannot remove it" bash -c "! runuser -u $ub -- rm -f '$f' 2>/dev/null && test -f '$f'"
    check "$n: B cannot rename it away" bash -c "! runuser -u $ub -- mv '$f' '$S/taken' 2>/dev/null && test -f '$f'"
    check "$n: B cannot replace it with a link" bash -c "! runuser -u $ub -- ln -sf /dev/null '$f' 2>/dev/null && test ! -L '$f'"
done
# shared memory: OpenMPI's segments and session directory of A's job, in the job's scratch
# directory (/dev/shm/zero-job-*, mode 0700)
jobdir=$(find /dev/shm -maxdepth 1 -name 'zero-job-*' -user "$ua" -type d 2>/dev/null | head -1)
check "A's job has its scratch directory in /dev/shm (${jobdir:-none}), mode 0700" \
    test -n "$jobdir" -a "$(stat -c %a "${jobdir:-/nonexistent}" 2>/dev/null)" = 700
check "B cannot list A's scratch directory" bash -c "! runuser -u $ub -- ls '${jobdir:-/nonexistent}' >/dev/null 2>&1"
shm=$(find "${jobdir:-/nonexistent}" -maxdepth 1 -user "$ua" -name 'vader_segment*' -type f 2>/dev/null)
check "A's job holds its shared-memory segments in it" test -n "$shm"
for f in $shm; do
    check "$(basename "$f"): mode 0600, B cannot read it" bash -c "[ \$(stat -c %a '$f') = 600 ] && ! runuser -u $ub -- head -c 1 '$f' >/dev/null 2>&1"
done
# a complete checkpoint (the one `latest` names): the job was stopped at a random point, maybe
# inside the next save, whose files are not final yet
ck=$(find "$S/ck/$(cat "$S/ck/latest" 2>/dev/null)" -name 'rank_*.safetensors' 2>/dev/null | head -1)
check "the checkpoint follows A's umask: $(basename "${ck:-none}") is 0664" test "$(stat -c %a "${ck:-/nonexistent}" 2>/dev/null)" = 664
kill -CONT -- "-$job_pid" 2>/dev/null
sleep 1
kill -TERM -- "-$job_pid" 2>/dev/null
wait "$job_pid" 2>/dev/null
job_pid=""

check "A's job scratch directory is gone with the job" test ! -e "${jobdir:-/nonexistent}"

# --- B plants what A's launcher sweeps: a link to a directory of A's, a directory of B's own with
# a lock no one holds. A's next launch removes neither, nor anything they lead to.
runuser -u "$ua" -- sh -c "mkdir '$S/adir' && echo precious > '$S/adir/file' && chmod 700 '$S/adir'"
as_b ln -s "$S/adir" "/dev/shm/zero-job-zb$$"
as_b sh -c "mkdir -m 700 /dev/shm/zero-job-zc$$ && touch /dev/shm/zero-job-zc$$/lock /dev/shm/zero-job-zc$$/data"
check "B planted a link and a directory where launchers sweep" test -L "/dev/shm/zero-job-zb$$" -a -d "/dev/shm/zero-job-zc$$"

# --- B plants a link where A's next swap file goes: refused, not followed
rm -f "$S"/zero_sec_*.swp
runuser -u "$ua" -- sh -c "echo precious > '$S/precious' && chmod 600 '$S/precious'"
as_b ln -s "$S/precious" "$S/zero_sec2_rank00000.optim.swp"
check "B planted a link at A's next swap file" test -L "$S/zero_sec2_rank00000.optim.swp"
train sec2 3
wait "$job_pid"
rc=$?
job_pid=""
check "A's run refuses it: exit 1 (got $rc)" test "$rc" -eq 1
check "one error line naming the file" grep -q "zero: error: .*zero_sec2_rank00000.optim.swp exists and is not a zero swap file" "$S/sec2.err"
check "the link's target is untouched" test "$(cat "$S/precious")" = precious
check "the link is still B's, not replaced" test "$(stat -c %U "$S/zero_sec2_rank00000.optim.swp")" = "$ub"
check "no swap file of A left" test -z "$(find "$S" -maxdepth 1 -name 'zero_sec2_*.swp' -user "$ua")"
check "B's link in /dev/shm is left, and A's directory it points to" \
    test -L "/dev/shm/zero-job-zb$$" -a "$(cat "$S/adir/file" 2>/dev/null)" = precious
check "B's directory in /dev/shm is left whole" test -f "/dev/shm/zero-job-zc$$/data"
rm -rf "/dev/shm/zero-job-zb$$" "/dev/shm/zero-job-zc$$"

[ "$fails" -eq 0 ] && echo "test_private_scratch: all checks passed" || echo "test_private_scratch: $fails failed"
exit $((fails > 0))
