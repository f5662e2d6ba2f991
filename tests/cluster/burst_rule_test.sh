#!/usr/bin/env bash
# ctest `cluster_burst_rule` (unit, no root): the token buckets' default burst (scripts/cluster.sh,
# docs/cluster.md "The token bucket's burst"): 0.75 ms of the rate, at least 37.5 KB, at most
# 1.5 ms of the rate, at least 18000 bytes; AMSP_CLUSTER_BURST overrides; bad input exits 2.
# The expected bytes are worked by hand: 1 Gbit/s = 125e6 B/s, so 0.75 ms = 93750 B.
#   burst_rule_test.sh CLUSTER_SH
set -uo pipefail
cluster=$1 failed=0
expect() {  # expect RATE BYTES
  local got
  got=$(env -u AMSP_CLUSTER_BURST "$cluster" burst "$1" 2>&1)
  [[ $got == "$2" ]] || { echo "FAIL: burst $1: expected $2, got '$got'"; failed=1; }
}
expect 1gbit 93750     # 0.75 ms of 125 MB/s
expect 2gbit 187500    # 0.75 ms of 250 MB/s
expect 600mbit 56250   # 0.75 ms of 75 MB/s
expect 300mbit 37500   # 0.75 ms = 28125 < 37.5 KB floor; 1.5 ms = 56250 above it
expect 200mbit 37500   # 1.5 ms = 37500: the floor and the ceiling meet
expect 100mbit 18750   # 1.5 ms of 12.5 MB/s caps the 37.5 KB floor
expect 10mbit 18000    # 1.5 ms = 1875 B: two 9000-byte frames at least
expect 125mbps 93750   # tc's bps is bytes per second: 125 MB/s, as 1gbit

got=$(AMSP_CLUSTER_BURST=64kb "$cluster" burst 1gbit 2>&1)
[[ $got == 64kb ]] || { echo "FAIL: AMSP_CLUSTER_BURST=64kb: expected 64kb, got '$got'"; failed=1; }

bad() {  # bad WHAT ARGS...: exit 2 and a message naming the value
  local out rc
  out=$("${@:2}" 2>&1); rc=$?
  [[ $rc == 2 && $out == *"$1"* ]] || { echo "FAIL: ${*:2}: expected exit 2 naming '$1', got $rc '$out'"; failed=1; }
}
bad "'1gb'" "$cluster" burst 1gb
bad "usage: burst RATE" "$cluster" burst
bad "'64x'" env AMSP_CLUSTER_BURST=64x "$cluster" burst 1gbit
((failed == 0)) && echo "burst rule: 8 rates, the override and 3 bad inputs as worked by hand"
exit $failed
