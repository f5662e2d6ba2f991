#!/usr/bin/env python3
"""Where a step's time goes, across ranks, from amsp-train --timeline PREFIX traces
(PREFIX.rank<R>.json): per step (from the first rank entering it, its `start_micro_batch` wait,
to the first rank entering the next), when the last rank starts its first forward (the step's
first gather or spread and the ranks' own spread), ends the forward of the last bucket, ends the
backward of bucket 0, and when the next step starts; then each rank's device time in the step
(mean over ranks). A second line splits each rank's own step (its entry to its next entry):
how long after the first rank the last one enters, and per rank (mean) the device time, the main
thread's waits and the host time that is neither (amsp-train's own math on the host, issuing
calls, being descheduled). A third line splits those waits by kind (the gather of bucket 0, where
a step starts, apart from the later gathers).
Medians over the steps after --skip; the last `start_micro_batch` wait only ends the step before
it. Compare the plans of one mesh and rate, or a plan with the model's schedule
(docs/planner-check-quiet-host.md, docs/planner-check-traced-terms.md).
Usage: trace_phases.py PREFIX [--skip 2]"""
import argparse
import statistics
import sys

from trace_calls import load


def main_thread_waits(events):
    """A rank's waits on its main thread (tid 0), the ones that hold its compute."""
    return [e for e in events if e.get("cat") == "wait" and e.get("tid") == 0 and "dur" in e]


def rank_steps(events):
    """A rank's steps: (start, next start, first forward's start, last forward's end, backward 0's
    end, device time, the main thread's (tid 0) waits) in us, one per `start_micro_batch` wait but
    the last."""
    starts = sorted(e["ts"] for e in events if e.get("cat") == "wait" and e["name"] == "start_micro_batch")
    device = sorted((e for e in events if e.get("cat") == "device"), key=lambda e: e["ts"])
    waits = main_thread_waits(events)
    out = []
    for t0, t1 in zip(starts, starts[1:]):
        inside = [e for e in device if t0 <= e["ts"] < t1]
        forward = [e for e in inside if e["name"] == "forward"]
        backward = [e for e in inside if e["name"] == "backward"]
        if not forward or not backward:
            print(f"trace_phases.py: a step without forward or backward device events at {t0} us [rule cli.value]",
                  file=sys.stderr)
            sys.exit(2)
        last_bucket = max(e["args"]["bucket"] for e in forward)
        last_forward = max(e["ts"] + e["dur"] for e in forward if e["args"]["bucket"] == last_bucket)
        backward_0 = max(e["ts"] + e["dur"] for e in backward if e["args"]["bucket"] == 0)
        out.append((t0, t1, min(e["ts"] for e in forward), last_forward, backward_0, sum(e["dur"] for e in inside),
                    sum(e["dur"] for e in waits if t0 <= e["ts"] < t1)))
    return out


def phases(ranks, skip, steps=None):
    """Medians over steps skip.. of (last first-forward start, last forward end, last backward end,
    next step, mean device time), ms from the first rank entering the step. `steps`: the ranks'
    rank_steps when the caller has them already."""
    steps = steps or [rank_steps(events) for events in ranks]
    n = min(len(s) for s in steps)
    if n <= skip:
        print(f"trace_phases.py: --skip {skip}: the traces have {n} complete steps [rule cli.value]", file=sys.stderr)
        sys.exit(2)
    rows = []
    for k in range(skip, n):
        t0 = min(s[k][0] for s in steps)
        rows.append((max(s[k][2] for s in steps) - t0, max(s[k][3] for s in steps) - t0,
                     max(s[k][4] for s in steps) - t0, min(s[k][1] for s in steps) - t0,
                     statistics.mean(s[k][5] for s in steps)))
    return [statistics.median(r[i] for r in rows) / 1e3 for i in range(5)], len(rows)


def rank_time(steps, skip):
    """Medians over steps skip.. of (last rank's entry after the first's, and per rank (mean) its
    own step, device time, main-thread waits, host time that is neither), ms, from the ranks'
    rank_steps. A rank's step runs from its `start_micro_batch` wait to its next."""
    out = []
    for k in range(skip, min(len(s) for s in steps)):
        entries = [s[k][0] for s in steps]
        step = statistics.mean(s[k][1] - s[k][0] for s in steps)
        device, waits = (statistics.mean(s[k][i] for s in steps) for i in (5, 6))
        out.append((max(entries) - min(entries), step, device, waits, step - device - waits))
    return [statistics.median(r[i] for r in out) / 1e3 for i in range(5)]


def wait_kinds(ranks, steps, skip):
    """{kind: median over steps skip.. of the main thread's waits of that kind in a rank's own step
    (mean over ranks), ms}, from the ranks' events and rank_steps: each wait by its name, the gather
    of bucket 0 (the step's start: the update and spread of the first bucket, or its gather) apart
    as `first gather`."""
    n = min(len(s) for s in steps)
    waits = [main_thread_waits(events) for events in ranks]
    per_step = []
    for k in range(skip, n):
        totals = {}
        for s, rank_waits in zip(steps, waits):
            t0, t1 = s[k][0], s[k][1]
            for e in rank_waits:
                if t0 <= e["ts"] < t1:
                    first = e["name"] == "gather" and e.get("args", {}).get("bucket") == 0
                    kind = "first gather" if first else e["name"]
                    totals[kind] = totals.get(kind, 0.0) + e["dur"] / len(ranks)
        per_step.append(totals)
    kinds = sorted({kind for totals in per_step for kind in totals})
    return {kind: statistics.median(t.get(kind, 0.0) for t in per_step) / 1e3 for kind in kinds}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prefix")
    p.add_argument("--skip", type=int, default=2, help="steps left out at the start (default 2)")
    a = p.parse_args()
    if a.skip < 0:
        print(f"trace_phases.py: --skip must be at least 0, got {a.skip} [rule cli.value]", file=sys.stderr)
        sys.exit(2)
    ranks = load(a.prefix)
    steps = [rank_steps(events) for events in ranks]
    (first, forward, backward, step, device), n = phases(ranks, a.skip, steps)
    print(f"{a.prefix}: last rank's first forward starts {first:.2f} | forward ends {forward:.2f} | "
          f"backward ends {backward:.2f} | next step {step:.2f} | device time per rank {device:.2f} "
          f"(ms from the first rank entering the step, medians over {n} steps)")
    spread, step, device, waits, other = rank_time(steps, a.skip)
    print(f"{a.prefix}: last rank enters {spread:.2f} after the first | per rank: step {step:.2f}, device "
          f"{device:.2f}, waits {waits:.2f}, other host time {other:.2f} (ms, medians over {n} steps)")
    kinds = wait_kinds(ranks, steps, a.skip)
    print(f"{a.prefix}: main-thread waits per rank: " + ", ".join(f"{kind} {ms:.2f}" for kind, ms in kinds.items()
                                                                    if ms >= 0.005) + f" (ms, medians over {n} steps)")


if __name__ == "__main__":
    main()
