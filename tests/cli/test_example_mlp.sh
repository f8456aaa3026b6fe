#!/usr/bin/env bash
# examples/mlp.c trains under `mpirun -np 3` at stages 0 and 3: the loss falls, and both stages
# print the same losses (the same computation), while stage 3 keeps a third of the parameters.
set -euo pipefail
bin="$ZERO_BUILD_DIR/examples/mlp"
out0=$(mpiexec --oversubscribe -np 3 "$bin" 0 41)
out3=$(mpiexec --oversubscribe -np 3 "$bin" 3 41)
first=$(echo "$out3" | awk '/^step +0 /{print $4}')
last=$(echo "$out3" | awk '/^step +40 /{print $4}')
echo "$out3"
awk -v a="$first" -v b="$last" 'BEGIN{ if (!(b < 0.7 * a)) { print "loss did not fall: " a " -> " b; exit 1 } }'
[ "$(echo "$out0" | grep '^step')" = "$(echo "$out3" | grep '^step')" ] || { echo "stage 0 and 3 losses differ"; echo "$out0"; exit 1; }
p0=$(echo "$out0" | sed -n 's/.*params \([0-9]*\) B.*/\1/p')
p3=$(echo "$out3" | sed -n 's/.*params \([0-9]*\) B.*/\1/p')
[ "$p0" -eq $((3 * p3)) ] || { echo "stage 3 params $p3 B is not a third of stage 0's $p0 B"; exit 1; }
echo "ok"
