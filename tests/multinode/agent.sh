#!/usr/bin/env bash
# OpenMPI's remote launch agent for the emulated hosts (plm_rsh_agent): "agent.sh HOST CMD..."
# runs CMD as a remote shell would, inside HOST's network namespace and under HOST's hostname.
# The hosts are named in $ZERO_MN_HOSTS ("name=netns ..."), which the harness (netns.sh) exports.
set -u
host=${1:?usage: agent.sh HOST COMMAND...}
shift
ns=""
for h in ${ZERO_MN_HOSTS:-}; do
    [ "${h%%=*}" = "$host" ] && ns=${h#*=}
done
if [ -z "$ns" ]; then
    echo "zero multinode agent: unknown host '$host' (expected one of: ${ZERO_MN_HOSTS:-none})" >&2
    exit 255
fi
# ssh hands its words to the remote user's shell as one command line: do the same.
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' agent "$host" "$*"
