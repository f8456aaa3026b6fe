#!/usr/bin/env bash
# `zero train --trace FILE` writes one Chrome/Perfetto trace with every rank's compute spans,
# communication waits (the calls that start a collective included) and collectives in flight
# (start to completion), also with the progress thread (ZERO_COMM_ASYNC=1); the spans of each
# step lie inside the run; on the fake device, a track per stream with what it ran (ZeRO-Offload's
# uploads inside each optimizer step); a bad path is a usage error.
set -euo pipefail
Z=${ZERO:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
units=$("$Z" estimate --model tiny --ranks 3 --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["units"])')
for async in 0 1; do
ZERO_COMM_ASYNC=$async "$Z" train --model tiny --seq 32 --steps 3 --ranks 3 --stage 3 --micro-batch 2 --trace "$tmp/t.json" > /dev/null
/usr/bin/python3 - "$tmp/t.json" "$units" "$async" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
units = int(sys.argv[2])
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
ranks = {e["pid"] for e in ev}
assert ranks == {0, 1, 2}, ranks
for r in ranks:
    mine = [e for e in ev if e["pid"] == r]
    fb = [e for e in mine if e["name"] == "forward+backward"]
    st = [e for e in mine if e["name"] == "optimizer step"]
    waits = [e for e in mine if e["tid"] == 1]
    assert len(fb) == 3 and len(st) == 3, (r, len(fb), len(st))
    assert waits, "no communication waits recorded on rank %d" % r
    # the calls that start a collective count as exposed time too (a backend may finish it there):
    # stage 3 reduce-scatters every unit once a step, and prefetches gathers from the second step
    issue_rs = [e for e in waits if e["name"] == "reduce-scatter (issue)"]
    issue_ag = [e for e in waits if e["name"] == "all-gather prefetch (issue)"]
    assert len(issue_rs) == 3 * units, (r, len(issue_rs), units)
    assert issue_ag, "no prefetch issue spans on rank %d" % r
    # in flight: every reduce-scatter from its start to its completion, each containing its
    # start call; prefetches likewise
    flight = [e for e in mine if e["tid"] == 2]
    fl_rs = [e for e in flight if e["name"] == "reduce-scatter"]
    fl_ag = [e for e in flight if e["name"] == "all-gather prefetch"]
    assert len(fl_rs) == 3 * units, (r, len(fl_rs), units)
    # (the run's last prefetch, of the next step's first unit, may be in flight at the end)
    assert len(issue_ag) - 1 <= len(fl_ag) <= len(issue_ag), (r, len(fl_ag), len(issue_ag))
    end = lambda e: e["ts"] + e["dur"]
    for issue, fl in zip(sorted(issue_rs, key=lambda e: e["ts"]), sorted(fl_rs, key=lambda e: e["ts"])):
        assert fl["ts"] <= issue["ts"] + 1e-3 and end(fl) >= end(issue) - 1e-3, (r, issue, fl)
    assert all(e["dur"] >= 0 for e in mine)
    # each step's optimizer span starts after its forward+backward ends
    for a, b in zip(fb, st):
        assert b["ts"] >= a["ts"] + a["dur"] - 1e-3, (a, b)
print("ok: %d spans on %d ranks (ZERO_COMM_ASYNC=%s)" % (len(ev), len(ranks), sys.argv[3]))
PY
done
# the fake device: its stream's track, named, with the copies, memsets and kernels it ran
backends=$("$Z" --version --verbose | sed -n 's/^device backends: //p') # whole output read: no SIGPIPE under pipefail
if [[ $backends == *fake* ]]; then
"$Z" train --model tiny --seq 32 --steps 2 --ranks 2 --stage 2 --precision bf16 --device fake --offload-optimizer cpu \
    --trace "$tmp/d.json" > /dev/null
/usr/bin/python3 - "$tmp/d.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
for r in (0, 1):
    tracks = {t for (p, t), n in names.items() if p == r and n.startswith("device stream ")}
    assert tracks, ("no device stream track on rank %d" % r, names)
    dev = [e for e in ev if e["pid"] == r and e["tid"] in tracks]
    kinds = {e["name"].split(" ")[0] for e in dev}
    assert {"copy", "kernel"} <= kinds, (r, kinds)
    assert all(e["dur"] >= 0 for e in dev)
    # ZeRO-Offload: the updated working copy goes up during each optimizer step
    steps = [e for e in ev if e["pid"] == r and e["name"] == "optimizer step"]
    ups = [e for e in dev if e["name"].startswith("copy H2D")]
    assert len(steps) == 2 and ups, (r, len(steps), len(ups))
    for s in steps:
        inside = [u for u in ups if s["ts"] - 1e-3 <= u["ts"] <= s["ts"] + s["dur"] + 1e-3]
        assert inside, ("no upload inside the optimizer step", r, s)
print("ok: fake device: %d spans on the device stream tracks" % len([e for e in ev if e["tid"] >= 4]))
PY
fi
out=$("$Z" train --model tiny --steps 1 --trace /nonexistent/dir/t.json 2>&1 >/dev/null) && { echo "bad path accepted"; exit 1; }
echo "$out" | grep -q "^zero: error: --trace '/nonexistent/dir/t.json'" || { echo "unexpected: $out"; exit 1; }
echo ok
