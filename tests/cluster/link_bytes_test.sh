#!/usr/bin/env bash
# ctest `cluster`: brings up a 2-node x 2-rank emulated cluster (scripts/cluster.sh), checks each
# node's CPU block, trains the
# example across it with one plan, and checks the bytes that crossed each node's link -- counted
# by the kernel, independently of amsp -- against the engine's expected inter-node traffic.
#
#   link_bytes_test.sh AMSP_TRAIN CLUSTER_SH
#
# Bytes per step are the difference of two runs (SHORT and LONG steps, no validation in between):
# MPI start-up, the initial and final validation gathers and the launcher's traffic are the same
# in both and cancel. The plan is hsdp on 2x2: the only inter-node term is grad_replicas, an
# AllReduce between the two ranks holding the same shard on different nodes, so every byte the
# engine counts as inter-node crosses a link (in groups with several ranks per node the engine
# counts all bytes as inter-node although a ring crosses the link only once per node).
# Exit 77 (skip) without root, ip netns, mpirun or an MPI-enabled amsp-train.
set -euo pipefail
train=$1 cluster=$2
export AMSP_CLUSTER_NAME=amspntest AMSP_CLUSTER_STATE=/run/amspntest
unset AMSP_CLUSTER_BURST  # the default burst is checked below
readonly SHORT=2 LONG=8 RANKS_PER_NODE=2

if ! command -v mpirun >/dev/null || ! command -v python3 >/dev/null; then echo "SKIP: needs mpirun and python3"; exit 77; fi
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
"$cluster" up 2 $RANKS_PER_NODE 1gbit  # exits 77 without root or ip netns

# The links carry the default burst (0.75 ms of 1 Gbit/s = 93750 bytes), and status names it in
# the form scripts/cluster/check_measure.py saves with a run; tc keeps its own granularity
# (93625 bytes here), so the qdisc's burst is read to within 1 %.
status=$("$cluster" status)
[[ $status == *"token-bucket burst 93750;"* ]] || { echo "FAIL: status does not name the burst 93750: $status"; exit 1; }
for link in "n0 eth0" "sw n0"; do  # namespace suffix, device: both ends of node 0's link
  read -r ns dev <<<"$link"
  qdisc=$(tc -n "amspntest-$ns" qdisc show dev "$dev")
  [[ $qdisc =~ burst\ ([0-9]+)b ]] && ((BASH_REMATCH[1] > 92800 && BASH_REMATCH[1] < 94700)) ||
    { echo "FAIL: amspntest-$ns $dev: expected a burst near 93750 bytes: $qdisc"; exit 1; }
done

# Each node's processes run on CPUs of their own (cluster.sh's AMSP_CLUSTER_CPUS=node, the
# default): the host's CPUs in equal blocks, one per node, or node k on CPU k mod #CPUs. Every rank
# reports its node and its affinity; python3 derives the expected sets from this shell's own.
report=$(mktemp /tmp/amspntest-affinity.XXXXXX)
trap 'rm -f "$report"; "$cluster" down >/dev/null 2>&1 || true' EXIT
printf '#!/bin/sh\necho "$(hostname) $(awk '"'"'/^Cpus_allowed_list/ { print $2 }'"'"' /proc/self/status)"\n' >"$report"
chmod +x "$report"
timeout 60 "$cluster" run -- -np 4 "$report" | python3 -c '
import os, sys
def cpus(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out
mine = sorted(os.sched_getaffinity(0))
nodes = 2
block = len(mine) // nodes
want = {f"amspntest-n{k}": ({mine[k % len(mine)]} if block == 0 else set(mine[k * block:(k + 1) * block]))
        for k in range(nodes)}
seen = [line.split() for line in sys.stdin if line.strip()]
assert len(seen) == 4, f"expected 4 ranks to report, got {seen}"
for host, allowed in seen:
    assert cpus(allowed) == want[host], f"{host} runs on CPUs {allowed}, expected {sorted(want[host])}"
print("CPU blocks per node:", ", ".join(f"{h} {sorted(c)}" for h, c in want.items()))
'

tx_total() { "$cluster" counters | awk '{ s += $2 } END { printf "%.0f\n", s }'; }
run() {  # run STEPS: prints "<link bytes sent by all nodes> <final JSON line>"
  local before after json
  before=$(tx_total)
  json=$(timeout 60 "$cluster" run -- -np 4 "$train" --backend mpi --mesh 2x2 --plan hsdp --steps "$1" \
           --eval-every 0 --eval-windows 4 --sample-bytes 0 --quiet | tail -n 1)
  after=$(tx_total)
  echo "$((after - before)) $json"
}
field() { grep -o "\"$1\":[0-9.e+-]*" <<<"$2" | cut -d: -f2; }

read -r short_bytes short_json < <(run $SHORT)
if grep -q "built without MPI" <<<"$short_json"; then echo "SKIP: amsp-train without MPI"; exit 77; fi
read -r long_bytes long_json < <(run $LONG)

counted=$(field bytes_inter_per_step "$long_json")    # rank 0's traffic counter
expected=$(field expected_bytes_inter_per_step "$long_json")
python3 - "$short_bytes" "$long_bytes" "$counted" "$expected" <<PY
import sys
short, long_, counted, expected = map(float, sys.argv[1:])
nodes, ranks = 2, $RANKS_PER_NODE
per_step = (long_ - short) / ($LONG - $SHORT)       # bytes all nodes sent per step
engine = expected * nodes * ranks                   # every rank sends the same in hsdp
overhead = per_step / engine - 1
print(f"link bytes per step (all nodes): {per_step:.0f}; engine's expected inter-node bytes x ranks: "
      f"{engine:.0f}; counter: {counted:.0f} per rank; MPI/TCP framing overhead {100 * overhead:.2f} %")
assert counted == expected, "amsp's traffic counter disagrees with the engine's expectation"
assert expected > 0, "hsdp on 2x2 must send bytes across nodes"
# Framing: TCP/IP headers (~0.6 % at MTU 9000), ACKs, MPI headers, the per-step loss AllReduce.
assert 0.0 <= overhead <= 0.05, f"link bytes are {100 * overhead:.2f} % off the engine's expectation"
PY
