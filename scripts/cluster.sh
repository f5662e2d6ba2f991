#!/usr/bin/env bash
# An emulated multi-node cluster on one Linux machine (docs/cluster.md), for Open MPI jobs.
#
#   scripts/cluster.sh up N R RATE      N nodes of R rank slots, each node's link limited to RATE
#                                       (tc syntax: 1gbit, 500mbit) in each direction
#   scripts/cluster.sh down             removes everything `up` created, by name
#   scripts/cluster.sh run -- ARGS...   mpirun ARGS across the nodes (ranks fill node 0 first)
#   scripts/cluster.sh counters         "node<k> <tx bytes> <rx bytes>" of each node's link
#   scripts/cluster.sh status           the configuration, or "down" (exit 1)
#   scripts/cluster.sh burst RATE       the token buckets' burst `up` gives a link of RATE
# Environment: AMSP_CLUSTER_NAME (amspn; the prefix of every name, so that a test's cluster and a
# user's can coexist), AMSP_CLUSTER_STATE (/run/$AMSP_CLUSTER_NAME), AMSP_CLUSTER_COLL (pinned),
# AMSP_CLUSTER_CPUS (node: each node's processes on CPUs of their own; none: every CPU for all),
# AMSP_CLUSTER_BURST (each token bucket's burst, tc size syntax: what an idle link lets through at
# once above the rate; default 0.75 ms of the rate within 37.5 KB..1.5 ms of it, at least two
# 9000-byte frames; docs/cluster.md).
#
# Topology: every object lives in a network namespace this script creates, nothing in the host's:
# a switch namespace (amspn-sw) holds a bridge; each node namespace (amspn-n<k>) and the launcher
# namespace (amspn-head, where mpirun runs) is plugged into it by a veth pair. Addresses come from
# 10.251.14.0/24, which exists only inside these namespaces; no namespace has a default route.
# Each node's link is shaped by a tc token bucket on both ends (node -> switch and switch -> node).
# Must run as root (ip netns); exits 77 (the ctest skip code) when it cannot.
set -Eeuo pipefail

readonly PREFIX=${AMSP_CLUSTER_NAME:-amspn}  # several clusters may coexist under different names
[[ $PREFIX =~ ^amspn[a-z0-9]{0,6}$ ]] || { echo "cluster.sh: AMSP_CLUSTER_NAME must be amspn followed by up to 6 of [a-z0-9], got '$PREFIX'" >&2; exit 2; }
readonly SUBNET=10.251.14
readonly STATE=${AMSP_CLUSTER_STATE:-/run/${PREFIX}}
readonly SWITCH=${PREFIX}-sw HEAD=${PREFIX}-head
readonly MTU=9000

die() { echo "cluster.sh: $*" >&2; exit 2; }
skip() { echo "cluster.sh: SKIP: $*" >&2; exit 77; }

