#!/usr/bin/env bash
# Builds and runs the main example, amsp-train: the char-level language model trained on 8 CPU
# ranks (threads) of a 4x2 mesh with the AMSP plan amsp-13b. Arguments go to amsp-train
# (see amsp-train --help), e.g. scripts/run-example.sh --plan ddp --steps 100.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build build/default --target amsp-train
exec build/default/examples/amsp_train/amsp-train "$@"
