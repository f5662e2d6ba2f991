#!/usr/bin/env bash
# The planner checked against measured step times on the emulated cluster (docs/cluster.md,
# docs/planner-check.md): builds amsp-train, amsp-profile and
# amsp-cluster-predict, then runs scripts/cluster/check.py (options: --help; defaults: meshes 4x2
# and 2x4, rates 1gbit and 200mbit, the issue's nine plans, 10 runs of each, a plan's step the mean
# of its runs). Needs root (exit 77 if not).
#   scripts/cluster-check.sh                                # the full table (about 35 min; 67 with three rates)
#   scripts/cluster-check.sh --meshes 4x2 --rates 1gbit --plans 'ddp;hsdp' --repeats 2   # a smoke run
#   scripts/cluster-check.sh --out run.json --diagnose      # + the best fit of the overheads (what the lead runs)
#   scripts/cluster-check.sh --global-batch 8 --model "--context 32 --width 64 --heads 4 --layers 2" \
#     --train-args "--device-ms-per-sequence 30 --device-timing queued"   # an emulated accelerator
#                                                           # that queues its kernels as a GPU does
#                                                           # (docs/planner-check-device-queue.md)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "cluster-check.sh: SKIP: needs root (network namespaces)" >&2; exit 77; }
build=${AMSP_BUILD_DIR:-build/default}
[[ -f $build/CMakeCache.txt ]] || cmake --preset default >/dev/null
cmake --build "$build" --target amsp-train amsp_profile amsp-cluster-predict -j "${JOBS:-1}" >/dev/null
exec python3 scripts/cluster/check.py --build "$build" "$@"
