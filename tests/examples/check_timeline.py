#!/usr/bin/env python3
"""amsp-train --timeline as a user runs it: trains zero3 on a 2x1 mesh of threads with the emulated
device, then reads every rank's Chrome trace with Python's own JSON reader and checks what a
timeline must show: one file per rank, well-formed events, every bucket's forward and backward on
the device each step, each backward after that bucket's gather and before its reduction, and the
waits inside the run's wall time. Its collectives: each step's ReduceScatters cover every
parameter once, one gather issued per gather waited for, and each reduction on the thread that
runs it: without overlap inside the host's wait for it, with overlap (the engine's worker) on
another thread. Then a path that cannot be written: exit 2, the rule named.
Usage: check_timeline.py AMSP_TRAIN WORKDIR"""
import json
import os
import subprocess
import sys

train, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
steps, buckets = 3, 4  # the default model: embed, two blocks, head


def train_with_timeline(prefix, overlap):
    out = subprocess.run([train, "--backend", "threads", "--mesh", "2x1", "--plan", "zero3", "--steps", str(steps),
                          "--eval-every", "0", "--sample-bytes", "0", "--quiet", "--device-ms-per-sequence", "4",
                          *([] if overlap else ["--no-overlap", "--engine-space", "serial"]),
                          "--global-batch", "4", "--timeline", prefix],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_collectives(rank, events, final, overlap):
    """The rank's collectives (traced_communicator.hpp) against the run's own facts."""
    calls = [e for e in events if e.get("cat") in ("collective", "issued")]
    for e in calls:
        assert e["args"]["bytes"] > 0 and e["args"]["group"] == 2, e
    named = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in calls} <= named, (rank, named)
    reductions = [e for e in calls if e["name"] == "reduce_scatter"]
    assert all(e["cat"] == "collective" for e in reductions), rank  # the engine's reductions block
    # zero3 over 2 ranks: each step reduces every fp32 gradient once, one call per bucket.
    assert len(reductions) == steps * buckets, (rank, len(reductions))
    assert sum(e["args"]["bytes"] for e in reductions) == steps * 4 * final["parameters"], rank
    # Every gather the host waited for was issued once (a prefetch or the gather itself).
    waited = sum(1 for e in events if e.get("cat") == "wait" and e["name"] == "gather")
    issued = sum(1 for e in calls if e["cat"] == "issued" and e["name"] == "all_gather")
    assert waited == issued > 0, (rank, waited, issued)
    hand_ins = [e for e in events if e.get("cat") == "wait" and e["name"] == "reduce_gradients"]
    for r in reductions:
        if overlap:  # on the engine's communication thread, not the host's
            assert r["tid"] != 0, (rank, r)
        else:  # the serial space reduces inside the host's reduce_gradients call
            assert r["tid"] == 0 and any(w["ts"] <= r["ts"] and r["ts"] + r["dur"] <= w["ts"] + w["dur"]
                                         for w in hand_ins), (rank, r)


prefix = os.path.join(work, "timeline")
final = train_with_timeline(prefix, overlap=False)
for rank in range(2):
    events = json.load(open(f"{prefix}.rank{rank}.json"))["traceEvents"]
    assert events, f"rank {rank}: no events"
    for e in events:
        assert e["pid"] == rank, e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["cat"] in ("wait", "device", "collective"), e
        else:
            assert (e["ph"], e.get("cat")) in (("i", "issued"), ("M", None)), e
    check_collectives(rank, events, final, overlap=False)
    events = [e for e in events if e.get("cat") in ("wait", "device")]
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

overlapped = os.path.join(work, "overlapped")
final = train_with_timeline(overlapped, overlap=True)
for rank in range(2):
    check_collectives(rank, json.load(open(f"{overlapped}.rank{rank}.json"))["traceEvents"], final, overlap=True)

# scripts/cluster/trace_calls.py reads the same traces: each rank's calls of a step, and a summary
# whose reduce_scatter rows count every reduction of the run (2 ranks x steps x buckets).
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster", "trace_calls.py")
calls = subprocess.run([sys.executable, script, overlapped, "--steps", "1"], capture_output=True, text=True, timeout=60)
assert calls.returncode == 0, calls.stderr
lines = calls.stdout.splitlines()
assert lines[0].startswith("step 1:") and all(any(l.startswith(f"  rank {r}: ") and "reduce_scatter" in l
                                                   for l in lines) for r in range(2)), calls.stdout
header = ("op bytes group: calls | spread of the ranks' starts | last start after the mean start | "
          "last start to last end (median ms)")
counted = 0
for l in lines[:lines.index(header)]:  # the queued-call summary
    if l.startswith("reduce_scatter "):
        after_gap, queued = l.split(": ", 1)[1].split(" | ")
        counted += int(after_gap.split()[0]) + int(queued.split()[0])
assert counted == 2 * steps * buckets, calls.stdout
arrived = lines[lines.index(header) + 1:]
assert sum(int(l.split(": ")[1].split(" |")[0]) for l in arrived if l.startswith("reduce_scatter ")) == steps * buckets, \
    calls.stdout
