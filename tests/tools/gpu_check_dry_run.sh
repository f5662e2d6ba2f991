#!/usr/bin/env bash
# scripts/gpu-check.sh on a machine without a GPU, from this build's binaries, so that the script a
# GPU session runs once cannot rot: staging works, every planned run appears in the summary as
# skipped (or passed, for the tests that need no device), none failed or timed out, and the logs
# come back as one archive holding one log per run. Exit 77 (skip) where a GPU is present: there
# the script runs for real (docs/testing.md, "GPU checks").
set -euo pipefail
script=$1 build=$2
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: a GPU is present"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export AMSP_GPU_STAGE=$work/stage OUT=$work/out AMSP_GPU_BUDGET_S=300
"$script" stage "$build" > "$work/stage.txt" 2>&1 || { cat "$work/stage.txt"; echo "FAIL: staging"; exit 1; }
rc=0; "$script" run > "$work/summary.txt" 2>&1 || rc=$?
cat "$work/summary.txt"
[[ $rc == 0 ]] || { echo "FAIL: run exited $rc"; exit 1; }
labels=(test_core_dtype_cuda test_core_cuda_buffer test_optim_cuda test_comm_threads_cuda test_comm_threads_cuda_host
        test_engine_device_ops nccl_one_rank_world nccl_world_and_split nccl_adopt nccl_watchdog test_engine_cuda
        test_engine_cuda_in_backward test_engine_cuda_device_wait)
tar tzf "$OUT/logs.tar.gz" > "$work/archive.txt"  # listed once: `tar | grep -q` fails by SIGPIPE under pipefail
for label in "${labels[@]}"; do
  grep -Eq "^$label +(skipped \(no usable GPU\)|passed) " "$work/summary.txt" || { echo "FAIL: no verdict for $label"; exit 1; }
  grep -qx "./$label.log" "$work/archive.txt" || { echo "FAIL: no log of $label in logs.tar.gz"; exit 1; }
done
! grep -Eq "FAILED|TIMED OUT" "$work/summary.txt" || { echo "FAIL: a run failed"; exit 1; }
for bench in bench_optim_cuda bench_comm_threads_cuda bench_engine_cuda; do
  grep -Eq "^$bench +rc=0 " "$work/summary.txt" || { echo "FAIL: $bench did not end cleanly"; exit 1; }
done
[[ $(find "$OUT" -maxdepth 1 -type f | wc -l) -le 8 ]] || { echo "FAIL: more than 8 files under \$OUT"; exit 1; }
echo "gpu_check_dry_run: ok"
