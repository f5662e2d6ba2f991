#!/usr/bin/env bash
# Builds and runs the main example: the amsp-train training run when it exists, otherwise the
# planner ranking the valid plans of LLaMA-7B on the paper's 8 x 128 cluster. Arguments replace
# the example's default arguments.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/default
cmake --preset default >/dev/null
targets=$(ninja -C "$build" -t targets all)
if grep -qE '^(amsp_train|amsp-train):' <<<"$targets"; then
  target=$(grep -oE '^(amsp_train|amsp-train):' <<<"$targets" | head -n 1 | tr -d :)
  exe=amsp-train default_args=()
else
  target=amsp_plan exe=amsp-plan default_args=(--model llama-7b --mesh 8x128 --top 5)
fi
cmake --build "$build" --target "$target"
path=$(find "$build/examples" -name "$exe" -type f -perm -u+x | head -n 1)
args=("$@")
[ $# -eq 0 ] && args=("${default_args[@]}")
echo "run-example: $path ${args[*]}"
exec "$path" "${args[@]}"
