#!/usr/bin/env bash
# ctest `cluster_predict_cli` (unit, no cluster): amsp-cluster-predict's on/off flags and the wait
# between compute segments at the head of a unit's reduction chain (Cluster::chain_head_waits,
# docs/planner-check-chain-wait.md). ZeRO-1 and ZeRO-2 make the same calls on 4x2 with one
# micro-batch (a world ReduceScatter per bucket after its backward, the norm, the spread); the
# example with --layers 2 has four buckets (embeddings, two blocks, head), so with 1 ms of wait
# per call ZeRO-2's step without overlap is 4 ms longer than ZeRO-1's under --chain-wait off
# (only its every-micro-batch ReduceScatters wait) and equal under on (the default).
#   predict_cli_test.sh AMSP_CLUSTER_PREDICT
set -uo pipefail
predict=$1 failed=0
serial_gap() {  # serial_gap [ARGS...]: ZeRO-2's step without overlap minus ZeRO-1's, in ms
  "$predict" --mesh 4x2 --plans 'zero1;zero2' --node-gbit 1 --seconds-per-sample 1e-3 \
    --update-seconds-per-param 0 --sync-overhead 0.001 --layers 2 "$@" |
    sed -n 's/.*"serial":\([0-9.e-]*\),.*/\1/p' | paste -sd' ' | awk '{printf "%.3f", ($2 - $1) * 1e3}'
}
expect() {  # expect WHAT GOT WANT
  [[ $2 == "$3" ]] || { echo "FAIL: $1: expected $3, got '$2'"; failed=1; }
}
expect "zero2 - zero1, --chain-wait on (default)" "$(serial_gap)" 0.000
expect "zero2 - zero1, --chain-wait on" "$(serial_gap --chain-wait on)" 0.000
expect "zero2 - zero1, --chain-wait off" "$(serial_gap --chain-wait off)" 4.000

# --update-turns k prices each rank's update k times over (ComputeModel::update_turns): DDP updates
# all 134912 parameters of this model, so at 1 ns each 4 turns add 3 × 0.134912 ms to its step.
ddp_serial() {  # ddp_serial TURNS: DDP's step without overlap, in µs
  "$predict" --mesh 4x2 --plans ddp --node-gbit 1 --seconds-per-sample 1e-3 --update-seconds-per-param 1e-9 \
    --context 32 --width 64 --heads 4 --layers 2 --update-turns "$1" |
    sed -n 's/.*"serial":\([0-9.e-]*\),.*/\1/p'
}
expect "ddp, 4 update turns - 1" "$(awk -v a="$(ddp_serial 4)" -v b="$(ddp_serial 1)" 'BEGIN { printf "%.0f", (a - b) * 1e6 }')" 405

bad() {  # bad WHAT ARGS...: exit 2 and a message naming the value
  local out rc
  out=$("$predict" "${@:2}" 2>&1); rc=$?
  [[ $rc == 2 && $out == *"$1"* ]] || { echo "FAIL: ${*:2}: expected exit 2 naming '$1', got $rc '$out'"; failed=1; }
}
bad "--chain-wait must be on or off, got 'maybe'" --chain-wait maybe
bad "--arrival-spread must be on or off, got 'yes'" --arrival-spread yes
bad "--stagger must be on or off, got ''" --stagger ''
bad "the update's turns (ranks updating one after another on a core) must be at least 1, got 0.5" \
  --mesh 4x2 --plans ddp --node-gbit 1 --seconds-per-sample 1e-3 --update-turns 0.5
exit $failed
