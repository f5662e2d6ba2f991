#!/usr/bin/env python3
"""scripts/cluster/trace_calls.py --positions on a hand-made two-rank trace of five steps: each
blocking call by its place in the step, against hand-computed spreads and times (steps before
--skip and the last, unfinished one left out); ranks whose call sequences differ are reported, not
aligned. Exit 0 on success, 1 with the failed checks listed."""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster", "trace_calls.py")
failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def call(op, size, ts, dur):
    return {"name": op, "cat": "collective", "ph": "X", "ts": ts, "dur": dur, "tid": 0,
            "args": {"bytes": size, "group": 2}}


def rank(late_us, second_dur_us, ops=("all_reduce", "all_reduce")):
    """Steps of 100 ms; rank 0's forward of bucket 0 starts each. In every step a 1 MB call at
    10 ms (`late_us` later on this rank) lasting 20 ms less the lateness (both ranks end at 30 ms),
    then a 64 KB call at 40 ms lasting `second_dur_us`. Step 3's first call is 2 ms later on rank 1
    than in the other steps (a disturbance the median ignores)."""
    events = []
    for k in range(5):
        t0 = 100000 * k
        events.append({"name": "forward", "cat": "device", "ph": "X", "ts": t0, "dur": 5000, "tid": 0,
                       "args": {"bucket": 0}})
        if k == 4:
            break
        late = late_us + (2000 if k == 3 and late_us else 0)
        events.append(call(ops[0], 1e6, t0 + 10000 + late, 20000 - late))
        events.append(call(ops[1], 65536, t0 + 40000, second_dur_us))
    return {"traceEvents": events}


with tempfile.TemporaryDirectory() as d:
    prefix = os.path.join(d, "t")

    def run(*ranks, extra=()):
        for r, events in enumerate(ranks):
            with open(f"{prefix}.rank{r}.json", "w") as f:
                json.dump(events, f)
        return subprocess.run([sys.executable, SCRIPT, prefix, "--positions", *extra], capture_output=True, text=True)

    out = run(rank(0, 5000), rank(3000, 8000), extra=("--skip", "1"))
    expect("exit", out.returncode, 0)
    lines = out.stdout.splitlines()
    # Steps 1, 2 and 3 counted (step 0 skipped, step 4 has no end). First call: ranks 3, 3 and 5 ms
    # apart (median 3), both end at 30 ms: 17, 17, 15 from the last start (17), 20 from the first,
    # ends 0 apart. Second call: both start at 40 ms, end 8 ms later on rank 1, 3 ms apart.
    expect("header", lines[0].startswith("place op bytes: steps"), True)
    expect("first call", lines[1], "0 all_reduce 1000000: 3 | 3.00 | 17.00 | 20.00 | 0.00")
    expect("second call", lines[2], "1 all_reduce 65536: 3 | 0.00 | 8.00 | 8.00 | 3.00")
    expect("no more lines", len(lines), 3)
    # The default --skip 3 leaves step 3 alone: its first call 5 ms apart.
    out = run(rank(0, 5000), rank(3000, 8000))
    expect("skip 3, first call", out.stdout.splitlines()[1], "0 all_reduce 1000000: 1 | 5.00 | 15.00 | 20.00 | 0.00")
    # Sequences that differ (rank 1 makes a ReduceScatter first): not aligned.
    out = run(rank(0, 5000), rank(3000, 8000, ops=("reduce_scatter", "all_reduce")))
    expect("differing sequences", out.stdout.strip(),
           "positions: the ranks' sequences of blocking calls differ; not aligned")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("trace_calls --positions: all checks passed")
