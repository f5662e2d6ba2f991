#!/usr/bin/env bash
# The GPU checks of amsp in one prepared call, for a session that is lent a GPU machine (one H200):
# build here, where the Debian packages are (doctest, Google Benchmark, nvcc), run there.
#
#   scripts/gpu-check.sh build   # here: preset gpu (sm_90), builds the GPU tests and benchmarks and
#                                # stages them, with the shared libraries the GPU image may lack,
#                                # in build-gpu-carry/ (about 30 MiB)
#   scripts/gpu-check.sh run     # on the GPU machine (device tool: carry ["build-gpu-carry"]):
#                                # runs every staged test and benchmark, writes logs and JSON
#                                # under $OUT (default ./gpu-out), ends with a summary table
#
# Not staged: the NCCL backend's test and benchmark, which need an MPI runtime the GPU image does
# not have; run them where MPI and NCCL are installed:
#   ctest --test-dir build/gpu -R nccl; mpirun -np <gpus> build/gpu/bench/comm/bench_comm_nccl
set -uo pipefail
cd "$(dirname "$0")/.."

stage=build-gpu-carry
tests=(tests/core/test_core_dtype_cuda tests/core/test_core_cuda_buffer tests/optim/test_optim_cuda
       tests/comm/test_comm_threads_cuda tests/comm/test_comm_threads_cuda_host)
tests+=(tests/engine/test_engine_device_ops)
tests+=(tests/comm/test_comm_nccl_bootstrap)  # NCCL without MPI: unique id, adopt, split, watchdog
tests+=(tests/engine/test_engine_cuda)  # the engine in the CUDA space: parity, host comparison, no host sync
# What run() runs of the staged tests: a label (its log's name), the binary, its doctest arguments.
# test_engine_cuda runs as two runs, each under its own timeout: its update-in-backward cases apart.
runs=()
for t in "${tests[@]}"; do
  name=$(basename "$t")
  [ "$name" = test_engine_cuda ] || runs+=("$name $name")
done
runs+=("test_engine_cuda test_engine_cuda --test-case-exclude=*update_in_backward*")
runs+=("test_engine_cuda_in_backward test_engine_cuda --test-case=*update_in_backward*")
benches=(bench/optim/bench_optim_cuda bench/comm/bench_comm_threads_cuda)
benches+=(bench/engine/bench_engine_cuda)  # the engine in the CUDA space, phase by phase

build() {
  cmake --preset gpu -DAMSP_WITH_MPI=OFF -DAMSP_BUILD_EXAMPLES=OFF >/dev/null || return 1
  local targets=()
  for t in "${tests[@]}" "${benches[@]}"; do targets+=("$(basename "$t")"); done
  cmake --build build/gpu --target "${targets[@]}" || return 1
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  for t in "${tests[@]}" "${benches[@]}"; do cp "build/gpu/$t" "$stage/bin/" || return 1; done
  # The libraries the binaries load that are not in a CUDA + Python image: Google Benchmark and
  # the CUDA runtime these binaries were linked against.
  ldd "$stage"/bin/* | awk '/=> \// {print $3}' | sort -u | grep -E 'libbenchmark|libcudart' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  du -sh "$stage"
}

run() {
  local out=${OUT:-gpu-out}
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # libnccl.so.2 (about 210 MiB) is too large to carry: the image's own (a CUDA PyTorch wheel ships it).
  local nccl_lib
  nccl_lib=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null) &&
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_lib"
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
  local summary=()
  for r in "${runs[@]}"; do
    local words name rc verdict
    read -r -a words <<< "$r"  # label, binary, arguments (read -a expands no pattern)
    name=${words[0]}
    timeout 300 "$stage/bin/${words[1]}" "${words[@]:2}" > "$out/$name.log" 2>&1
    rc=$?
    case $rc in
      0) verdict=passed ;;
      77) verdict="skipped (no usable GPU)" ;;
      *) verdict="FAILED rc=$rc (log: $name.log)" ;;
    esac
    summary+=("$(printf '%-34s %s' "$name" "$verdict")")
  done
  timeout 240 "$stage/bin/bench_optim_cuda" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/bench_optim_cuda.json" --benchmark_out_format=json > "$out/bench_optim_cuda.txt" 2>&1
  summary+=("$(printf '%-34s rc=%s' bench_optim_cuda $?)")
  timeout 180 "$stage/bin/bench_comm_threads_cuda" --benchmark_filter=BM_threads_device \
    --benchmark_out="$out/bench_comm_threads_cuda.json" --benchmark_out_format=json \
    > "$out/bench_comm_threads_cuda.txt" 2>&1
  summary+=("$(printf '%-34s rc=%s' bench_comm_threads_cuda $?)")
  timeout 120 "$stage/bin/bench_engine_cuda" --benchmark_counters_tabular=true > "$out/bench_engine_cuda.txt" 2>&1
  summary+=("$(printf '%-34s rc=%s' bench_engine_cuda $?)")
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    timeout 120 python3 bench/optim/torch_fused_adamw.py > "$out/torch_fused_adamw.txt" 2>&1
    summary+=("$(printf '%-34s rc=%s' torch_fused_adamw $?)")
  fi
  echo "== amsp GPU checks"
  printf '%s\n' "${summary[@]}"
  # The fused update against its same-bytes stream kernel and, when torch ran, torch._fused_adamw_.
  local torch_args=()
  [ -s "$out/torch_fused_adamw.txt" ] && torch_args=(--torch "$out/torch_fused_adamw.txt")
  [ -s "$out/bench_optim_cuda.json" ] && python3 bench/optim/pair_ratios.py "$out/bench_optim_cuda.json" "${torch_args[@]}"
  [ -s "$out/torch_fused_adamw.txt" ] && tail -n 5 "$out/torch_fused_adamw.txt"
  grep -hE "_median" "$out/bench_comm_threads_cuda.txt" 2>/dev/null | head -n 12
  grep -hE "BM_EngineCuda" "$out/bench_engine_cuda.txt" 2>/dev/null
}

case ${1:-} in
  build) build ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh build|run" >&2; exit 2 ;;
esac