# The arrivals worked by hand: rank 0 calls at 0 us for 100 us, rank 1 at 60 us for 60 us: the
# starts 0.06 ms apart, the last 0.03 ms after their mean (30 us), the last end (120 us) 0.06 ms
# after the last start; then sequences that differ.
hand = os.path.join(work, "hand")
for rank, (ts, dur) in enumerate([(0, 100), (60, 60)]):
    with open(f"{hand}.rank{rank}.json", "w") as f:
        json.dump({"traceEvents": [{"name": "all_reduce", "cat": "collective", "ph": "X", "ts": ts, "dur": dur,
                                    "pid": rank, "tid": 1, "args": {"bytes": 8, "group": 2}}]}, f)
worked = subprocess.run([sys.executable, script, hand], capture_output=True, text=True, timeout=60)
assert worked.returncode == 0, worked.stderr
assert worked.stdout.splitlines()[-1] == "all_reduce 8 2: 1 | 0.06 | 0.03 | 0.06", worked.stdout
with open(f"{hand}.rank1.json", "w") as f:
    json.dump({"traceEvents": []}, f)
worked = subprocess.run([sys.executable, script, hand], capture_output=True, text=True, timeout=60)
assert worked.returncode == 0 and "not aligned" in worked.stdout, worked.stdout
# --by-thread keeps the main thread's calls apart from a stream's of the same op and size: each rank
# makes a 100 us AllReduce of 8 bytes on the main thread and a 300 us one on thread 1, 1 ms apart
# (both after a gap): mixed, the median of 0.1, 0.1, 0.3, 0.3 ms is 0.2; apart, 0.1 and 0.3.
threads = os.path.join(work, "threads")
for rank in range(2):
    with open(f"{threads}.rank{rank}.json", "w") as f:
        json.dump({"traceEvents": [{"name": "all_reduce", "cat": "collective", "ph": "X", "ts": ts, "dur": dur,
                                    "pid": rank, "tid": tid, "args": {"bytes": 8, "group": 2}}
                                   for ts, dur, tid in ((0, 100, 0), (1000, 300, 1))]}, f)


def summary(*args):
    """The queued-call summary's all_reduce rows of trace_calls.py on the hand-made traces."""
    out = subprocess.run([sys.executable, script, threads, *args], capture_output=True, text=True, timeout=60).stdout
    return [l for l in out.split(header)[0].splitlines() if l.startswith("all_reduce")]


assert summary() == ["all_reduce 8: 4 (0.20) | 0 (nan, 0/0)"], summary()
assert summary("--by-thread") == ["all_reduce 8 (main): 2 (0.10) | 0 (nan, 0/0)",
                                  "all_reduce 8 (thread 1): 2 (0.30) | 0 (nan, 0/0)"], summary("--by-thread")

# --issued: each stream's chain of nonblocking calls after step(), from each issue to the next on
# the same thread. Per rank two steps; thread 1 issues AllGathers of 100, 200, 200 bytes at 20,
# 520 (rank 1: 620), 2520 us after each step() ends; thread 2 issues one of 300 bytes between them
# (not part of thread 1's chain) and the main thread two that no chain counts. Call 1: 500 and 600
# us, median 0.55 ms over 4 calls; call 2: 2000 and 1900 us, median 1.95; call 3 has no next issue,
# nor has thread 2's call 1.
issued = os.path.join(work, "issued")
for rank in range(2):
    events = []
    for t0 in (0, 10000):
        events.append({"name": "step", "cat": "wait", "ph": "X", "ts": t0, "dur": 10, "pid": rank, "tid": 0})
        for at, size, tid in ((20, 100, 1), (520 + 100 * rank, 200, 1), (600, 300, 2), (700, 50, 0), (800, 50, 0),
                              (2520, 200, 1)):
            events.append({"name": "all_gather", "cat": "issued", "ph": "i", "ts": t0 + 10 + at, "pid": rank,
                           "tid": tid, "args": {"bytes": size, "group": 2}})
    with open(f"{issued}.rank{rank}.json", "w") as f:
        json.dump({"traceEvents": events}, f)
chains = subprocess.run([sys.executable, script, issued, "--issued"], capture_output=True, text=True, timeout=60)
assert chains.returncode == 0, chains.stderr
assert chains.stdout.splitlines()[1:] == ["thread 1, call 1: all_gather 100: 4 | 0.55",
                                          "thread 1, call 2: all_gather 200: 4 | 1.95"], chains.stdout

wrong = subprocess.run([sys.executable, script, overlapped, "--steps", "99"], capture_output=True, text=True, timeout=60)
assert wrong.returncode == 2 and "rule cli.value" in wrong.stderr, (wrong.returncode, wrong.stderr)

bad = subprocess.run([train, "--steps", "1", "--timeline", os.path.join(work, "missing", "dir", "t")],
                     capture_output=True, text=True, timeout=300)
assert bad.returncode == 2 and "rule cli.timeline" in bad.stderr, (bad.returncode, bad.stderr)
print("timeline ok")
