#!/usr/bin/env bash
# The dead-rank test: 8 MPI ranks train (kill_target), one is killed with SIGKILL at a random
# moment of training; the whole job must end within BOUND seconds and mpirun's output must name
# the dead rank. TRIALS times (default 10). Prints one line per trial and a summary; exits 1 if
# any trial failed. Usage: kill_rank.sh <mpiexec> <kill_target> [trials] [bound_s]
set -u
mpiexec=$1
target=$2
trials=${3:-10}
bound=${4:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
worst=0
for trial in $(seq 1 "$trials"); do
  dir=$work/t$trial
  mkdir -p "$dir"
  "$mpiexec" -np 8 --oversubscribe "$target" "$dir" 120 >"$dir/log" 2>&1 &
  job=$!
  # Wait for every rank to have trained one step (at most 60 s).
  for _ in $(seq 1 600); do
    [ "$(ls "$dir"/rank*.pid 2>/dev/null | wc -l)" -eq 8 ] && break
    sleep 0.1
  done
  if [ "$(ls "$dir"/rank*.pid 2>/dev/null | wc -l)" -ne 8 ]; then
    echo "trial $trial: the job did not start"; cat "$dir/log"; kill -9 "$job" 2>/dev/null; failed=1; continue
  fi
  sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", rand() * 3 }')"
  victim=$((RANDOM % 8))
  pid=$(cat "$dir/rank$victim.pid")
  kill -9 "$pid"
  killed=$(date +%s.%N)
  # Wait for mpirun to end, at most bound + 5 s; then stop it ourselves (a failure).
  ended=0
  for _ in $(seq 1 $(((bound + 5) * 20))); do
    if ! kill -0 "$job" 2>/dev/null; then ended=1; break; fi
    sleep 0.05
  done
  elapsed=$(awk -v a="$killed" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  if [ $ended -eq 0 ]; then
    kill -9 "$job" 2>/dev/null
    pkill -9 -P "$job" 2>/dev/null
  fi
  wait "$job" 2>/dev/null
  named=0
  # Open MPI 4.1 names the rank and the signal (its PID field reads 0 for local processes).
  grep -Eq "process rank $victim with PID [0-9]+ on node .* exited on signal 9" "$dir/log" && named=1
  verdict=ok
  if [ $ended -eq 0 ] || awk -v e="$elapsed" -v b="$bound" 'BEGIN { exit !(e > b) }'; then verdict="FAILED: did not end within $bound s"; failed=1; fi
  if [ $named -eq 0 ]; then verdict="FAILED: the output does not name rank $victim (PID $pid)"; failed=1; fi
  worst=$(awk -v a="$worst" -v b="$elapsed" 'BEGIN { print (b > a ? b : a) }')
  echo "trial $trial: killed rank $victim (PID $pid), job ended after $elapsed s: $verdict"
  [ "$verdict" = ok ] || cat "$dir/log"
done
echo "kill_rank: $trials trials, slowest end $worst s after the kill (bound $bound s): $([ $failed -eq 0 ] && echo passed || echo FAILED)"
exit $failed
