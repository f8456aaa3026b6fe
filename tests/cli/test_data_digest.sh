#!/usr/bin/env bash
# The training data's digest (CRC32C and bytes, which a checkpoint records so that --resume sees
# whether the data changed) is read once a run: by the launcher of --ranks N, which passes it to
# the ranks, by rank 0 under a plain mpiexec, which broadcasts it, and once by a single process for
# both of its passes over the flags — counted by its ZERO_LOG=debug line, one a read. It was read
# by every rank in each pass, and twice on --resume (compare, then record). The digest recorded is
# the file's (CRC32C computed here in Python), and --resume still refuses data that changed.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
command -v mpiexec >/dev/null || { echo "skip: no mpiexec"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
reads() { grep -c "^zero: debug: reading the digest of the data $TMP/data.txt$" "$1"; }
train() { # train NAME [launcher...] -- [args...]: exit status in NAME.rc, stderr in NAME.err
    local name=$1; shift
    local pre=()
    while [ "$1" != -- ]; do pre+=("$1"); shift; done
    shift
    ZERO_LOG=debug "${pre[@]}" "$ZERO" train --model tiny --seq 32 --val-every 0 --micro-batch 2 "$@" \
        >"$name.out" 2>"$name.err"
    echo $? >"$name.rc"
}
for i in $(seq 400); do echo "line $i of a text to train on, long enough for a few batches"; done >data.txt

train fresh2 -- --ranks 2 --data "$TMP/data.txt" --steps 2 --save s
check "--ranks 2 with --save: exit 0" test "$(cat fresh2.rc)" = 0
check "... the data read once for its digest (the launcher's), not once a rank and pass (got $(reads fresh2.err))" \
    test "$(reads fresh2.err)" = 1
# the record is the file's digest
"$PY" - "$TMP/s" "$TMP/data.txt" <<'EOF' >digest.check 2>&1
import json, os, sys
def crc32c(data, crc=0):
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
step = open(os.path.join(sys.argv[1], "latest")).read().strip()
run = json.load(open(os.path.join(sys.argv[1], step, "manifest.json")))["user"]["run"]
data = open(sys.argv[2], "rb").read()
assert run["data_crc32c"] == "%08x" % crc32c(data) and run["data_bytes"] == len(data), (run, "%08x" % crc32c(data), len(data))
print("ok")
EOF
check "the recorded digest is the file's CRC32C and size" grep -qx ok digest.check || cat digest.check

train resume2 -- --resume s --ranks 2 --steps 3 --save s
check "--resume --ranks 2 --save: exit 0" test "$(cat resume2.rc)" = 0
check "... read once to compare and record (got $(reads resume2.err))" test "$(reads resume2.err)" = 1

train resume_mpi mpiexec -n 2 -- --resume s --steps 4 --save s
check "--resume under a plain mpiexec -n 2: exit 0" test "$(cat resume_mpi.rc)" = 0
check "... read once, by rank 0 (got $(reads resume_mpi.err))" test "$(reads resume_mpi.err)" = 1

train resume1 -- --resume s --steps 5 --save s
check "--resume on one rank, two passes over the flags: exit 0" test "$(cat resume1.rc)" = 0
check "... read once (got $(reads resume1.err))" test "$(reads resume1.err)" = 1

head -n 100 data.txt >d && mv d data.txt # the data changed since
train changed_mpi mpiexec -n 2 -- --resume s --steps 6
check "data changed, plain mpiexec: exit 1 (got $(cat changed_mpi.rc))" test "$(cat changed_mpi.rc)" = 1
check "... one line naming it" test "$(grep -c '^zero: error: --resume .*data.txt changed since the checkpoint' changed_mpi.err)" = 1
train changed2 -- --resume s --steps 6 --ranks 2
check "data changed, --ranks 2: exit 1 (got $(cat changed2.rc)), one line naming it" \
    bash -c "test $(cat changed2.rc) = 1 && test \$(grep -c '^zero: error: --resume .*data.txt changed since the checkpoint' changed2.err) = 1"
check "... read once, by the launcher (got $(reads changed2.err))" test "$(reads changed2.err)" = 1
exit $fail
