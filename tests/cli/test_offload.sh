#!/usr/bin/env bash
# `zero train` with NVMe offload: --offload-optimizer nvme:DIR (stages 1-3) and --offload-param
# nvme:DIR (stage 3) give the very losses (bitwise: the same 17-digit strings) of the run without
# offload on 1, 2 and 3 ranks (fp32; bf16 on 2); the swap files are gone after every run; the
# --log-json records carry the offload's I/O. A file in DIR that is not ours stops the run and
# is left as it was; the swap files of a run killed outright (kill -9) are removed by the next run in
# the same directory, with one warning naming them, and a file that is not a swap file is kept; a
# full disk in the middle of a step is one clear error per rank, exit 1, with the last checkpoint
# intact and no swap file left; bad flags are usage errors.
set -uo pipefail
Z=${ZERO:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_MCA_orte_tmpdir_base="$tmp" # shared-memory debris of aborted MPI jobs stays in here
data=/usr/share/games/fortunes
nv="$tmp/nvme"
mkdir -p "$nv/p" # offload directories are not created by zero train
fails=0
check() { # description command...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

run() { # name ranks stage precision [extra...]
    local name=$1 r=$2 s=$3 p=$4; shift 4
    "$Z" train --model tiny --seq 32 --data "$data" --steps 4 --val-every 2 --ranks "$r" --stage "$s" \
        --micro-batch $((6 / r)) --precision "$p" --lr 3e-3 --log-json - "$@" >"$tmp/$name.json" 2>"$tmp/$name.err"
    rc=$?
    sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\).*/\1 \2/p' "$tmp/$name.json" >"$tmp/$name.loss"
    sed -n 's/.*"step":\([0-9]*\),.*"val_loss":\([^,]*\).*/\1 \2/p' "$tmp/$name.json" >>"$tmp/$name.loss"
}

no_swap_files() { test -z "$(find "$nv" -name 'zero_*.swp' 2>/dev/null)"; }

# --- the same losses, bitwise, with and without offload
for r in 1 2 3; do
    for p in fp32 bf16; do
        [ "$r" != 2 ] && [ "$p" = bf16 ] && continue
        for s in 1 2 3; do
            run "ref_${r}_${p}_$s" "$r" "$s" "$p"
            modes="opt"
            [ "$s" = 3 ] && modes="opt both"
            [ "$s" = 3 ] && [ "$r" = 2 ] && modes="opt par both"
            for m in $modes; do
                case $m in
                opt) flags=(--offload-optimizer "nvme:$nv") ;;
                par) flags=(--offload-param "nvme:$nv") ;;
                both) flags=(--offload-optimizer "nvme:$nv" --offload-param "nvme:$nv/p") ;;
                esac
                n="off_${r}_${p}_${s}_$m"
                run "$n" "$r" "$s" "$p" "${flags[@]}"
                check "$r ranks, stage $s, $p, offload $m: exit 0" test "$rc" -eq 0 || cat "$tmp/$n.err"
                check "$r ranks, stage $s, $p, offload $m: 4 steps + 2 validations, losses bitwise equal" \
                    bash -c "[ \$(wc -l < '$tmp/$n.loss') -eq 6 ] && cmp -s '$tmp/ref_${r}_${p}_$s.loss' '$tmp/$n.loss'"
                check "$r ranks, stage $s, $p, offload $m: no swap file left" no_swap_files
            done
        done
    done
done
# the records say what moved: bytes read and written every step, and the time waited
check "log-json: offload read/written > 0 in every step record" \
    bash -c "[ \$(grep -c '\"offload\":{\"read\":[1-9][0-9]*,\"written\":[1-9][0-9]*,\"io_wait_ms\":' '$tmp/off_2_fp32_3_both.json') -eq 4 ]"
check "summary names the swap files and the pool" grep -q "NVMe offload (rank 0): .* in swap files, .* of I/O buffers in RAM" "$tmp/off_1_fp32_1_opt.err"

# --- a file that is not ours, where rank 0's swap file would go
mkdir -p "$nv"
echo "precious" >"$nv/zero_fj_rank00000.optim.swp"
ZERO_JOB_ID=fj run foreign 1 2 fp32 --offload-optimizer "nvme:$nv"
check "foreign file: exit 1" test "$rc" -eq 1
check "foreign file: one error line naming it" \
    bash -c "[ \$(grep -c 'zero: error: ' '$tmp/foreign.err') -eq 1 ] && grep -q 'zero_fj_rank00000.optim.swp exists and is not a zero swap file: refusing to overwrite it' '$tmp/foreign.err'"
check "foreign file: untouched" bash -c "[ \"\$(cat '$nv/zero_fj_rank00000.optim.swp')\" = precious ]"
rm -f "$nv/zero_fj_rank00000.optim.swp"

