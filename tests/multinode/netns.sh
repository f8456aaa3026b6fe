# Emulated hosts for the multinode tests and benchmarks (sourced, bash): Linux network
# namespaces with their own hostnames on one bridge, TCP between them, OpenMPI launching on them.
#
#   . tests/multinode/netns.sh
#   mn_prereq || { echo "SKIP: $MN_WHY"; exit 77; }
#   mn_up 3                 # hosts ${MN_ID}h0..2 on 10.231.0.0/24 through a bridge; torn down at
#                           # exit (mn_up sets the EXIT, INT and TERM traps; one set per shell)
#   mn_shape 1gbit 50us     # every link: rate and one-way delay, both directions
#   mn_mpirun "2 2 1" -- "$ZERO" train ...   # 2 ranks on h0, 2 on h1, 1 on h2 (ranks in that order)
#
# Layout: a "switch" namespace holds the bridge; each host namespace holds eth0 (a veth whose peer
# is a bridge port) and lo. Nothing is added to the calling namespace (no interface, no route, no
# address), so concurrent runs cannot collide and a crash leaves nothing in the root's network.
# Each host's /etc/hosts (ip netns exec binds /etc/netns/NS/hosts) names every host. A host's
# processes run under its own hostname (a UTS namespace per `ip netns exec`), which is how OpenMPI
# tells nodes apart; its orted is started by tests/multinode/agent.sh, OpenMPI's plm_rsh_agent,
# instead of ssh. The hosts share the machine's filesystem (and /dev/shm) and pid namespace, as a
# cluster with a shared home directory shares files: only the network and hostname are separate.

# shellcheck shell=bash disable=SC2034 # sourced: MN_WHY, MN_SHAPED... are read by the caller
MN_DIR_SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MN_PREFIX=zmn
MN_SUBNET=10.231.0 # inside the private namespaces only
MN_ID=""
MN_HOSTS=()        # host names = namespace names
MN_WORK=""
MN_WHY=""
MN_SHAPED=""

# Whether the hosts can be made here; when not, MN_WHY says why (for a SKIP line or an error).
mn_prereq() {
    if [ "$(id -u)" -ne 0 ]; then
        MN_WHY="needs root to create network namespaces (ip netns); run as root"
        return 1
    fi
    local c
    for c in ip tc unshare mpirun hostname; do
        command -v "$c" >/dev/null 2>&1 || {
            MN_WHY="'$c' not found (install iproute2, util-linux, openmpi-bin)"
            return 1
        }
    done
    local probe=${MN_PREFIX}$$probe err
    if ! err=$(ip netns add "$probe" 2>&1); then
        MN_WHY="cannot create a network namespace here: $err"
        return 1
    fi
    if ! err=$(ip netns exec "$probe" unshare --uts hostname "$probe" 2>&1); then
        ip netns del "$probe" 2>/dev/null
        MN_WHY="cannot enter a network + UTS namespace here: $err"
        return 1
    fi
    if ! err=$(ip -n "$probe" link add mnp0 type veth peer name mnp1 2>&1) ||
       ! err=$(ip -n "$probe" link add mnbr type bridge 2>&1); then
        ip netns del "$probe" 2>/dev/null
        MN_WHY="cannot create veth pairs or a bridge here: $err"
        return 1
    fi
    if ! err=$(ip netns exec "$probe" tc qdisc add dev mnp0 root tbf rate 1gbit burst 65536 limit 262144 2>&1); then
        ip netns del "$probe" 2>/dev/null
        MN_WHY="cannot shape links here (tc qdisc tbf): $err"
        return 1
    fi
    ip netns del "$probe"
    return 0
}

