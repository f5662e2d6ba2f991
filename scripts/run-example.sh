#!/usr/bin/env bash
# Builds and runs the main example, amsp-train: a GPT-2-family transformer trained on byte-level
# English text (Debian's fortunes) by 8 CPU ranks (threads) of a 4x2 mesh with the AMSP plan
# amsp-13b. Arguments go to amsp-train (see amsp-train --help), e.g.
# scripts/run-example.sh --plan zero3 --keep-gathered --bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build build/default --target amsp-train
exec build/default/examples/amsp_train/amsp-train "$@"
