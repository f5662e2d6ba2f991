#!/usr/bin/env bash
# Installs the Debian packages amsp needs to build, test and run its examples, if any is missing.
# Idempotent and quick when everything is present; runs apt-get directly as root, through sudo
# otherwise. The CUDA toolkit (nvcc, NCCL) is optional and not a Debian package: the CUDA parts are
# built when /usr/local/cuda or CUDAToolkit_ROOT provides it.
set -euo pipefail

packages=(
  cmake ninja-build g++            # build
  doctest-dev libbenchmark-dev     # tests, benchmarks
  libopenmpi-dev openmpi-bin       # MPI backend and its tests
  fortunes                         # /usr/share/games/fortunes: the main example's English text
  iproute2 python3                 # the emulated cluster (scripts/cluster.sh) and its checks
  clang libclang-rt-14-dev         # libFuzzer harnesses of fuzz/ (ctest label fuzz)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "install-deps: missing ${missing[*]}, and not root without sudo: install them by hand" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
