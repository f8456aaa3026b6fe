#!/usr/bin/env bash
# `zero train --save` never reaches outside its directory (docs/SECURITY.md, rule 7): symbolic
# links planted in the save directory (a step directory, the staging name, latest, the lock, inside
# an uncommitted step directory, a link to the save directory itself) end the run before it
# trains, with one error line naming the link, the link's target untouched and the link left as it
# was; two runs saving to one directory: the second names the first's pid; as root, a second
# (throwaway) user plants links in a group-writable save directory and a directory of its own at a
# staging name: neither the first user's run (nor root's) touches that user's files. Bounded: each
# run is a few steps of the tiny model.
set -uo pipefail
Z=${ZERO:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/zero_links_XXXXXX")
ub=""
bg=""
cleanup() {
    [ -n "$bg" ] && kill "$bg" 2>/dev/null && wait "$bg" 2>/dev/null
    rm -rf "$T"
    [ -n "$ub" ] && id "$ub" >/dev/null 2>&1 && userdel "$ub" 2>/dev/null
}
trap cleanup EXIT
fails=0
check() { # description command...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
train() { # save-dir steps [extra...]
    local d=$1 steps=$2; shift 2
    "$Z" train --model tiny --seq 32 --micro-batch 2 --val-every 0 --steps "$steps" --save "$d" "$@" \
        >"$T/out" 2>"$T/err"
    rc=$?
}
errors() { grep -c '^zero: error:' "$T/err"; }
victim() { # a directory outside every save: two files and a subdirectory
    rm -rf "$T/victim" && mkdir -p "$T/victim/sub" && echo keep >"$T/victim/keep.txt" && echo deep >"$T/victim/sub/deep.txt"
}
victim_ok() {
    [ "$(cat "$T/victim/keep.txt" 2>/dev/null)" = keep ] && [ "$(cat "$T/victim/sub/deep.txt" 2>/dev/null)" = deep ] &&
        [ "$(find "$T/victim" | wc -l)" -eq 4 ]
}
# refused NAME LINK TARGET: a link at NAME (inside the save directory) ends the run before it trains
refused() {
    local what=$1 link=$2
    check "$what: exit 1, one error line" test "$rc" -eq 1 -a "$(errors)" -eq 1
    check "$what: the error names the link" grep -qF "$link is a symbolic link" "$T/err"
    check "$what: nothing trained" bash -c "! grep -q '^step ' '$T/out'"
    check "$what: the victim is untouched" victim_ok
    check "$what: the link is left as it was" test -L "$link"
}

# --- the issue's reproduction: a step directory linking to a victim
victim
mkdir -p "$T/s1"
ln -s "$T/victim" "$T/s1/step_00000099"
train "$T/s1" 2
refused "a step directory linking out" "$T/s1/step_00000099"

# --- the same links in a directory with a real checkpoint, which must survive
train "$T/s2" 2
check "setup: a checkpoint of step 2" test "$rc" -eq 0 -a "$(cat "$T/s2/latest" 2>/dev/null)" = step_00000002
for spec in "step_00000003.tmp:$T/victim" "step_00000004:$T/victim" "step_00000007:$T/s2" "latest.tmp:$T/victim/keep.txt" \
    "lock:$T/victim/keep.txt" "step_00000001.tmp/rank_00000.safetensors:$T/victim/keep.txt" "step_00000005/sub:$T/victim"; do
    name=${spec%%:*} target=${spec#*:}
    victim
    mkdir -p "$(dirname "$T/s2/$name")"
    rm -f "$T/s2/$name"
    ln -s "$target" "$T/s2/$name"
    train "$T/s2" 4 --resume "$T/s2"
    refused "$name linking to $(basename "$target")" "$T/s2/$name"
    check "$name: the checkpoint of step 2 is intact" bash -c "\"$Z\" inspect \"$T/s2\" >/dev/null 2>&1"
    rm -f "$T/s2/$name"
    rmdir "$T/s2/step_00000001.tmp" "$T/s2/step_00000005" 2>/dev/null
done
victim
ln -sfn "$T/victim/keep.txt" "$T/s2/latest"
train "$T/s2" 4
refused "latest linking to a victim file" "$T/s2/latest"
rm -f "$T/s2/latest"
echo step_00000002 >"$T/s2/latest"
train "$T/s2" 4 --resume "$T/s2"
check "links removed: the run resumes and saves step 4" test "$rc" -eq 0 -a "$(cat "$T/s2/latest")" = step_00000004
check "... the victim is untouched" victim_ok

# --- one save directory, one run
train "$T/s3" 2
"$Z" train --model tiny --seq 32 --micro-batch 2 --val-every 0 --steps 100000 --save "$T/s3" --save-every 50 \
    --resume "$T/s3" >"$T/bg.out" 2>"$T/bg.err" &
bg=$!
for _ in $(seq 1 300); do grep -q '^step ' "$T/bg.out" 2>/dev/null && break; sleep 0.1; done
train "$T/s3" 4
check "a second run saving to the same directory: exit 1, one error line" test "$rc" -eq 1 -a "$(errors)" -eq 1
check "... naming the first run's pid" grep -qF "in use by another run (pid $bg on " "$T/err"
kill "$bg" 2>/dev/null
wait "$bg" 2>/dev/null
bg=""
train "$T/s3" 4
check "the first run gone (killed): its lock went with it" test "$rc" -eq 0 -a -n "$(grep -F 'saved step 4' "$T/out")"

# --- retention: the newest N and latest's step, nothing behind a link
train "$T/s4" 6 --save-every 1 --save-total-limit 2
check "--save-total-limit 2: the two newest checkpoints are left" test "$rc" -eq 0 -a \
    "$(cd "$T/s4" && echo step_*)" = "step_00000005 step_00000006"
victim
ln -s "$T/victim" "$T/s4/step_00000001"
train "$T/s4" 8 --save-every 1 --save-total-limit 2 --resume "$T/s4/step_00000005"
refused "--save-total-limit with a link in the save directory" "$T/s4/step_00000001"
rm "$T/s4/step_00000001"
train "$T/s4" 8 --save-every 1 --save-total-limit 2 --resume "$T/s4/step_00000005"
check "resumed from step 5 (not latest): the two saved since are left" test "$rc" -eq 0 -a \
    "$(cd "$T/s4" && echo step_*)" = "step_00000007 step_00000008"
"$Z" train --model tiny --steps 1 --save-total-limit 2 >/dev/null 2>"$T/err"
check "--save-total-limit without --save: a usage error" test $? -eq 2 -a "$(errors)" -eq 1

# --- as root: another user's links and directories
if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
    echo "SKIP (part): another user's links need root with useradd and runuser"
else
    ub=zlb$$
    if useradd -M -N -r -s /usr/sbin/nologin "$ub" 2>"$T/useradd.err"; then
        chmod 755 "$T"
        # B's files, and a save directory that B's group may write (umask 002 on a lab machine)
        mkdir -p "$T/bfiles" && echo mine >"$T/bfiles/thesis.tex" && chown -R "$ub" "$T/bfiles"
        mkdir -m 1777 "$T/shared"
        mkdir -m 777 "$T/shared/run"
        runuser -u "$ub" -- ln -s "$T/bfiles" "$T/shared/run/step_00000099"
        train "$T/shared/run" 2
        check "B's link in a shared save directory: exit 1 naming it" \
            test "$rc" -eq 1 -a "$(errors)" -eq 1 -a -n "$(grep -F "step_00000099 is a symbolic link" "$T/err")"
        check "... B's files are untouched" test "$(cat "$T/bfiles/thesis.tex")" = mine
        rm -f "$T/shared/run/step_00000099"
        # a directory of B's at the staging name: not written into, not removed
        runuser -u "$ub" -- mkdir -m 777 "$T/shared/run/step_00000002.tmp"
        runuser -u "$ub" -- ln -s "$T/bfiles/thesis.tex" "$T/shared/run/step_00000002.tmp/rank_00000.safetensors"
        train "$T/shared/run" 2
        check "B's directory at the staging name: exit 1, one error line" test "$rc" -eq 1 -a "$(errors)" -eq 1
        check "... naming it as another user's" grep -qF "step_00000002.tmp" "$T/err"
        check "... B's directory and link are left, B's files untouched" \
            test -L "$T/shared/run/step_00000002.tmp/rank_00000.safetensors" -a "$(cat "$T/bfiles/thesis.tex")" = mine
        runuser -u "$ub" -- rm -rf "$T/shared/run/step_00000002.tmp"
        train "$T/shared/run" 2
        check "once B's entries are gone the run saves" test "$rc" -eq 0 -a "$(cat "$T/shared/run/latest")" = step_00000002
    else
        echo "SKIP (part): useradd failed: $(cat "$T/useradd.err")"
    fi
fi
[ "$fails" -eq 0 ] && echo "test_save_links: all passed" || echo "test_save_links: $fails failed"
exit $((fails > 0))