require_root_netns() {
  [[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then skip "needs iproute2 (ip, tc)"; fi
  command -v unshare >/dev/null || skip "needs unshare (util-linux)"
  command -v taskset >/dev/null || skip "needs taskset (util-linux)"
  # Probe: create and remove one namespace of our own.
  local probe=${PREFIX}-probe$$
  ip netns add "$probe" 2>/dev/null || skip "ip netns add is not permitted here"
  ip netns del "$probe"
}

node_ns() { echo "${PREFIX}-n$1"; }
node_ip() { echo "${SUBNET}.$((10 + $1))"; }
readonly HEAD_IP=${SUBNET}.2

# Every namespace is recorded in $STATE/created as soon as it exists, so that `down` after a
# failure half-way removes it too (and never one that existed before: `ip netns add` fails then).
make_ns() {
  ip netns add "$1"
  echo "$1" >>"$STATE/created"
  ip -n "$1" link set lo up
}

# Plugs namespace $1 into the bridge as $3/24 through a veth pair (`eth0` inside, $2 on the switch).
plug() {
  local ns=$1 port=$2 addr=$3
  ip -n "$SWITCH" link add "$port" mtu $MTU type veth peer name eth0 mtu $MTU netns "$ns"
  ip -n "$SWITCH" link set "$port" master br0 up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
}

# Token bucket. Its burst is what an idle link lets through at once: a real link gives nothing of
# the kind, but tbf needs a burst to reach its rate. Default: 0.75 ms of the rate, at least
# 37.5 KB, at most 1.5 ms of the rate, at least two 9000-byte frames (18.75 KB at 100 Mbit/s,
# 37.5 KB at 200 Mbit/s, 93.75 KB at 1 Gbit/s). Each bound is a measurement on this machine
# (docs/cluster.md, "The token bucket's burst"): 0.5 ms at 1 Gbit/s and 18.75 KB at 200 Mbit/s
# slowed back-to-back AllReduces by up to 11 %, while 1.5 ms at 1 Gbit/s let a 74 KB gather after
# compute through in 0.5 ms of its 1.2 (a free start the back-to-back profile never sees).
default_burst() {
  awk -v r="$1" 'BEGIN {
    match(r, /^[0-9.]+/); n = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
    m = (u ~ /^k/) ? 1e3 : (u ~ /^m/) ? 1e6 : (u ~ /^g/) ? 1e9 : (u ~ /^t/) ? 1e12 : 1
    bytes = n * m / (u ~ /bit$/ ? 8 : 1)
    b = bytes * 0.00075; if (b < 37500) b = 37500; if (b > bytes * 0.0015) b = bytes * 0.0015
    b = int(b); if (b < 18000) b = 18000; print b }'
}
check_rate() {
  [[ $1 =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] || die "RATE must be a tc rate such as 1gbit, got '$1'"
}
check_burst_setting() {
  [[ -z ${AMSP_CLUSTER_BURST:-} || $AMSP_CLUSTER_BURST =~ ^[1-9][0-9]*(k|kb|m|mb)?$ ]] || die "AMSP_CLUSTER_BURST must be a tc size such as 64kb, got '$AMSP_CLUSTER_BURST'"
}
burst_of() { echo "${AMSP_CLUSTER_BURST:-$(default_burst "$1")}"; }
shape() { tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst "$(burst_of "$3")" latency 100ms; }

cmd_down() {
  [[ $(id -u) == 0 ]] || skip "needs root"
  if [[ -f $STATE/created ]]; then
    # Reverse order: nodes and head first, the switch last.
    tac "$STATE/created" | while read -r ns; do
      [[ $ns == "${PREFIX}"-* ]] || continue  # never anything we did not name
      ip netns del "$ns" 2>/dev/null || true
    done
  fi
  rm -rf "$STATE"
}

# "<node namespace> <cpu list>" for each of $1 nodes: the CPUs this process may use, split into
# equal blocks, one per node (node k on CPU k mod #CPUs when nodes outnumber CPUs), or every CPU
# for every node with AMSP_CLUSTER_CPUS=none. Why: with all nodes' ranks free to run on every core,
# a 4x2 run over TCP fell into phases of 2-5x slower steps (no drops, no qdisc involved; see
# docs/cluster.md "CPUs"), and real nodes do not share cores.
node_cpus() {
  local nodes=$1 mode=${AMSP_CLUSTER_CPUS:-node} allowed range k
  local -a cpus=()
  allowed=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
  for range in ${allowed//,/ }; do
    if [[ $range == *-* ]]; then
      for ((k = ${range%-*}; k <= ${range#*-}; ++k)); do cpus+=("$k"); done
    else
      cpus+=("$range")
    fi
  done
  for ((k = 0; k < nodes; ++k)); do
    if [[ $mode == none ]]; then
      echo "$(node_ns $k) $allowed"
    elif ((nodes >= ${#cpus[@]})); then
      echo "$(node_ns $k) ${cpus[k % ${#cpus[@]}]}"
    else
      local block=$((${#cpus[@]} / nodes)) list="" c
      for ((c = k * block; c < (k + 1) * block; ++c)); do list+="${list:+,}${cpus[c]}"; done
      echo "$(node_ns $k) $list"
    fi
  done
}

cmd_up() {
  (($# == 3)) || die "usage: up N R RATE (e.g. up 2 4 1gbit)"
  local nodes=$1 ranks=$2 rate=$3
  [[ $nodes =~ ^[1-9][0-9]?$ && $nodes -le 64 ]] || die "N must be 1..64 nodes, got '$nodes'"
  [[ $ranks =~ ^[1-9][0-9]?$ ]] || die "R must be 1..99 rank slots, got '$ranks'"
  check_rate "$rate"
  check_burst_setting
  [[ ${AMSP_CLUSTER_CPUS:-node} =~ ^(node|none)$ ]] || die "AMSP_CLUSTER_CPUS must be node or none, got '$AMSP_CLUSTER_CPUS'"
  require_root_netns
  if [[ -f $STATE/config ]]; then
    if [[ $(cat "$STATE/config") == "$nodes $ranks $rate" && $(cat "$STATE/burst" 2>/dev/null) == "$(burst_of "$rate")" ]] &&
      ip netns list | grep -qw "$SWITCH"; then
      node_cpus "$nodes" >"$STATE/cpus"  # AMSP_CLUSTER_CPUS may differ from the last `up`
      echo "cluster.sh: already up: $nodes nodes x $ranks slots at $rate"
      return 0
    fi
    cmd_down
  fi
  mkdir -p "$STATE"
  : >"$STATE/created"
  trap 'echo "cluster.sh: up failed, removing what was created" >&2; cmd_down; exit 1' ERR INT TERM
  make_ns "$SWITCH"
  ip -n "$SWITCH" link add br0 mtu $MTU type bridge
  ip -n "$SWITCH" link set br0 up
  make_ns "$HEAD"
  plug "$HEAD" head "$HEAD_IP"
  : >"$STATE/hostfile"
  printf '127.0.0.1 localhost\n%s %s\n' "$HEAD_IP" "$HEAD" >"$STATE/hosts"
  for ((k = 0; k < nodes; ++k)); do
    local ns
    ns=$(node_ns $k)
    make_ns "$ns"
    plug "$ns" "n$k" "$(node_ip $k)"
    shape "$ns" eth0 "$rate"       # node -> switch
    shape "$SWITCH" "n$k" "$rate"  # switch -> node
    echo "$ns slots=$ranks" >>"$STATE/hostfile"
    echo "$(node_ip $k) $ns" >>"$STATE/hosts"
  done
  node_cpus "$nodes" >"$STATE/cpus"
  # The rsh agent Open MPI launches its daemons with: on the node's CPUs (node_cpus), enter the
  # node's network namespace, with
  # its own hostname (Open MPI tells nodes apart by it), its own /dev/shm (the shared-memory
  # segments of different nodes must not meet) and the cluster's /etc/hosts.
  cat >"$STATE/rsh-agent" <<EOF
#!/bin/sh
# Generated by scripts/cluster.sh: runs Open MPI's daemon command on an emulated node.
host=\$1; shift
case \$host in ${PREFIX}-n*) ;; *) echo "rsh-agent: unknown node \$host" >&2; exit 1 ;; esac
cpus=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$STATE/cpus")
exec taskset -c "\${cpus:?no CPUs recorded for \$host}" ip netns exec "\$host" unshare --uts --mount sh -c \
  "hostname \$host && mount -t tmpfs tmpfs /dev/shm && mount --bind $STATE/hosts /etc/hosts && exec \$*"
EOF
  chmod +x "$STATE/rsh-agent"
  echo "$nodes $ranks $rate" >"$STATE/config"
  burst_of "$rate" >"$STATE/burst"
  trap - ERR INT TERM
  echo "cluster.sh: up: $nodes nodes x $ranks slots, $rate per node link, $SUBNET.0/24 inside ${PREFIX}-* namespaces; CPUs: $(awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }' "$STATE/cpus")"
}

# The Open MPI settings every run uses (docs/cluster.md says why each).
mpirun_args() {
  echo --allow-run-as-root --oversubscribe --bind-to none --hostfile "$STATE/hostfile"
  echo --mca plm_rsh_agent "$STATE/rsh-agent" --mca plm_rsh_no_tree_spawn 1
  echo --mca pml ob1 --mca btl self,vader,tcp
  echo --mca btl_tcp_if_include $SUBNET.0/24 --mca oob_tcp_if_include $SUBNET.0/24
  echo --mca mpi_yield_when_idle 1
  # Pinned collective algorithms (the defaults switch by message size and ignore the node
  # boundary): AllGather by recursive doubling, blocking (coll tuned) and nonblocking (libnbc,
  # the engine's prefetching gathers) alike, so that amsp-profile's blocking calls time what the
  # engine runs; AllReduce as a ring; ReduceScatter-block by recursive halving (4.1 has no ring).
  if [[ ${AMSP_CLUSTER_COLL:-pinned} == pinned ]]; then
    echo --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allgather_algorithm 3
    echo --mca coll_libnbc_iallgather_algorithm 2
    echo --mca coll_tuned_allreduce_algorithm 4 --mca coll_tuned_reduce_scatter_block_algorithm 3
  fi
}

cmd_run() {
  [[ ${1:-} == -- ]] && shift
  [[ -f $STATE/config ]] || die "the cluster is down (scripts/cluster.sh up N R RATE first)"
  # mpirun runs in the head namespace with the cluster's /etc/hosts, on the same bridge.
  # shellcheck disable=SC2046,SC2016 # word-split options; $0 and $@ expand in the inner sh
  exec ip netns exec "$HEAD" unshare --mount sh -c 'mount --bind "$0/hosts" /etc/hosts && shift && exec "$@"' \
    "$STATE" _ mpirun $(mpirun_args) "$@"
}

cmd_counters() {
  [[ -f $STATE/config ]] || die "the cluster is down"
  local nodes k
  read -r nodes _ <"$STATE/config"
  for ((k = 0; k < nodes; ++k)); do
    local ns
    ns=$(node_ns $k)
    echo "node$k $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes) $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)"
  done
}

cmd_status() {
  if [[ -f $STATE/config ]]; then
    read -r n r rate <"$STATE/config"
    echo "up: $n nodes x $r slots at $rate, token-bucket burst $(cat "$STATE/burst"); hostfile $STATE/hostfile"
  else
    echo down
    return 1
  fi
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  run) shift; cmd_run "$@" ;;
  counters) cmd_counters ;;
  status) cmd_status ;;
  burst) (($# == 2)) || die "usage: burst RATE (e.g. burst 1gbit)"; check_rate "$2"; check_burst_setting; burst_of "$2" ;;
  *) die "usage: cluster.sh up N R RATE | down | run -- MPIRUN-ARGS | counters | status | burst RATE" ;;
esac
