#!/usr/bin/env bash
# The fuzzers for ctest (label fuzz) and by hand:
#   fuzz/run.sh build <build dir> <clang++>          configure and build every harness
#   fuzz/run.sh run <build dir> <target> <seconds>   fuzz one target from its corpus
# New inputs go to a temporary directory that is deleted (the corpus in the repository stays
# small; add a finding there by hand, as a regression seed). A crash, a sanitizer report or an
# uncaught exception fails the run, and libFuzzer writes the input to crash-* in the working
# directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  build)
    cmake -S "$here" -B "$2" -G Ninja -DCMAKE_CXX_COMPILER="$3" >/dev/null  # flags: CMakeLists.txt
    cmake --build "$2"
    ;;
  run)
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    "$2/fuzz_$3" -max_total_time="$4" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$scratch" "$here/corpus/$3"
    ;;
  *)
    echo "usage: $0 build <dir> <clang++> | run <dir> <target> <seconds>" >&2
    exit 2
    ;;
esac
