#!/usr/bin/env bash
# `zero bench comm`: JSON lines with the documented keys and plausible numbers on 2 ranks (and
# on 1), the backend each run used (mpi+shm for ranks sharing the machine, mpi with
# ZERO_COMM_SHM=0), the memcpy reference, the table, and one-line usage errors (exit 2).
set -u
: "${ZERO:?ZERO must be the path of the zero binary}"
PY=/usr/bin/python3
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A build without MPI has only the self backend: --ranks 2 must then fail cleanly.
if "$ZERO" bench comm --max-bytes 1KiB | head -1 | grep -q "self backend"; then
    "$ZERO" bench comm --ranks 2 --json --max-bytes 1MiB >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 1 ] || err "no-MPI build: --ranks 2 exit $rc, expected 1"
    grep -q "^zero: error: .*no MPI" "$tmp/err" || err "no-MPI build: message: $(cat "$tmp/err")"
    exit $fail
fi

# Validates JSON lines: argv = expected ranks, expected number of lines, expected backend.
check_json() {
    "$PY" - "$1" "$2" "$tmp/out" "${3:-}" <<'EOF'
import json, sys
ranks, nlines, path, backend = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = [l for l in open(path).read().splitlines() if l.strip()]
keys = {"collective", "bytes", "ranks", "ours_algbw_gbps", "ours_busbw_gbps", "mpi_busbw_gbps", "ratio",
        "memcpy_gbps", "backend"}
bad = []
if len(lines) != nlines:
    bad.append("%d lines, expected %d" % (len(lines), nlines))
seen = {}
for l in lines:
    o = json.loads(l)
    missing = keys - set(o)
    if missing:
        bad.append("missing %s in %s" % (sorted(missing), l))
        continue
    if o["ranks"] != ranks:
        bad.append("ranks %r, expected %d" % (o["ranks"], ranks))
    c = o["collective"]
    if c not in ("all_reduce", "reduce_scatter", "all_gather"):
        bad.append("collective %r" % c)
    seen.setdefault(c, []).append(o["bytes"])
    for k in ("ours_algbw_gbps", "ratio", "memcpy_gbps"):
        if not (isinstance(o[k], (int, float)) and o[k] > 0):
            bad.append("%s = %r, expected > 0" % (k, o[k]))
    if backend and o["backend"] != backend:
        bad.append("backend %r, expected %r" % (o["backend"], backend))
    for k in ("ours_busbw_gbps", "mpi_busbw_gbps"):
        if not isinstance(o[k], (int, float)) or (ranks > 1 and o[k] <= 0) or (ranks == 1 and o[k] != 0):
            bad.append("%s = %r with %d ranks" % (k, o[k], ranks))
    # busbw = algbw * 2(n-1)/n for all_reduce, (n-1)/n for the others (NCCL-tests)
    f = (2.0 if c == "all_reduce" else 1.0) * (ranks - 1) / ranks
    if abs(o["ours_busbw_gbps"] - o["ours_algbw_gbps"] * f) > 1e-9 * max(1, o["ours_algbw_gbps"]):
        bad.append("busbw %r != algbw %r * %g" % (o["ours_busbw_gbps"], o["ours_algbw_gbps"], f))
    if "mpi_algbw_gbps" in o and abs(o["ratio"] - o["ours_algbw_gbps"] / o["mpi_algbw_gbps"]) > 1e-9 * o["ratio"]:
        bad.append("ratio %r != ours/mpi" % o["ratio"])
for c, sizes in seen.items():
    # 1 KiB to the maximum by powers of 4, each the full message rounded down to 4*ranks bytes
    step = 4 if c == "all_reduce" else 4 * ranks
    want = [s - s % step for s in (1024 * 4 ** i for i in range(len(sizes)))]
    if sizes != want:
        bad.append("%s sizes %r, expected %r" % (c, sizes, want))
if len(seen) != 3:
    bad.append("collectives %r" % sorted(seen))
for b in bad[:10]:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

"$ZERO" bench comm --ranks 2 --json --max-bytes 1MiB >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || err "--ranks 2 --json exit $rc: $(tail -3 "$tmp/err")"
check_json 2 18 mpi+shm || err "--ranks 2 --json output (above)"

# The plain MPI path on request: the backend says so.
ZERO_COMM_SHM=0 "$ZERO" bench comm --ranks 2 --json --max-bytes 64KiB --iters 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || err "ZERO_COMM_SHM=0 exit $rc: $(tail -3 "$tmp/err")"
check_json 2 12 mpi || err "ZERO_COMM_SHM=0 --json output (above)"

# A bad setting is a one-line runtime error naming the variable.
ZERO_COMM_SHM=maybe "$ZERO" bench comm --ranks 2 --max-bytes 4KiB --iters 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || err "ZERO_COMM_SHM=maybe exit $rc, expected 1"
grep -q "^zero: error: .*ZERO_COMM_SHM 'maybe'" "$tmp/err" || err "ZERO_COMM_SHM=maybe: $(cat "$tmp/err")"

# Three ranks: sizes no longer divide evenly into blocks.
"$ZERO" bench comm --ranks 3 --json --max-bytes 16KiB --iters 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || err "--ranks 3 exit $rc: $(tail -3 "$tmp/err")"
check_json 3 9 mpi+shm || err "--ranks 3 --json output (above)"

# One rank (no launcher): busbw is 0 by definition, algbw still measured.
"$ZERO" bench comm --json --max-bytes 4KiB --iters 5 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || err "1 rank exit $rc: $(tail -3 "$tmp/err")"
check_json 1 6 mpi || err "1 rank --json output (above)"

# The table: a header and one row per (collective, size).
"$ZERO" bench comm --ranks 2 --max-bytes 4KiB --iters 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || err "table exit $rc"
grep -q "^collective .*ours_busbw .*mpi_busbw .*ratio .*memcpy" "$tmp/out" || err "table header: $(cat "$tmp/out")"
grep -q "^zero bench comm: 2 ranks, mpi+shm backend" "$tmp/out" || err "table title: $(head -1 "$tmp/out")"
[ "$(grep -cE '^(all_reduce|reduce_scatter|all_gather) ' "$tmp/out")" = 6 ] || err "table rows: $(cat "$tmp/out")"

"$ZERO" bench comm --help >"$tmp/out" 2>&1 || err "--help failed"
grep -q "^usage: zero bench comm" "$tmp/out" || err "--help text"

# Bad flags: exit 2 with exactly one line "zero: error: ..." naming the problem.
bad_flag() {
    local want="$1"; shift
    "$ZERO" bench comm "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" = 2 ] || err "'$*': exit $rc, expected 2"
    [ "$(wc -l <"$tmp/err")" = 1 ] || err "'$*': stderr has $(wc -l <"$tmp/err") lines: $(cat "$tmp/err")"
    grep -q "^zero: error: .*$want" "$tmp/err" || err "'$*': message '$(cat "$tmp/err")' lacks '$want'"
    [ ! -s "$tmp/out" ] || err "'$*': printed to stdout"
}
bad_flag "--bogus" --bogus
bad_flag "--ranks '0'" --ranks 0
bad_flag "--ranks 'two'" --ranks two
bad_flag "--ranks: expected a value" --ranks
bad_flag "--iters '0'" --iters 0
bad_flag "--max-bytes '12XB'" --max-bytes 12XB
bad_flag "--max-bytes '8GiB'" --max-bytes 8GiB
bad_flag "--min-bytes '0'" --min-bytes 0
bad_flag "below --min-bytes" --min-bytes 1MiB --max-bytes 1KiB

# ZERO_HUGEPAGES other than 0/1 (read by the allocator, which cannot fail a run over it): one
# warning line naming the value, the default kept, the run still succeeds; 0 is silent.
ZERO_HUGEPAGES=yes "$ZERO" bench comm --ranks 1 --min-bytes 8MiB --max-bytes 8MiB --iters 1 >"$tmp/out" 2>"$tmp/err" ||
    err "ZERO_HUGEPAGES=yes: exit $?"
[ "$(grep -c "ZERO_HUGEPAGES 'yes': expected 0 (off) or 1" "$tmp/err")" = 1 ] ||
    err "ZERO_HUGEPAGES=yes: stderr '$(cat "$tmp/err")'"
ZERO_HUGEPAGES=0 "$ZERO" bench comm --ranks 1 --min-bytes 8MiB --max-bytes 8MiB --iters 1 >"$tmp/out" 2>"$tmp/err" ||
    err "ZERO_HUGEPAGES=0: exit $?"
! grep -q "ZERO_HUGEPAGES" "$tmp/err" || err "ZERO_HUGEPAGES=0 warned: $(cat "$tmp/err")"

exit $fail
