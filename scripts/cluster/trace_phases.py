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
a step starts, apart from the later gathers), a fourth the device time by compute segment (the
forward or backward of one bucket).
With --per-rank it prints instead how each rank's step starts: when its optimizer step's wait
ends, when it enters the step, when its streams issue each call from then to the end of its
forward (a spread issues each call once the one before completed on that rank, so the next issue
is when that call ended there; a gather of the first micro-batch is issued once its spread
ended), and when its first forward starts and its forward ends (docs/planner-check-spread-pairs.md).
Medians over the steps after --skip; the last `start_micro_batch` wait only ends the step before
it. Compare the plans of one mesh and rate, or a plan with the model's schedule
(docs/planner-check-quiet-host.md, docs/planner-check-traced-terms.md).
Usage: trace_phases.py PREFIX [--skip 2] [--per-rank]"""
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


def median_totals(events_of_ranks, steps, skip, key_of, order=sorted):
    """{key: median over steps skip.. of the durations of the events of a rank's own step with that
    key_of(event), mean over ranks, ms}, keys in `order`: the events of each rank (a list per rank)
    and its rank_steps."""
    per_step = []
    for k in range(skip, min(len(s) for s in steps)):
        totals = {}
        for s, events in zip(steps, events_of_ranks):
            t0, t1 = s[k][0], s[k][1]
            for e in events:
                if t0 <= e["ts"] < t1:
                    key = key_of(e)
                    totals[key] = totals.get(key, 0.0) + e["dur"] / len(events_of_ranks)
        per_step.append(totals)
    keys = order({key for totals in per_step for key in totals})
    return {key: statistics.median(t.get(key, 0.0) for t in per_step) / 1e3 for key in keys}


def wait_kinds(ranks, steps, skip):
    """{kind: median over steps skip.. of the main thread's waits of that kind in a rank's own step
    (mean over ranks), ms}, from the ranks' events and rank_steps: each wait by its name, the gather
    of bucket 0 (the step's start: the update and spread of the first bucket, or its gather) apart
    as `first gather`."""
    def kind(e):
        return "first gather" if e["name"] == "gather" and e.get("args", {}).get("bucket") == 0 else e["name"]
    return median_totals([main_thread_waits(events) for events in ranks], steps, skip, kind)


def segment_times(ranks, steps, skip):
    """{(pass, bucket): median over steps skip.. of the device time of that compute segment in a
    rank's own step (mean over ranks), ms}, in the order a step runs them (forward by bucket, then
    backward from the last bucket): which segment a plan's longer compute lies in
    (docs/planner-check-floor.md, "Run ao")."""
    def in_step_order(keys):
        return sorted(keys, key=lambda key: (key[0] != "forward", key[1] if key[0] == "forward" else -key[1]))
    return median_totals([[e for e in events if e.get("cat") == "device"] for events in ranks], steps, skip,
                         lambda e: (e["name"], e["args"]["bucket"]), in_step_order)


def rank_starts(events, steps):
    """How each of a rank's steps starts, from its events and rank_steps: per step a {label: trace
    time, us} of `step wait ends` (its last `step` wait before its entry), `enters`, `thread T
    call i: OP BYTES` for the i-th call its stream T issued from the wait's end to the forward's
    end, `first forward` and `forward ends` (its last bucket's); None for a step without a `step`
    wait before it (the first)."""
    step_waits = sorted((e for e in main_thread_waits(events) if e["name"] == "step"), key=lambda e: e["ts"])
    issued = sorted((e for e in events if e.get("cat") == "issued"), key=lambda e: e["ts"])
    out = []
    for entry, _, first_forward, forward_end, *_ in steps:
        before = [e for e in step_waits if e["ts"] < entry]
        if not before:
            out.append(None)
            continue
        wait_end = before[-1]["ts"] + before[-1]["dur"]
        row, count = {"step wait ends": wait_end, "enters": entry}, {}
        for e in issued:
            if wait_end <= e["ts"] <= forward_end:
                tid = e.get("tid")
                count[tid] = count.get(tid, 0) + 1
                row[f"thread {tid} call {count[tid]}: {e['name']} {int(e['args']['bytes'])}"] = e["ts"]
        row["first forward"], row["forward ends"] = first_forward, forward_end
        out.append(row)
    return out


def per_rank_starts(ranks, steps, skip):
    """(labels, {label: [median per rank]}, steps counted): rank_starts of every rank, ms from the
    first rank entering each step, medians over steps skip.. that every rank has a row for; a label
    some rank lacks in a step is left out of that step."""
    rows = [rank_starts(events, s) for events, s in zip(ranks, steps)]
    n = min(len(r) for r in rows)
    kept = [k for k in range(skip, n) if all(r[k] is not None for r in rows)]
    if not kept:
        print(f"trace_phases.py: --per-rank: no step after --skip {skip} follows a `step` wait on every rank "
              "[rule cli.value]", file=sys.stderr)
        sys.exit(2)
    labels = [label for label in rows[0][kept[0]]]
    values = {label: [[] for _ in rows] for label in labels}
    for k in kept:
        t0 = min(r[k]["enters"] for r in rows)
        for label in labels:
            if all(label in r[k] for r in rows):
                for i, r in enumerate(rows):
                    values[label][i].append((r[k][label] - t0) / 1e3)
    labels = [label for label in labels if all(values[label])]
    return labels, {label: [statistics.median(v) for v in values[label]] for label in labels}, len(kept)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prefix")
    p.add_argument("--skip", type=int, default=2, help="steps left out at the start (default 2)")
    p.add_argument("--per-rank", action="store_true", help="how each rank's step starts, rank by rank")
    a = p.parse_args()
    if a.skip < 0:
        print(f"trace_phases.py: --skip must be at least 0, got {a.skip} [rule cli.value]", file=sys.stderr)
        sys.exit(2)
    ranks = load(a.prefix)
    steps = [rank_steps(events) for events in ranks]
    if a.per_rank:
        labels, medians, n = per_rank_starts(ranks, steps, a.skip)
        print(f"{a.prefix}: ms from the first rank entering the step, medians over {n} steps")
        width = max(len(label) for label in labels)
        print(f"{'rank':{width}s} " + " ".join(f"{r:>6d}" for r in range(len(ranks))))
        for label in labels:
            print(f"{label:{width}s} " + " ".join(f"{v:6.2f}" for v in medians[label]))
        return
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
    segments = segment_times(ranks, steps, a.skip)
    print(f"{a.prefix}: device time per segment: " + ", ".join(f"{name} {bucket} {ms:.2f}"
                                                              for (name, bucket), ms in segments.items()) +
          f" (ms, mean over ranks, medians over {n} steps)")


if __name__ == "__main__":
    main()
