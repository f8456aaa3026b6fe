#!/usr/bin/env bash
# `zero bench io`: one JSON object with the documented keys, the sizes asked for, positive
# bandwidths for the pool (with and without checksums) and the plain O_DIRECT baseline (fio's when
# fio is installed, else null), ratios that are pool / plain, the checksums' cost; the table; no file left in --dir; a file of the bench's
# name that is not ours is refused and left as it was; an injected write fault and bad flags
# are one-line errors (exit 1 and 2).
set -u
: "${ZERO:?ZERO must be the path of the zero binary}"
PY=/usr/bin/python3
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d="$tmp/dir"

"$ZERO" bench io --dir "$d" --size 8MiB --block-size 256KiB --buffers 3 --json >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || err "json run: exit $rc: $(cat "$tmp/err")"
"$PY" - "$tmp/out" "$d" <<'EOF' || fail=1
import json, shutil, sys
o = json.loads(open(sys.argv[1]).read())
bad = []
keys = {"dir", "bytes", "block_size", "buffers", "backend", "direct", "pool", "pool_no_checksums", "plain", "fio",
        "read_ratio", "write_ratio", "checksum_cost"}
if set(o) != keys: bad.append("keys %s" % sorted(o))
if o.get("dir") != sys.argv[2]: bad.append("dir %r" % o.get("dir"))
if o.get("bytes") != 8 << 20 or o.get("block_size") != 256 << 10 or o.get("buffers") != 3:
    bad.append("sizes %r %r %r" % (o.get("bytes"), o.get("block_size"), o.get("buffers")))
for k in ("pool", "pool_no_checksums", "plain"):
    for rw in ("read_gbps", "write_gbps"):
        v = o.get(k, {}).get(rw)
        if not isinstance(v, (int, float)) or not (0 < v < 1000): bad.append("%s.%s = %r" % (k, rw, v))
for rw, r in (("read", "read_ratio"), ("write", "write_ratio")):
    want = o["pool"][rw + "_gbps"] / o["plain"][rw + "_gbps"]
    if abs(o[r] - want) > 1e-3 * want + 1e-4: bad.append("%s %r, pool/plain %r" % (r, o[r], want))
for rw in ("read", "write"):
    want = 1 - o["pool"][rw + "_gbps"] / o["pool_no_checksums"][rw + "_gbps"]
    got = o.get("checksum_cost", {}).get(rw)
    if not isinstance(got, (int, float)) or abs(got - want) > 1e-3: bad.append("checksum_cost.%s %r, want %r" % (rw, got, want))
if shutil.which("fio"):
    if not (isinstance(o["fio"], dict) and o["fio"]["read_gbps"] > 0 and o["fio"]["write_gbps"] > 0):
        bad.append("fio is installed but fio = %r" % o["fio"])
elif o["fio"] is not None:
    bad.append("no fio but fio = %r" % o["fio"])
for b in bad: print("FAIL: bench io json:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
[ -z "$(ls -A "$d")" ] || err "files left in --dir: $(ls -A "$d")"

# the table
"$ZERO" bench io --dir "$d" --size 4MiB >"$tmp/table" 2>&1 || err "table run failed: $(cat "$tmp/table")"
grep -q "^pool (4 buffers in flight) *[0-9.]* *[0-9.]*$" "$tmp/table" || err "table: no pool row: $(cat "$tmp/table")"
grep -q "^plain O_DIRECT (one request at a time) *[0-9.]* *[0-9.]*$" "$tmp/table" || err "table: no plain row"
grep -q "^pool without checksums *[0-9.]* *[0-9.]*$" "$tmp/table" || err "table: no row without checksums"
grep -q "^checksum cost: read -\?[0-9.]*%, write -\?[0-9.]*% of the throughput without them$" "$tmp/table" || err "table: no checksum cost"
grep -q "^pool / plain: read [0-9.]*x, write [0-9.]*x" "$tmp/table" || err "table: no ratio line"

# a file of our name that is not ours
mkdir -p "$d"
echo "keep me" >"$d/zero_bj_rank00000.bench.swp"
ZERO_JOB_ID=bj "$ZERO" bench io --dir "$d" --size 1MiB >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || err "foreign file: exit $rc, expected 1"
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^zero: error: bench io: .*zero_bj_rank00000.bench.swp exists and is not a zero swap file" "$tmp/err" ||
    err "foreign file: message: $(cat "$tmp/err")"
[ "$(cat "$d/zero_bj_rank00000.bench.swp")" = "keep me" ] || err "foreign file: changed"
rm -f "$d/zero_bj_rank00000.bench.swp"

# a disk that fails the pool's second write (the first is the file's header)
ZERO_FAULT="write:2:eio:once:.bench.swp" "$ZERO" bench io --dir "$d" --size 1MiB >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || err "write fault: exit $rc, expected 1"
grep -q "^zero: error: bench io: .*bench.swp.*Input/output error (injected fault write:2:eio" "$tmp/err" ||
    err "write fault: message: $(cat "$tmp/err")"
[ -z "$(ls -A "$d")" ] || err "write fault: files left: $(ls -A "$d")"

# usage errors
usage() { # expected-text args...
    local want=$1; shift
    "$ZERO" bench io "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    [ "$rc" = 2 ] || err "bench io $*: exit $rc, expected 2"
    [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^zero: error: .*$want" "$tmp/err" || err "bench io $*: message: $(cat "$tmp/err")"
}
usage "expected a multiple of 4096" --block-size 1000
usage "expected at least one block" --size 4KiB
usage "expected an integer" --buffers many
usage "unknown option '--depth'" --depth 4
"$ZERO" bench io --help | grep -q "usage: zero bench io" || err "--help"
[ "$fail" = 0 ] && echo "ok: bench io"
exit $fail
