#!/usr/bin/env bash
# `zero plot`: two real --log-json logs overlaid give a valid PNG (every chunk's CRC, the pixels
# decompress to exactly width x height) and a valid SVG of the asked size; the picture depends on
# the data (another log, another picture); --json reports the points drawn, which match the logs
# (validation points from "val_loss" and from "eval_loss" records, nulls left out); bad logs and
# bad flags are one-line errors (exit 1 and 2). Skips (77) in a build without Cairo.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; return 1; fi
}
if "$ZERO" plot "$TMP/none.jsonl" -o "$TMP/x.png" 2>&1 | grep -q "not supported in this build"; then
    echo "SKIP zero plot: this build has no Cairo"
    exit 77
fi
train() { # train NAME LR VAL_EVERY
    "$ZERO" train --model tiny --seq 32 --steps 12 --val-every "$3" --lr "$2" --log-json "$TMP/$1.jsonl" >/dev/null 2>"$TMP/err" ||
        { echo "FAIL setup: train $1: $(cat "$TMP/err")"; exit 1; }
}
train fast 3e-3 4
train slow 1e-3 6

png_ok() { # png_ok FILE W H: signature, chunk CRCs, IHDR size, IDAT inflates to H rows of W pixels
    "$PY" - "$@" <<'PY'
import struct, sys, zlib
p, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = open(p, "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "signature"
i, idat, ihdr = 8, b"", None
while i < len(b):
    n, t = struct.unpack(">I4s", b[i:i + 8]); d = b[i + 8:i + 8 + n]
    assert struct.unpack(">I", b[i + 8 + n:i + 12 + n])[0] == zlib.crc32(t + d), "crc of %s" % t
    if t == b"IHDR": ihdr = struct.unpack(">IIBBBBB", d)
    if t == b"IDAT": idat += d
    i += 12 + n
    if t == b"IEND": break
assert ihdr and ihdr[:2] == (w, h), "IHDR %r, expected %dx%d" % (ihdr, w, h)
bpp = {6: 4, 2: 3}[ihdr[3]]
raw = zlib.decompress(idat)
assert len(raw) == h * (1 + w * bpp), "pixel bytes %d" % len(raw)
rows = [raw[r * (1 + w * bpp) + 1:(r + 1) * (1 + w * bpp)] for r in range(0, h, 7)]
assert len(set(rows)) > 8, "a blank picture"
PY
}
svg_ok() { # svg_ok FILE W H: XML whose root is an <svg> of W x H points with drawing in it
    "$PY" - "$@" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
assert r.tag.endswith("svg"), r.tag
w, h = (float(r.get(k).replace("pt", "")) for k in ("width", "height"))
assert (w, h) == (float(sys.argv[2]), float(sys.argv[3])), (w, h)
assert sum(1 for e in r.iter() if e.tag.endswith("path")) > 20, "no drawing"
PY
}
"$ZERO" plot "$TMP/fast.jsonl" "$TMP/slow.jsonl" -o "$TMP/both.png" --title "fast vs slow" --json >"$TMP/json" 2>"$TMP/err"; rc=$?
check "two logs to PNG: exit 0 (got $rc)" test $rc -eq 0 || cat "$TMP/err"
check "the PNG is valid, 1200 x 900" png_ok "$TMP/both.png" 1200 900
check "no temporary file left" test ! -e "$TMP/both.png.tmp"
"$ZERO" plot "$TMP/fast.jsonl" "$TMP/slow.jsonl" -o "$TMP/both.svg" --width 800 --height 500 2>"$TMP/err"; rc=$?
check "two logs to SVG: exit 0 (got $rc)" test $rc -eq 0 || cat "$TMP/err"
check "the SVG is valid, 800 x 500 points" svg_ok "$TMP/both.svg" 800 500
"$ZERO" plot "$TMP/fast.jsonl" -o "$TMP/fast.png" 2>/dev/null && "$ZERO" plot "$TMP/slow.jsonl" -o "$TMP/slow.png" 2>/dev/null
check "another log, another picture" test "$(md5sum <"$TMP/fast.png")" != "$(md5sum <"$TMP/slow.png")"
check "PNG of one log is valid" png_ok "$TMP/fast.png" 1200 900
# what was drawn matches the logs
check "--json: the points drawn are the logs'" "$PY" - "$TMP/json" "$TMP/fast.jsonl" "$TMP/slow.jsonl" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
assert [r["name"] for r in o["runs"]] == ["fast", "slow"], o["runs"]
for run, path in zip(o["runs"], sys.argv[2:]):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    steps = [r for r in recs if not r.get("done")]
    assert run["records"] == len(steps)
    assert run["loss"]["points"] == len(steps) and run["loss"]["last"] == [steps[-1]["step"], steps[-1]["loss"]]
    val = [r for r in steps if "val_loss" in r]
    assert run["val_loss"]["points"] == len(val) and run["val_loss"]["first"] == [val[0]["step"], val[0]["val_loss"]], run
    assert run["lr"]["first"][1] == steps[0]["lr"] and run["step_ms"]["last"][1] == steps[-1]["step_ms"]
    m = steps[0]["mem"]
    assert abs(run["mem_mib"]["first"][1] - (m["total"] + m["activations"]) / 2**20) < 1e-9
    assert abs(run["rss_peak_mib"]["first"][1] - steps[0]["rss_peak"] / 2**20) < 1e-9
PY
# "eval_loss" records, a null loss (a gap), and the final record
cat >"$TMP/eval.jsonl" <<'EOF2'
{"step":1,"loss":5.0,"lr":0.001,"step_ms":10,"mem":{"total":1048576},"rss_peak":2097152}
{"step":2,"loss":null,"lr":0.001,"step_ms":11}
{"step":2,"eval_loss":4.5}
{"step":3,"loss":4.0,"lr":0.0009,"step_ms":12}

{"done":true,"steps":3}
EOF2
"$ZERO" plot "$TMP/eval.jsonl" -o "$TMP/eval.png" --json >"$TMP/json" 2>"$TMP/err"; rc=$?
check "eval_loss log: exit 0 (got $rc)" test $rc -eq 0 || cat "$TMP/err"
check "eval_loss log: 2 loss points (null left out), 1 validation point, memory 1 MiB" "$PY" -c '
import json, sys; r = json.load(open(sys.argv[1]))["runs"][0]
assert r["loss"]["points"] == 2 and r["val_loss"]["points"] == 1 and r["val_loss"]["first"] == [2, 4.5], r
assert r["mem_mib"]["first"] == [1, 1.0] and r["rss_peak_mib"]["points"] == 1 and r["records"] == 4, r' "$TMP/json"
check "eval_loss log: valid PNG" png_ok "$TMP/eval.png" 1200 900

# numbers at the ends of the doubles still give a picture, in bounded time
printf '{"step":1e17,"loss":1e300,"lr":1e-300}\n{"step":1e17,"loss":-1e300}\n{"step":100000000000000016,"loss":5,"step_ms":1e308}\n' >"$TMP/extreme.jsonl"
printf '{"step":7,"loss":2.5}\n' >"$TMP/one.jsonl"
for f in extreme one; do
    timeout 60 "$ZERO" plot "$TMP/$f.jsonl" -o "$TMP/$f.png" 2>"$TMP/err"; rc=$?
    check "$f.jsonl: exit 0 (got $rc)" test $rc -eq 0 || cat "$TMP/err"
    check "$f.jsonl: valid PNG" png_ok "$TMP/$f.png" 1200 900
done

# bad input: one line, exit 1 (bad logs) or 2 (usage)
expect() { # expect STATUS NEEDLE -- ARGS...
    local want=$1 needle=$2; shift 3
    "$ZERO" plot "$@" >/dev/null 2>"$TMP/err"; local rc=$?
    check "plot $*: exit $want (got $rc), one line with '$needle'" \
        test $rc -eq "$want" -a "$(wc -l <"$TMP/err")" -eq 1 -a "$(grep -cF -- "$needle" "$TMP/err")" -eq 1 || cat "$TMP/err"
}
printf '{"step":1,"loss":2}\nthis is not json\n' >"$TMP/garbage.jsonl"
: >"$TMP/empty.jsonl"
printf '{"done":true}\n' >"$TMP/done.jsonl"
printf '{"loss":2}\n' >"$TMP/nostep.jsonl"
printf '[1,2]\n' >"$TMP/array.jsonl"
head -c 3000 /dev/urandom >"$TMP/binary.jsonl"
expect 1 "garbage.jsonl line 2: not a JSON object" -- "$TMP/garbage.jsonl" -o "$TMP/x.png"
expect 1 "empty.jsonl has no step records" -- "$TMP/empty.jsonl" -o "$TMP/x.png"
expect 1 "done.jsonl has no step records" -- "$TMP/done.jsonl" -o "$TMP/x.png"
expect 1 "nostep.jsonl line 1: no \"step\"" -- "$TMP/nostep.jsonl" -o "$TMP/x.png"
expect 1 "array.jsonl line 1: not a JSON object" -- "$TMP/array.jsonl" -o "$TMP/x.png"
expect 1 "binary.jsonl line" -- "$TMP/binary.jsonl" -o "$TMP/x.png"
expect 2 "cannot open '$TMP/missing.jsonl'" -- "$TMP/missing.jsonl" -o "$TMP/x.png"
expect 2 "expected a file name ending in .png or .svg" -- "$TMP/fast.jsonl" -o "$TMP/x.jpg"
expect 2 "expected -o FILE.png" -- "$TMP/fast.jsonl"
expect 2 "expected at least one log" -- -o "$TMP/x.png"
expect 2 "the directory '$TMP/nodir' does not exist" -- "$TMP/fast.jsonl" -o "$TMP/nodir/x.png"
expect 2 "--width '5'" -- "$TMP/fast.jsonl" -o "$TMP/x.png" --width 5
expect 2 "unknown option '--colour'" -- "$TMP/fast.jsonl" -o "$TMP/x.png" --colour red
check "no picture written by a failed plot" test ! -e "$TMP/x.png" -a -z "$(find "$TMP" -name '*.tmp')"
"$ZERO" plot --help | grep -q "^usage: zero plot" || { echo "FAIL --help"; fail=1; }
exit $fail
