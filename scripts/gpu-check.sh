#!/usr/bin/env bash
# The GPU checks of amsp in one prepared call, for a session that is lent a GPU machine (one H200):
# build here, where the Debian packages are (doctest, Google Benchmark, nvcc), run there.
#
#   scripts/gpu-check.sh build   # here: preset gpu (sm_90), builds the GPU tests and benchmarks and
#                                # stages them, with the shared libraries the GPU image may lack,
#                                # in build-gpu-carry/ (about 10 MiB)
#   scripts/gpu-check.sh stage B # the same staging from an existing build folder B
#   scripts/gpu-check.sh run     # on the GPU machine (device tool: carry ["build-gpu-carry"]):
#                                # runs every staged test and benchmark, writes logs and JSON
#                                # under $OUT (default ./gpu-out), ends with a summary table
#
# Not staged: the NCCL backend's test and benchmark, which need an MPI runtime the GPU image does
# not have; run them where MPI and NCCL are installed:
#   ctest --test-dir build/gpu -R nccl; mpirun -np <gpus> build/gpu/bench/comm/bench_comm_nccl
set -uo pipefail
cd "$(dirname "$0")/.."

stage=${AMSP_GPU_STAGE:-build-gpu-carry}  # another folder: the dry-run test (tests/tools)
tests=(tests/core/test_core_dtype_cuda tests/core/test_core_cuda_buffer tests/optim/test_optim_cuda
       tests/comm/test_comm_threads_cuda tests/comm/test_comm_threads_cuda_host)
tests+=(tests/engine/test_engine_device_ops)
tests+=(tests/comm/test_comm_nccl_bootstrap)  # NCCL without MPI: unique id, adopt, split, watchdog
tests+=(tests/engine/test_engine_cuda)  # the engine in the CUDA space: parity, host comparison, no host sync
# What run() runs of the staged tests: a label (its log's name), optionally limit=<seconds> (else
# 150) and VAR=value settings, the binary, its doctest arguments. test_engine_cuda runs as three
# runs, each under its own timeout: its update-in-backward cases apart, and once more with the
# user's stream waiting for the engine's tasks on the device (AMSP_CUDA_TASK_WAIT=device, which
# deadlocked on the first GPU run; last, as it may hang).
runs=()
for t in "${tests[@]}"; do
  name=$(basename "$t")
  [[ $name == test_engine_cuda || $name == test_comm_nccl_bootstrap ]] || runs+=("$name $name")
done
# The NCCL cases apart, so that one that aborts the program (the split case did on the first run)
# hides none of the others; NCCL's warnings in the logs.
runs+=("nccl_one_rank_world NCCL_DEBUG=WARN test_comm_nccl_bootstrap --test-case=*one-rank?world?from*")
runs+=("nccl_world_and_split NCCL_DEBUG=INFO test_comm_nccl_bootstrap --test-case=*split?of?a?one-rank*")
runs+=("nccl_adopt NCCL_DEBUG=WARN test_comm_nccl_bootstrap --test-case=*adopt*")
runs+=("nccl_watchdog NCCL_DEBUG=WARN test_comm_nccl_bootstrap --test-case=*watchdog*")
runs+=("test_engine_cuda limit=120 test_engine_cuda --test-case-exclude=*update_in_backward*")
runs+=("test_engine_cuda_in_backward limit=100 test_engine_cuda --test-case=*update_in_backward*")
not_in_backward=--test-case-exclude=*update_in_backward*
runs+=("test_engine_cuda_device_wait limit=60 AMSP_CUDA_TASK_WAIT=device test_engine_cuda $not_in_backward")
benches=(bench/optim/bench_optim_cuda bench/comm/bench_comm_threads_cuda)
benches+=(bench/engine/bench_engine_cuda)  # the engine in the CUDA space, phase by phase

build() {
  cmake --preset gpu -DAMSP_WITH_MPI=OFF -DAMSP_BUILD_EXAMPLES=OFF >/dev/null || return 1
  local targets=()
  for t in "${tests[@]}" "${benches[@]}"; do targets+=("$(basename "$t")"); done
  cmake --build build/gpu --target "${targets[@]}" || return 1
  stage_from build/gpu
}

