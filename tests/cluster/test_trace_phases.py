#!/usr/bin/env python3
"""scripts/cluster/trace_phases.py on a hand-made two-rank trace of three steps, against
hand-computed medians (the device time of each segment too); --per-rank on another, against the hand-computed start of each rank's
step; and bad input (no traces, --skip past the steps, a negative --skip, --per-rank without
`step` waits) exiting 2. Exit 0 on success, 1 with the failed checks listed."""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster", "trace_phases.py")
failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def device(name, bucket, ts, dur):
    return {"name": name, "cat": "device", "ph": "X", "ts": ts, "dur": dur, "tid": 0, "args": {"bucket": bucket}}


def rank(offset, last_backward, slow_step, wait_us, sync_us):
    """Steps of 100 ms from `offset` us; forward buckets 0 and 1, backward 1 then 0 (us from the
    rank's step start); backward 0 lasts `last_backward`, 40 ms longer in step `slow_step`; a
    main-thread wait of `wait_us` for bucket 0's gather before the first forward, and one on another
    thread (not the rank's own wait) of 7 ms; a main-thread synchronize wait of `sync_us` at 95 ms."""
    events = []
    for k in range(4):
        t0 = offset + 100000 * k
        events.append({"name": "start_micro_batch", "cat": "wait", "ph": "X", "ts": t0, "dur": 0, "tid": 0,
                       "args": {}})
        if k == 3:
            break  # the last wait only ends step 2
        back0 = last_backward + (40000 if k == slow_step else 0)
        events += [{"name": "gather", "cat": "wait", "ph": "X", "ts": t0 + 1000, "dur": wait_us, "tid": 0,
                    "args": {"bucket": 0}},
                   {"name": "gather", "cat": "wait", "ph": "X", "ts": t0 + 1000, "dur": 7000, "tid": 1,
                    "args": {"bucket": 0}},
                   {"name": "synchronize", "cat": "wait", "ph": "X", "ts": t0 + 95000, "dur": sync_us, "tid": 0,
                    "args": {}},
                   device("forward", 0, t0 + 10000, 5000), device("forward", 1, t0 + 20000, 10000),
                   device("backward", 1, t0 + 40000, 10000), device("backward", 0, t0 + 50000, back0)]
    return {"traceEvents": events}


def run(*args):
    r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


with tempfile.TemporaryDirectory() as d:
    prefix = os.path.join(d, "t")
    # Rank 0 enters each step at 0, 100, 200 ms, rank 1 5 ms later; rank 0's backward 0 lasts 20 ms,
    # 60 in step 1, rank 1's 30. Per step from the first rank: the last first forward starts at
    # 5 + 10 = 15 ms, the last forward ends at 5 + 30 = 35, the last backward at 5 + 50 + 30 = 85
    # (in step 1 rank 0's, 50 + 60 = 110), the next step at 100; device per rank 45 and 55 ms, mean
    # 50 (rank 0 85 in step 1: 70). Medians over the three steps: 15, 35, 85 (a mean: 93.3), 100, 50.
    # Each rank's own step: rank 1 enters 5 ms after rank 0; steps of 100 ms; waits 3 + 2 and 1 ms
    # (mean 3; the other thread's 7 ms not counted); host time per rank (100 - 45 - 5 + 100 - 55 - 1)
    # / 2 = 47, in step 1 (100 - 85 - 5 + 44) / 2 = 27: median 47 (a mean: 40.3). By kind: bucket 0's
    # gather 3 and 1 ms (mean 2), synchronize 2 and 0 (mean 1).
    json.dump(rank(0, 20000, 1, 3000, 2000), open(f"{prefix}.rank0.json", "w"))
    json.dump(rank(5000, 30000, -1, 1000, 0), open(f"{prefix}.rank1.json", "w"))
    code, out = run(prefix, "--skip", "0")
    expect("exit", code, 0)
    for text in ("first forward starts 15.00", "forward ends 35.00", "backward ends 85.00", "next step 100.00",
                 "device time per rank 50.00", "medians over 3 steps", "last rank enters 5.00 after the first",
                 "step 100.00, device 50.00, waits 3.00, other host time 47.00",
                 "main-thread waits per rank: first gather 2.00, synchronize 1.00 (ms",
                 # Per segment, mean over the ranks: backward 0 (20 + 30) / 2 = 25, in step 1 (60 + 30) / 2.
                 "device time per segment: forward 0 5.00, forward 1 10.00, backward 1 10.00, backward 0 25.00"):
        expect(f"prints {text!r}", text in out, True)
    code, out = run(prefix)  # --skip 2 by default: step 2 alone (rank 0 not slow there)
    expect("default skip", "medians over 1 steps" in out and "backward ends 85.00" in out, True)
    for args, named in (((os.path.join(d, "none"),), "no "), ((prefix, "--skip", "3"), "--skip 3"),
                        ((prefix, "--skip", "-1"), "--skip must be at least 0")):
        code, out = run(*args)
        expect(f"{args[1:]} exits 2", code, 2)
        expect(f"{args[1:]} names the value", named in out, True)



