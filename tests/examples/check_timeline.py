#!/usr/bin/env python3
"""amsp-train --timeline as a user runs it: trains zero3 on a 2x1 mesh of threads with the emulated
device, then reads every rank's Chrome trace with Python's own JSON reader and checks what a
timeline must show: one file per rank, well-formed complete events, every bucket's forward and
backward on the device each step, each backward after that bucket's gather and before its
reduction, and the waits inside the run's wall time. Then a path that cannot be written: exit 2,
the rule named. Usage: check_timeline.py AMSP_TRAIN WORKDIR"""
import json
import os
import subprocess
import sys

train, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
prefix = os.path.join(work, "timeline")
steps, buckets = 3, 4  # the default model: embed, two blocks, head
out = subprocess.run([train, "--backend", "threads", "--mesh", "2x1", "--plan", "zero3", "--steps", str(steps),
                      "--eval-every", "0", "--sample-bytes", "0", "--quiet", "--device-ms-per-sequence", "4",
                      "--no-overlap", "--engine-space", "serial", "--global-batch", "4", "--timeline", prefix],
                     capture_output=True, text=True, timeout=300)
assert out.returncode == 0, out.stderr
final = json.loads(out.stdout.strip().splitlines()[-1])

for rank in range(2):
    events = json.load(open(f"{prefix}.rank{rank}.json"))["traceEvents"]
    assert events, f"rank {rank}: no events"
    for e in events:
        assert e["ph"] == "X" and e["pid"] == rank and e["dur"] >= 0 and e["cat"] in ("wait", "device"), e
    device = [e for e in events if e["cat"] == "device"]
    for name in ("forward", "backward"):
        per_bucket = [sum(1 for e in device if e["name"] == name and e["args"]["bucket"] == b) for b in range(buckets)]
        assert per_bucket == [steps] * buckets, (rank, name, per_bucket)
    # Each backward of bucket b: the last gather of b ended before it began, and b's reduction
    # begins after it ends (the engine's order without overlap).
    for e in (e for e in device if e["name"] == "backward"):
        b, start, end = e["args"]["bucket"], e["ts"], e["ts"] + e["dur"]
        gathers = [g for g in events if g["name"] == "gather" and g["args"]["bucket"] == b and g["ts"] < start]
        assert gathers and max(g["ts"] + g["dur"] for g in gathers) <= start, (rank, b, start)
        reductions = [r for r in events if r["name"] == "reduce_gradients" and r["args"]["bucket"] == b
                      and r["ts"] >= end]
        assert reductions, (rank, b, "no reduction after the backward")
    # Device time: 4 ms per sequence, two sequences per rank per step (global batch 4 over 2
    # ranks): 8 ms a step spread over the buckets (forward 1/3, backward 2/3); sleeps only overrun.
    device_ms = sum(e["dur"] for e in device) / 1e3
    assert 8 * steps * 0.99 <= device_ms <= final["seconds"] * 1e3, (rank, device_ms)
    span = (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e3
    waits = sum(e["dur"] for e in events if e["cat"] == "wait") / 1e3
    assert waits + device_ms <= span * 1.001, (rank, waits, device_ms, span)

bad = subprocess.run([train, "--steps", "1", "--timeline", os.path.join(work, "missing", "dir", "t")],
                     capture_output=True, text=True, timeout=300)
assert bad.returncode == 2 and "rule cli.timeline" in bad.stderr, (bad.returncode, bad.stderr)
print("timeline ok")
