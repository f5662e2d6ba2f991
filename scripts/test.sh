#!/usr/bin/env bash
# THE test command (CI runs it through .ci/run): installs missing Debian packages, then
#   1. default preset (Release, -Werror): builds everything (tests, header self-tests, package
#      test, benchmarks, examples) and runs every test but the gpu ones;
#   2. asan preset (AddressSanitizer + UBSan): builds the tests, runs every test but gpu;
#   3. tsan preset (ThreadSanitizer): builds and runs only the tests labelled tsan.
# Prints one summary line and exits non-zero if any stage failed. Set AMSP_TEST_STAGES to a
# subset (e.g. "default asan") to run fewer stages; AMSP_JOBS overrides the build parallelism.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh || { echo "test.sh: installing dependencies failed"; exit 1; }

jobs=${AMSP_JOBS:-$(nproc)}
stages=${AMSP_TEST_STAGES:-default asan tsan}
passed=0 failed=0 failures=() log_dir=build/logs
mkdir -p "$log_dir"
start_all=$SECONDS

# ctest's "N% tests passed, F tests failed out of T" line -> running totals.
count() {
  local line
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$1" | tail -n 1)
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1]))
    passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
}

stage() {  # stage <preset> <build target or ""> <ctest filter args...>
  local preset=$1 target=$2 start=$SECONDS
  shift 2
  echo "=== test.sh: $preset: configure"
  if ! cmake --preset "$preset" >"$log_dir/$preset-configure.log" 2>&1; then
    cat "$log_dir/$preset-configure.log"; failures+=("$preset:configure"); return
  fi
  echo "=== test.sh: $preset: build${target:+ $target}"
  if ! cmake --build "build/$preset" -j "$jobs" ${target:+--target "$target"} -- -k 0 >"$log_dir/$preset-build.log" 2>&1; then
    grep -E -B2 -A12 "FAILED|error:" "$log_dir/$preset-build.log" | head -n 150
    failures+=("$preset:build"); return
  fi
  echo "=== test.sh: $preset: ctest $*"
  ctest --test-dir "build/$preset" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log_dir/$preset-ctest.log"
  local rc=${PIPESTATUS[0]}
  count "$log_dir/$preset-ctest.log"
  if [ "$rc" -ne 0 ]; then
    if grep -q "No tests were found" "$log_dir/$preset-ctest.log"; then
      echo "test.sh: $preset: no tests carry its label yet"
    else
      failures+=("$preset:ctest")
    fi
  fi
  echo "=== test.sh: $preset: $((SECONDS - start)) s"
}

for s in $stages; do
  case $s in
    default) stage default "" -LE gpu ;;
    asan)
      export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
      export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers/lsan.supp"
      stage asan "" -LE gpu ;;
    tsan)
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
      stage tsan amsp_label_tsan -L tsan ;;
    *) echo "test.sh: unknown stage '$s'"; failures+=("$s:unknown") ;;
  esac
done

echo "test.sh: stages [$stages] in $((SECONDS - start_all)) s${failures[*]:+; failed: ${failures[*]}}"
echo "summary: $passed passed, $failed failed"
[ ${#failures[@]} -eq 0 ] && [ "$failed" -eq 0 ]
