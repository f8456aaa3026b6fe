#!/usr/bin/env bash
# NVMe swap files carry a checksum per 4 KiB block (docs/OFFLOAD.md): a byte changed on its way
# back from the disk (the fault shim's read flip), on its way to it (write flip), or in the file
# itself by another process while `zero train` runs, ends the run with exit 1 and one error line
# per rank naming the swap file and the block's offset, never a run that goes on with other
# numbers; no swap file is left behind.
set -uo pipefail
Z=${ZERO:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_MCA_orte_tmpdir_base="$tmp"
data=/usr/share/games/fortunes
nv="$tmp/nvme"
mkdir -p "$nv" # offload directories are not created by zero train
fails=0
check() { # description command...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
train() { # steps [extra...]: sets rc
    local steps=$1; shift
    "$Z" train --model tiny --seq 32 --data "$data" --steps "$steps" --val-every 0 --micro-batch 4 --stage 1 \
        --offload-optimizer "nvme:$nv" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
changed_error() { # the one line naming the file and a block offset
    [ "$(grep -c '^zero: error: ' "$tmp/err")" -eq 1 ] &&
        grep -q '^zero: error: .*zero_[^ ]*\.optim\.swp: the 4096-byte block at offset [0-9]* changed on disk' "$tmp/err" ||
        { cat "$tmp/err"; return 1; }
}
no_swap_files() { test -z "$(find "$nv" -name 'zero_*.swp' 2>/dev/null)"; }

train 3
check "offload run without a fault: exit 0" test "$rc" -eq 0
for spec in "read:3:flip:once:.optim.swp" "write:2:flip:once:.optim.swp"; do
    ZERO_FAULT=$spec train 3
    check "$spec: exit 1 (got $rc)" test "$rc" -eq 1
    check "$spec: one line naming the swap file and the block" changed_error
    check "$spec: no swap file left" no_swap_files
done

# a byte of the swap file changed by another process while the run goes: every step reads the
# whole optimizer file, so the run must stop at the next step that reads the changed block (the
# byte is flipped again and again, in case a step's write lands between our read and write)
"$Z" train --model tiny --seq 32 --data "$data" --steps 100000 --val-every 0 --micro-batch 4 --stage 1 \
    --offload-optimizer "nvme:$nv" >"$tmp/out" 2>"$tmp/err" &
job=$!
swap=""
for _ in $(seq 1 600); do
    swap=$(find "$nv" -name 'zero_*.optim.swp' 2>/dev/null | head -1)
    [ -n "$swap" ] && grep -q "step" "$tmp/out" && break
    sleep 0.05
done
check "the run's swap file appeared ($swap)" test -n "$swap"
size=$(stat -c %s "$swap" 2>/dev/null || echo 0)
at=$((4096 + (size - 4096) / 2)) # a byte in the middle of the data area
for _ in $(seq 1 400); do
    kill -0 $job 2>/dev/null || break
    /usr/bin/python3 - "$swap" "$at" <<'PY' 2>/dev/null
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); at = int(sys.argv[2])
b = os.pread(fd, 1, at); os.pwrite(fd, bytes([b[0] ^ 0x40]), at); os.fsync(fd); os.close(fd)
PY
    sleep 0.05
done
kill -0 $job 2>/dev/null && { kill $job; echo "the run did not stop"; }
wait $job
rc=$?
check "a changed swap file stops the run: exit 1 (got $rc)" test "$rc" -eq 1
check "it names the swap file and the block" changed_error
check "no swap file left" no_swap_files
[ "$fails" -eq 0 ] && echo "all checksum checks passed"
exit $((fails > 0))
