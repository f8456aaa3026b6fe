#!/usr/bin/env bash
# The event files of `zero train --tensorboard` read back by the tensorboard package itself
# (EventAccumulator): every scalar, tag and step equal to the run's --log-json records. SKIPPED
# (exit 77, reported as skipped) where $TB_PYTHON (default python3) cannot import tensorboard;
# tests/cli/test_tensorboard.sh checks the same files without it.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PYT=${TB_PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$HERE/../../scripts/check_tfevents.py"
if ! "$PYT" -c "import tensorboard" 2>/dev/null; then
    echo "SKIP: $PYT cannot import tensorboard (pip install tensorboard; TB_PYTHON=path/to/python)"
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$ZERO" train --model tiny --seq 32 --steps 8 --val-every 4 --tensorboard "$TMP/tb" --log-json "$TMP/log.jsonl" \
    >/dev/null 2>"$TMP/err" || { echo "FAIL train: $(cat "$TMP/err")"; exit 1; }
if out=$("$PYT" "$CHECK" --tensorboard "$TMP/tb" "$TMP/log.jsonl"); then
    echo "ok   $out"
    grep -q "read 50 scalars" <<<"$out" || { echo "FAIL expected 50 scalars (8 steps x 6, 2 eval losses)"; exit 1; }
else
    echo "FAIL $out"
    exit 1
fi