# Removes what an earlier run left when it was killed before its trap ran (SIGKILL by a test
# timeout): namespaces zmn<pid>..., their /etc/netns files, work directories /tmp/zmn<pid>.* and
# OpenMPI session directories of their hosts, wherever <pid> is gone.
mn_reap_stale() {
    local x id pid ns
    for x in $(ip netns list 2>/dev/null | awk '{print $1}') /tmp/"$MN_PREFIX"[0-9]* "${TMPDIR:-/tmp}/ompi.$MN_PREFIX"[0-9]*; do
        id=${x##*/}
        id=${id#ompi.}
        case $id in "$MN_PREFIX"[0-9]*) ;; *) continue ;; esac
        pid=${id#"$MN_PREFIX"}
        pid=${pid%%[!0-9]*}
        [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null || continue
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$MN_PREFIX${pid}[a-z]"); do mn_del_ns "$ns"; done
        rm -rf /tmp/"$MN_PREFIX$pid".* "${TMPDIR:-/tmp}/ompi.$MN_PREFIX$pid"h*
    done
}

# Stops what still runs in a namespace (processes this harness started there), then deletes it.
mn_del_ns() {
    local ns=$1 p
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
}

# mn_up N: N hosts (1-8) named $MN_ID-h0.., on a bridge; sets MN_HOSTS, MN_WORK; the EXIT trap
# (and INT/TERM) tears everything down. A failure tears down what was made and returns 1.
mn_up() {
    local n=$1 i ns
    MN_ID=${MN_PREFIX}$$
    mn_reap_stale
    MN_WORK=$(mktemp -d "/tmp/$MN_ID.XXXX")
    trap 'mn_down' EXIT
    trap 'mn_down; exit 130' INT TERM
    MN_HOSTS=()
    ip netns add "${MN_ID}sw" && ip -n "${MN_ID}sw" link add br0 type bridge &&
        ip -n "${MN_ID}sw" link set br0 up || { mn_down; return 1; }
    for ((i = 0; i < n; i++)); do
        ns=${MN_ID}h$i
        MN_HOSTS+=("$ns")
        ip netns add "$ns" &&
            ip -n "${MN_ID}sw" link add "p$i" type veth peer name eth0 netns "$ns" &&
            ip -n "${MN_ID}sw" link set "p$i" master br0 &&
            ip -n "${MN_ID}sw" link set "p$i" up &&
            ip -n "$ns" addr add "$MN_SUBNET.$((i + 1))/24" dev eth0 &&
            ip -n "$ns" link set eth0 up &&
            ip -n "$ns" link set lo up || { mn_down; return 1; }
    done
    for ns in "${MN_HOSTS[@]}"; do
        mkdir -p "/etc/netns/$ns"
        {
            echo "127.0.0.1 localhost"
            for ((i = 0; i < n; i++)); do echo "$MN_SUBNET.$((i + 1)) ${MN_HOSTS[$i]}"; done
        } >"/etc/netns/$ns/hosts"
    done
    # the agent's table: host name -> namespace
    ZERO_MN_HOSTS=""
    for ns in "${MN_HOSTS[@]}"; do ZERO_MN_HOSTS="$ZERO_MN_HOSTS $ns=$ns"; done
    export ZERO_MN_HOSTS
    # every host reaches every other one (the bridge forwards once the ports are up)
    for ((i = 1; i < n; i++)); do
        mn_wait_link 0 "$i" || { echo "zero multinode: host 0 cannot reach host $i" >&2; mn_down; return 1; }
    done
}

# mn_cut I: host I's link is gone (its eth0 and the bridge port deleted: nothing reaches it, and
# its peers' connections get no reset). mn_relink I makes it again, with the same MAC address (the
# same machine's NIC: the peers' ARP entries stay right), unshaped (mn_shape again for a rate).
MN_MACS=()
mn_cut() {
    MN_MACS[$1]=$(ip -n "${MN_HOSTS[$1]}" -br link show eth0 | awk '{print $3}')
    ip -n "${MN_HOSTS[$1]}" link del eth0
}
mn_relink() {
    local i=$1 ns=${MN_HOSTS[$1]}
    ip -n "${MN_ID}sw" link add "p$i" type veth peer name eth0 ${MN_MACS[$i]:+address "${MN_MACS[$i]}"} netns "$ns" &&
        ip -n "${MN_ID}sw" link set "p$i" master br0 &&
        ip -n "${MN_ID}sw" link set "p$i" up &&
        ip -n "$ns" addr add "$MN_SUBNET.$((i + 1))/24" dev eth0 &&
        ip -n "$ns" link set eth0 up && mn_wait_link 0 "$i"
}

# mn_wait_link A B: host A reaches host B over TCP within 5 s (bash's /dev/tcp, to a closed
# port: "connection refused" is an answer from B's kernel, a timeout is not).
mn_wait_link() {
    local _ out
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        out=$(mn_exec "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$MN_SUBNET.$(($2 + 1))/9" 2>&1)
        case $out in *[Rr]efused*) return 0 ;; esac
        sleep 0.5
    done
    return 1
}

mn_down() {
    local ns
    trap - EXIT INT TERM
    [ -n "$MN_ID" ] || return 0
    for ns in "${MN_HOSTS[@]}" "${MN_ID}sw"; do mn_del_ns "$ns"; done
    [ -n "$MN_WORK" ] && rm -rf "$MN_WORK"
    # OpenMPI's session directories of daemons killed with their host (test_faults)
    rm -rf "${TMPDIR:-/tmp}/ompi.$MN_ID"h*
    MN_HOSTS=()
    MN_ID=""
}

# mn_shape RATE [DELAY]: every host's link at RATE (tc units: 1gbit, 10gbit) in both directions
# (egress of the host's eth0 and of its bridge port), plus DELAY one way (e.g. 50us) each way
# where sch_netem exists. Rate: a token bucket (tbf) with a burst of 1 ms at the rate (at least
# 64 KiB: the GSO segments veth hands it) and a queue of 20 ms; delay: netem as its child.
# Without sch_netem the links get the rate only and MN_SHAPED says so. `mn_shape off` removes it.
mn_shape() {
    local rate=$1 delay=${2:-} i dev bits burst limit netem=0
    for ((i = 0; i < ${#MN_HOSTS[@]}; i++)); do
        for dev in "${MN_HOSTS[$i]} eth0" "${MN_ID}sw p$i"; do
            set -- $dev
            ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null
        done
    done
    MN_SHAPED="unshaped"
    [ "$rate" = off ] && return 0
    bits=$(mn_bits "$rate") || { echo "zero multinode: rate '$rate': expected e.g. 1gbit, 10gbit" >&2; return 1; }
    burst=$((bits / 8 / 1000))
    [ "$burst" -lt 65536 ] && burst=65536
    limit=$((bits / 8 / 50))
    [ "$limit" -lt $((4 * burst)) ] && limit=$((4 * burst))
    if [ -n "$delay" ] && ip netns exec "${MN_HOSTS[0]}" tc qdisc add dev eth0 root netem delay "$delay" 2>/dev/null; then
        netem=1
        ip netns exec "${MN_HOSTS[0]}" tc qdisc del dev eth0 root
    fi
    for ((i = 0; i < ${#MN_HOSTS[@]}; i++)); do
        for dev in "${MN_HOSTS[$i]} eth0" "${MN_ID}sw p$i"; do
            set -- $dev
            ip netns exec "$1" tc qdisc add dev "$2" root handle 1: tbf rate "$rate" burst "$burst" limit "$limit" || return 1
            if [ "$netem" = 1 ]; then
                ip netns exec "$1" tc qdisc add dev "$2" parent 1:1 handle 10: netem delay "$delay" limit 100000 || return 1
            fi
        done
    done
    MN_SHAPED="rate $rate"
    if [ "$netem" = 1 ]; then
        MN_SHAPED="$MN_SHAPED, delay $delay each way"
    elif [ -n "$delay" ]; then
        MN_SHAPED="$MN_SHAPED (delay $delay not emulated: this kernel has no sch_netem)"
    fi
    return 0
}

# mn_bits RATE: bits per second of a tc rate (kbit, mbit, gbit, or plain bit/s).
mn_bits() {
    case $1 in
    *gbit) echo $((${1%gbit} * 1000000000)) ;;
    *mbit) echo $((${1%mbit} * 1000000)) ;;
    *kbit) echo $((${1%kbit} * 1000)) ;;
    *[!0-9]* | "") return 1 ;;
    *) echo "$1" ;;
    esac
}

# mn_exec I CMD...: CMD on host I (its network namespace and hostname); with MN_TIMEOUT set,
# killed after that many seconds (TERM, then KILL 5 s later; status 124 or 137).
mn_exec() {
    local h=${MN_HOSTS[$1]}
    shift
    ${MN_TIMEOUT:+timeout -k 5 "$MN_TIMEOUT"} ip netns exec "$h" unshare --uts \
        sh -c 'hostname "$1" && shift && exec "$@"' mn "$h" "$@"
}

# mn_launch I CMD...: CMD on host I with OpenMPI's settings of mn_mpirun in the environment
# (OMPI_MCA_*: the agent, TCP on eth0) and OMP_NUM_THREADS=1, for a command that starts mpiexec
# itself (zero's --hostfile / --elastic launcher).
mn_launch() {
    local i=$1
    shift
    mn_exec "$i" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_plm_rsh_agent="$MN_DIR_SELF/agent.sh" OMPI_MCA_plm_rsh_no_tree_spawn=1 \
        OMPI_MCA_btl=tcp,vader,self OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 \
        OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$@"
}

# mn_pid_of_rank I RANK: a zero process of world rank RANK on host I (by its environment: the
# rank or its launcher monitor), or status 1.
mn_pid_of_rank() {
    local p
    for p in $(ip netns pids "${MN_HOSTS[$1]}"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = zero ] || continue
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return 0; }
    done
    return 1
}

# mn_mpirun "R0 R1 ..." [MPIRUN OPTIONS...] -- CMD...: mpirun, started on host 0, runs R0 ranks on
# host 0, R1 on host 1, ... (ranks numbered host by host), CMD in each. Ranks get
# OMP_NUM_THREADS=1 (the hosts share two cores) and whatever `-x VAR` options pass; OpenMPI talks
# TCP between hosts (its own shared memory inside one) and launches on the others through the
# agent. The hosts must have been made by mn_up with at least as many hosts as counts.
mn_mpirun() {
    local counts i np=0 hf=$MN_WORK/hostfile
    read -r -a counts <<<"$1"
    shift
    : >"$hf"
    for ((i = 0; i < ${#counts[@]}; i++)); do
        [ "${counts[$i]}" -gt 0 ] || continue
        echo "${MN_HOSTS[$i]} slots=${counts[$i]} max_slots=${counts[$i]}" >>"$hf"
        np=$((np + counts[i]))
    done
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    mn_exec 0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --allow-run-as-root --hostfile "$hf" -np "$np" --map-by slot --bind-to none \
        --mca plm_rsh_agent "$MN_DIR_SELF/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
        -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "${opts[@]}" "$@"
}