# stage_from BUILD_DIR: the staged binaries of BUILD_DIR in $stage, with the libraries they load
# that are not in a CUDA + Python image (Google Benchmark, the CUDA runtime they were linked to).
stage_from() {
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  for t in "${tests[@]}" "${benches[@]}"; do cp "$1/$t" "$stage/bin/" || return 1; done
  ldd "$stage"/bin/* | awk '/=> \// {print $3}' | sort -u | grep -E 'libbenchmark|libcudart' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  du -sh "$stage"
}

# The device lease is short (15 minutes for a session, machine start included), so run() keeps to a
# budget: AMSP_GPU_BUDGET_S seconds (default 450) for everything, each step's timeout cut to what is
# left: the tests first, then the benchmarks, then compute-sanitizer memcheck over the small CUDA
# tests with whatever time remains. A test still running at its limit gets every thread's
# backtrace (cuda-gdb, which also lists the kernels on the GPU) before it is killed. The logs go
# back as one archive, logs.tar.gz (the device tool returns at most 8 files).
budget_left() { echo $(( ${AMSP_GPU_BUDGET_S:-450} - SECONDS )); }
step_timeout() {  # the smaller of $1 and the budget left, at least 1
  local left; left=$(budget_left)
  (( left < $1 )) && set -- "$left"
  (( $1 < 1 )) && set -- 1
  echo "$1"
}

# run_with_backtrace LIMIT LOG BACKTRACE COMMAND...: COMMAND's status, 124 when it ran past LIMIT.
run_with_backtrace() {
  local limit=$1 log=$2 backtrace=$3; shift 3
  "$@" > "$log" 2>&1 &
  local pid=$! started=$SECONDS
  while kill -0 "$pid" 2>/dev/null && (( SECONDS - started < limit )); do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    command -v cuda-gdb >/dev/null &&
      timeout 90 cuda-gdb -p "$pid" -batch -ex "info cuda kernels" -ex "info threads" -ex "thread apply all bt" \
        > "$backtrace" 2>&1
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}

run() {
  local out=${OUT:-gpu-out}
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # libnccl.so.2 (about 210 MiB) is too large to carry: the image's own (a CUDA PyTorch wheel ships it).
  local nccl_lib
  nccl_lib=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null) &&
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_lib"
  nvidia-smi > "$out/nvidia-smi.log" 2>&1
  local summary=()
  for r in "${runs[@]}"; do
    local words name rc verdict started limit=150 settings=()
    read -r -a words <<< "$r"  # label, settings, binary, arguments (read -a expands no pattern)
    name=${words[0]}
    words=("${words[@]:1}")
    while [[ ${words[0]} == *=* ]]; do
      if [[ ${words[0]} == limit=* ]]; then limit=${words[0]#limit=}; else settings+=("${words[0]}"); fi
      words=("${words[@]:1}")
    done
    started=$SECONDS
    run_with_backtrace "$(step_timeout "$limit")" "$out/$name.log" "$out/$name.bt.log" \
      env "${settings[@]}" "$stage/bin/${words[0]}" "${words[@]:1}"
    rc=$?
    case $rc in
      0) verdict=passed ;;
      77) verdict="skipped (no usable GPU)" ;;
      124) verdict="TIMED OUT (log: $name.log, backtraces: $name.bt.log)" ;;
      *) verdict="FAILED rc=$rc (log: $name.log)" ;;
    esac
    summary+=("$(printf '%-34s %-40s %4d s' "$name" "$verdict" $((SECONDS - started)))")
  done
  bench() {  # label, timeout, command...
    local name=$1 limit=$2 started=$SECONDS; shift 2
    timeout "$(step_timeout "$limit")" "$@" > "$out/$name.txt" 2>&1
    summary+=("$(printf '%-34s %-40s %4d s' "$name" "rc=$?" $((SECONDS - started)))")
  }
  bench bench_optim_cuda 150 "$stage/bin/bench_optim_cuda" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_out="$out/bench_optim_cuda.json" --benchmark_out_format=json
  bench bench_comm_threads_cuda 60 "$stage/bin/bench_comm_threads_cuda" --benchmark_filter=BM_threads_device \
    --benchmark_out="$out/bench_comm_threads_cuda.json" --benchmark_out_format=json
  bench bench_engine_cuda 60 "$stage/bin/bench_engine_cuda" --benchmark_counters_tabular=true
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    bench torch_fused_adamw 90 python3 bench/optim/torch_fused_adamw.py
  fi
  # Memory errors a passing test would not show (out-of-bounds, misaligned, uninitialised reads):
  # compute-sanitizer over the small CUDA tests, as far as the budget goes.
  if command -v compute-sanitizer >/dev/null; then
    local t
    for t in test_core_cuda_buffer test_engine_device_ops test_comm_threads_cuda test_optim_cuda; do
      (( $(budget_left) > 20 )) || break
      timeout "$(step_timeout 120)" compute-sanitizer --tool memcheck --error-exitcode 3 "$stage/bin/$t" \
        > "$out/memcheck_$t.log" 2>&1
      summary+=("$(printf '%-34s %-40s' "memcheck_$t" "rc=$?")")
    done
  fi
  echo "== amsp GPU checks ($SECONDS s of a ${AMSP_GPU_BUDGET_S:-450} s budget)"
  printf '%s\n' "${summary[@]}"
  # The fused update against its same-bytes stream kernel and, when torch ran, torch._fused_adamw_.
  local torch_args=()
  [ -s "$out/torch_fused_adamw.txt" ] && torch_args=(--torch "$out/torch_fused_adamw.txt")
  python3 -c "import json; json.load(open('$out/bench_optim_cuda.json'))" 2>/dev/null &&
    python3 bench/optim/pair_ratios.py "$out/bench_optim_cuda.json" "${torch_args[@]}"
  [ -s "$out/torch_fused_adamw.txt" ] && tail -n 5 "$out/torch_fused_adamw.txt"
  grep -hE "_median|manual_time " "$out/bench_comm_threads_cuda.txt" 2>/dev/null | head -n 12
  grep -hE "BM_EngineCuda" "$out/bench_engine_cuda.txt" 2>/dev/null
  # Failing tests: the end of each log, so that one call brings back what to fix.
  local line log
  for line in "${summary[@]}"; do
    [[ $line == *FAILED* || $line == *"TIMED OUT"* ]] || continue
    log="$out/${line%% *}.log"
    [ -f "$log" ] && { echo "== tail of ${log##*/}"; tail -n 40 "$log"; }
  done
  (cd "$out" && tar czf logs.tar.gz ./*.log && rm -f ./*.log)
}

case ${1:-} in
  build) build ;;
  stage) [ -d "${2:-}" ] || { echo "usage: scripts/gpu-check.sh stage BUILD_DIR" >&2; exit 2; }; stage_from "$2" ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh build|stage BUILD_DIR|run" >&2; exit 2 ;;
esac