# --- a run killed outright leaves its swap files; the next run in the same directory removes them
echo "precious" >"$nv/zero_keep_rank00000.optim.swp" # our name, not our file: kept
ZERO_JOB_ID=killed "$Z" train --model tiny --seq 32 --data "$data" --steps 100000 --val-every 0 --stage 3 --micro-batch 2 \
    --offload-optimizer "nvme:$nv" --offload-param "nvme:$nv" >/dev/null 2>&1 &
victim=$!
for _ in $(seq 1 300); do [ "$(find "$nv" -name 'zero_killed_*.swp' | wc -l)" -eq 2 ] && break; sleep 0.1; done
kill -9 "$victim"
wait "$victim" 2>/dev/null
check "kill -9: the killed run left its 2 swap files" test "$(find "$nv" -name 'zero_killed_*.swp' | wc -l)" -eq 2
run next 1 1 fp32 --offload-optimizer "nvme:$nv"
check "the next run in the directory: exit 0" test "$rc" -eq 0
check "the next run: one warning naming what it removed" \
    bash -c "[ \$(grep -c 'warning: offload: rank 0 removed 2 swap files (.* MB) that runs which were killed left in $nv (zero_killed_rank00000' '$tmp/next.err') -eq 1 ]" ||
    cat "$tmp/next.err"
check "the next run: no swap file left" test -z "$(find "$nv" -name 'zero_*.swp' ! -name 'zero_keep_*')"
check "the next run: the file with our name that is not ours is kept" \
    bash -c "[ \"\$(cat '$nv/zero_keep_rank00000.optim.swp')\" = precious ]"
rm -f "$nv/zero_keep_rank00000.optim.swp"

# --- disk full in step 3 (1 rank, 4 units: the header is write 1, each step writes 4 tiles)
ck="$tmp/ckpt"
ZERO_FAULT="write:11:enospc:always:.optim.swp" run full 1 1 fp32 --offload-optimizer "nvme:$nv" --save "$ck" --save-every 1
check "disk full: exit 1" test "$rc" -eq 1
check "disk full: one error line, naming the file and the reason" \
    bash -c "[ \$(grep -c 'zero: error: ' '$tmp/full.err') -eq 1 ] && grep -q 'zero: error: rank 0: step: .*zero_.*_rank00000.optim.swp.*No space left on device' '$tmp/full.err'"
check "disk full: two steps ran" test "$(grep -c '"step"' "$tmp/full.json")" -eq 2
check "disk full: latest is the checkpoint of step 2" test "$(cat "$ck/latest" 2>/dev/null)" = step_00000002
check "disk full: that checkpoint verifies" bash -c "'$Z' inspect '$ck' >/dev/null"
check "disk full: no swap file left" no_swap_files
# the checkpoint resumes (with offload) into the same losses as the run that never failed
"$Z" train --model tiny --seq 32 --data "$data" --steps 4 --val-every 2 --stage 1 --micro-batch 6 --lr 3e-3 \
    --resume "$ck" --offload-optimizer "nvme:$nv" --log-json - >"$tmp/resumed.json" 2>"$tmp/resumed.err"
sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\).*/\1 \2/p' "$tmp/resumed.json" >"$tmp/resumed.loss"
check "disk full: resuming from it gives the losses of steps 3-4 bitwise" \
    bash -c "sed -n 3,4p '$tmp/ref_1_fp32_1.loss' | cmp -s - '$tmp/resumed.loss'"

# --- 2 ranks, only rank 1's disk fills: both ranks stop with an error, nobody hangs
rm -rf "$ck"
ZERO_FAULT="write:11:enospc:always:rank00001.optim.swp" run full2 2 1 fp32 --offload-optimizer "nvme:$nv" --save "$ck" --save-every 1
check "rank 1 full: exit non-zero" test "$rc" -ne 0
check "rank 1 full: rank 1 names its file" grep -q "rank 1: step: .*rank00001.optim.swp.*No space left on device" "$tmp/full2.err"
check "rank 1 full: rank 0 names rank 1" grep -q "rank 0: step: step: NVMe offload failed on rank 1" "$tmp/full2.err"
check "rank 1 full: latest is step 2" test "$(cat "$ck/latest" 2>/dev/null)" = step_00000002
check "rank 1 full: no swap file left" no_swap_files

# --- usage errors
"$Z" train --model tiny --steps 1 --stage 1 --offload-optimizer nvme: >/dev/null 2>"$tmp/u1"; rc=$?
check "--offload-optimizer nvme: (no DIR): exit 2" test $rc -eq 2
check "--offload-optimizer nvme: names the flag" grep -q "offload-optimizer 'nvme:': expected none, cpu or nvme:DIR" "$tmp/u1"
"$Z" train --model tiny --steps 1 --stage 2 --offload-param "nvme:$nv" >/dev/null 2>"$tmp/u2"; rc=$?
check "--offload-param at stage 2: exit 2" test $rc -eq 2
check "--offload-param at stage 2: says stage 3" grep -q "needs zero_optimization.stage 3" "$tmp/u2"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok: offload CLI"
