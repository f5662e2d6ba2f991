#!/usr/bin/env bash
# scripts/cluster/repeat_runs.py on a 2x2 cluster named amspntrep: at least one run is printed,
# the summary names the plan and the run count, a bad --mesh, a build without amsp-train or a plan
# amsp-train refuses exits 2 (the last with amsp-train's rule), and no namespace of the cluster is
# left. Exit 77 (skip) without root.
set -euo pipefail
python=$1 script=$2 build=$3
export AMSP_CLUSTER_NAME=amspntrep AMSP_CLUSTER_STATE=/run/amspntrep
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root"; exit 77; }
rc=0; "$python" "$script" --mesh 4 >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || { echo "FAIL: --mesh 4 exited $rc, want 2"; exit 1; }
rc=0; err=$("$python" "$script" --build /nonexistent-build 2>&1 >/dev/null) || rc=$?
[[ $rc == 2 && $err == *"/nonexistent-build/examples/amsp_train/amsp-train not built"* ]] ||
  { echo "FAIL: a build without amsp-train exited $rc ($err), want 2 naming it"; exit 1; }
rc=0; err=$("$python" "$script" --build "$build" --mesh 2x2 --rate 1gbit --plan bogus --seconds 1 --steps 4 2>&1 >/dev/null) || rc=$?
[[ $rc == 2 && $err == *"[rule plan.parse]"* && $err != *Traceback* ]] ||
  { echo "FAIL: a plan amsp-train refuses exited $rc ($err), want 2 with its rule"; exit 1; }
out=$("$python" "$script" --build "$build" --mesh 2x2 --rate 1gbit --plan ddp --seconds 1 --steps 4 \
      --train-args "--device-ms-per-sequence 1") || {
  rc=$?; [[ $rc == 77 ]] && exit 77; echo "FAIL: exit $rc"; echo "$out"; exit 1; }
echo "$out"
grep -Eq '^ +0 step +[0-9.]+ ms  rank 0 compute +[0-9.]+ ms  steal +[0-9.]+ %$' <<<"$out" || { echo "FAIL: no run line"; exit 1; }
grep -Eq '^ddp on 2x2 at 1gbit: [1-9][0-9]* runs, step mean [0-9.]+ ms' <<<"$out" || { echo "FAIL: no summary"; exit 1; }
if ip netns list | grep -q amspntrep; then echo "FAIL: namespaces left: $(ip netns list | grep amspntrep)"; exit 1; fi
echo "repeat_runs: ok"