def starting_rank(offset, r):
    """Steps of 100 ms from `offset` us, rank `r`: the optimizer step's wait ends 1 ms before the
    entry (none before step 0 on rank 1), the spread's stream (tid 2) issues 0.5 ms before it and
    2 + r ms after, the gather stream (tid 1) 2.5 + r ms after and again after the forward (not a
    start); forward buckets 0 at 5 ms and 1 ending at 30 + r ms."""
    events = []
    for k in range(4):
        t0 = offset + 100000 * k
        if not (r == 1 and k == 0):
            events.append({"name": "step", "cat": "wait", "ph": "X", "ts": t0 - 3000, "dur": 2000, "tid": 0, "args": {}})
        events.append({"name": "start_micro_batch", "cat": "wait", "ph": "X", "ts": t0, "dur": 0, "tid": 0, "args": {}})
        if k == 3:
            break
        issue = lambda tid, ts, size: {"name": "all_gather", "cat": "issued", "ph": "i", "ts": ts, "tid": tid,
                                       "args": {"bytes": float(size), "group": 2}}
        events += [issue(2, t0 - 500, 9216), issue(2, t0 + 2000 + 1000 * r, 24992),
                   issue(1, t0 + 2500 + 1000 * r, 18432), issue(1, t0 + 35000, 49984),
                   device("forward", 0, t0 + 5000, 5000), device("forward", 1, t0 + 20000 + 1000 * r, 10000),
                   device("backward", 1, t0 + 40000, 10000), device("backward", 0, t0 + 50000, 20000)]
    return {"traceEvents": events}


with tempfile.TemporaryDirectory() as d:
    prefix = os.path.join(d, "s")
    # Rank 1 enters each step 0.5 ms after rank 0; step 0 has no `step` wait on rank 1, so two steps
    # count. From rank 0's entry: rank 0's wait ends at -1, its calls are issued at -0.5, 2 and 2.5,
    # its first forward starts at 5 and its forward ends at 30; rank 1's all 0.5 later, its last two
    # calls and its forward's end 1 ms later again: -0.5, 0.5, 0, 3.5, 4, 5.5, 31.5.
    json.dump(starting_rank(0, 0), open(f"{prefix}.rank0.json", "w"))
    json.dump(starting_rank(500, 1), open(f"{prefix}.rank1.json", "w"))
    code, out = run(prefix, "--skip", "0", "--per-rank")
    expect("--per-rank exit", code, 0)
    expect("--per-rank steps", "medians over 2 steps" in out, True)
    rows = {}
    for line in out.splitlines()[2:]:
        words = line.split()
        rows[" ".join(words[:-2])] = [float(w) for w in words[-2:]]
    expect("--per-rank rows", rows, {
        "step wait ends": [-1.0, -0.5], "enters": [0.0, 0.5], "thread 2 call 1: all_gather 9216": [-0.5, 0.0],
        "thread 2 call 2: all_gather 24992": [2.0, 3.5], "thread 1 call 1: all_gather 18432": [2.5, 4.0],
        "first forward": [5.0, 5.5], "forward ends": [30.0, 31.5]})
    json.dump({"traceEvents": [e for e in starting_rank(500, 1)["traceEvents"] if e["name"] != "step"]},
              open(f"{prefix}.rank1.json", "w"))
    code, out = run(prefix, "--per-rank")
    expect("--per-rank without step waits exits 2", code, 2)
    expect("--per-rank without step waits names the rule", "--per-rank" in out and "`step` wait" in out, True)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("trace_phases.py: all checks passed")
