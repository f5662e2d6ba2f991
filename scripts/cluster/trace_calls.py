#!/usr/bin/env python3
"""Each rank's blocking collectives, step by step, from amsp-train --timeline PREFIX traces
(PREFIX.rank<R>.json): per step (from one forward of bucket 0 on rank 0 to the next), one line per
rank of `op size_kB[start,end]` in ms from the step's start, then a summary of every blocking
call queued right behind another on the same thread (a chain) against the first of its chain
that started after a gap, by op and size: how often the queued one took more than --stall times
the median of its kind. Last, how far apart the ranks arrive at each call: the k-th blocking
call of every rank taken as one call (every rank makes the same sequence, each on its own group),
by op, size and group size, the median spread of the ranks' starts, how late the last start is
after the ranks' mean start (what a call waits for its slowest rank beyond the schedule's typical
one), and the median time from the last start to the last end. docs/planner-check-chains.md and
docs/planner-check-reproducibility.md read such traces.
With --by-thread the summary of queued calls keeps each thread's calls apart (the main thread's
blocking calls, such as amsp-train's loss AllReduce, from the engine's streams', such as the
gradient norm's AllReduce of the same size).
With --positions it prints instead each blocking call by its place in the step (from rank 0's
step start), medians over the steps after --skip: how far apart the ranks start it, the time from
the last and from the first rank's start to the last rank's end, and how far apart they end it
(docs/planner-check-arrival-spread.md: a call is reached as far apart as the one before was left).
With --issued it prints instead the chains of nonblocking calls each stream issues after step()
(the main thread's `step` wait) until the next: by thread and place in the chain, op and bytes (as
the trace records them: an AllGather's are each rank's part), the median time from a call's issue
to the next issue on its thread. Where the stream issues a call once the one before it completed,
as the spread after the update does, that is the call's own time (docs/planner-check-step-start.md,
"The spread's chain"); a gather stream's prefetches wait for compute instead.
Usage: trace_calls.py PREFIX [--steps 2,5] [--stall 1.3] [--by-thread] [--issued] [--positions [--skip 3]]"""
import argparse
import bisect
import glob
import json
import statistics
import sys


def load(prefix):
    ranks = sorted(glob.glob(f"{prefix}.rank*.json"), key=lambda p: int(p.rsplit("rank", 1)[1].split(".")[0]))
    if not ranks:
        print(f"trace_calls.py: no {prefix}.rank<R>.json [rule cli.value]", file=sys.stderr)
        sys.exit(2)
    return [json.load(open(p))["traceEvents"] for p in ranks]


def step_starts(events):
    return sorted(e["ts"] for e in events if e.get("cat") == "device" and e["name"] == "forward"
                  and e["args"]["bucket"] == 0)


def blocking_calls(events):
    """A rank's blocking collectives in time order (every thread's)."""
    return sorted((e for e in events if e.get("cat") == "collective"), key=lambda e: e["ts"])


def chained_calls(events, gap_us=200):
    """(call, queued) for each blocking collective, queued when it started within gap_us of the
    end of the previous blocking call on its thread."""
    by_thread = {}
    for e in blocking_calls(events):
        by_thread.setdefault(e["tid"], []).append(e)
    out = []
    for calls in by_thread.values():
        for i, e in enumerate(calls):
            queued = i > 0 and e["ts"] - (calls[i - 1]["ts"] + calls[i - 1]["dur"]) < gap_us
            out.append((e, queued))
    return out


def issued_chains(events):
    """{(thread, place in the chain from 1, op, bytes): [us from the call's issue to the next issue on
    its thread]} for the nonblocking calls each stream thread (not the main thread, tid 0) issues
    from the end of each `step` wait of the main thread to the next."""
    ends = sorted(e["ts"] + e["dur"] for e in events if e.get("cat") == "wait" and e["name"] == "step"
                  and e.get("tid") == 0)
    chains = {}  # (step() it follows, thread): its calls in time order
    for e in sorted((e for e in events if e.get("cat") == "issued" and e.get("tid") != 0), key=lambda e: e["ts"]):
        after_step = bisect.bisect_right(ends, e["ts"]) - 1
        if after_step >= 0:
            chains.setdefault((after_step, e["tid"]), []).append(e)
    out = {}
    for (_, tid), calls in chains.items():
        for k, (call, after) in enumerate(zip(calls, calls[1:])):
            out.setdefault((tid, k + 1, call["name"], call["args"]["bytes"]), []).append(after["ts"] - call["ts"])
    return out


def print_issued(ranks):
    chains = {}
    for events in ranks:
        for key, times in issued_chains(events).items():
            chains.setdefault(key, []).extend(times)
    print("issued after step(): thread, call of the chain: op bytes: calls | to the next issue on the thread "
          "(median ms)")
    for (tid, k, op, size), times in sorted(chains.items()):
        print(f"thread {tid}, call {k}: {op} {size:.0f}: {len(times)} | {statistics.median(times) / 1e3:.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prefix")
    p.add_argument("--steps", default="", help="steps to print call by call (comma-separated), none by default")
    p.add_argument("--stall", type=float, default=1.3, help="a queued call slower than this times its kind's "
                   "median after a gap counts as stalled (default 1.3)")
    p.add_argument("--by-thread", action="store_true", help="summarise each thread's calls apart: the main "
                   "thread's (main) and each stream's (thread N)")
    p.add_argument("--issued", action="store_true", help="print the chains of nonblocking calls the streams "
                   "issue after step() instead (what the spread's calls take)")
    p.add_argument("--positions", action="store_true", help="print each call by its place in the step instead: "
                   "the ranks' arrival and end spreads and its time from the last and the first arrival")
    p.add_argument("--skip", type=int, default=3, help="with --positions: steps left out at the start (default 3)")
    a = p.parse_args()
    ranks = load(a.prefix)
    if a.issued:
        print_issued(ranks)
        return
    if a.positions:
        print_positions(ranks, a.skip)
        return
    starts = step_starts(ranks[0])
    for k in (int(s) for s in a.steps.split(",") if s):
        if not 0 <= k < len(starts) - 1:
            print(f"trace_calls.py: --steps {k}: the trace has steps 0..{len(starts) - 2} [rule cli.value]",
                  file=sys.stderr)
            sys.exit(2)
        t0, t1 = starts[k], starts[k + 1]
        print(f"step {k}: {(t1 - t0) / 1e3:.1f} ms")
        for r, events in enumerate(ranks):
            row = [f"{e['name']} {e['args']['bytes'] / 1e3:.0f}kB[{(e['ts'] - t0) / 1e3:.1f},"
                   f"{(e['ts'] + e['dur'] - t0) / 1e3:.1f}]"
                   for e in blocking_calls(events) if t0 <= e["ts"] < t1]
            print(f"  rank {r}: " + " ".join(row))
    kinds = {}
    for events in ranks:
        for e, queued in chained_calls(events):
            thread = (("main" if e["tid"] == 0 else f"thread {e['tid']}"),) if a.by_thread else ()
            kind = kinds.setdefault((e["name"], e["args"]["bytes"]) + thread, {False: [], True: []})
            kind[queued].append(e["dur"] / 1e3)
    print("op bytes: calls after a gap (median ms) | queued calls (median ms, share over "
          f"{a.stall}x the median after a gap)")
    for (op, size, *thread), d in sorted(kinds.items()):
        alone, queued = d[False], d[True]
        base = statistics.median(alone) if alone else float("nan")
        stalled = sum(1 for t in queued if alone and t > a.stall * base)
        print(f"{op} {size:.0f}{''.join(f' ({t})' for t in thread)}: {len(alone)} ({base:.2f}) | {len(queued)} "
              f"({statistics.median(queued) if queued else float('nan'):.2f}, {stalled}/{len(queued)})")
    print_arrivals(ranks)


def arrivals(ranks):
    """{(op, bytes, group size): [(spread of the starts, last start after the mean start, last start
    to last end), ...]} in us, the k-th blocking call of every rank taken as one call; None when the
    ranks' sequences differ."""
    calls = [blocking_calls(events) for events in ranks]
    if len({len(c) for c in calls}) != 1:
        return None
    out = {}
    for same in zip(*calls):
        key = (same[0]["name"], same[0]["args"]["bytes"], same[0]["args"]["group"])
        if any((e["name"], e["args"]["bytes"], e["args"]["group"]) != key for e in same):
            return None
        starts, ends = [e["ts"] for e in same], [e["ts"] + e["dur"] for e in same]
        out.setdefault(key, []).append((max(starts) - min(starts), max(starts) - statistics.mean(starts),
                                        max(ends) - max(starts)))
    return out


def print_arrivals(ranks):
    a = arrivals(ranks)
    if a is None:
        print("arrivals: the ranks' sequences of blocking calls differ; not aligned")
        return
    print("op bytes group: calls | spread of the ranks' starts | last start after the mean start | "
          "last start to last end (median ms)")
    for (op, size, group), v in sorted(a.items()):
        print(f"{op} {size:.0f} {group}: {len(v)} | " + " | ".join(
            f"{statistics.median(x[k] for x in v) / 1e3:.2f}" for k in range(3)))


def positions(ranks, skip=3):
    """{place in the step from 0: (op, bytes, [(arrival spread, last start to last end, first
    start to last end, end spread), ...])} in us, the k-th blocking call of every rank taken as one
    call and placed in the step where rank 0 started it, steps before `skip` left out; None when
    the ranks' sequences differ."""
    calls = [blocking_calls(events) for events in ranks]
    if len({len(c) for c in calls}) != 1 or any((e["name"], e["args"]["bytes"]) != (same[0]["name"],
                                                same[0]["args"]["bytes"]) for same in zip(*calls) for e in same):
        return None
    starts = step_starts(ranks[0])
    out, place = {}, {}
    for same in zip(*calls):
        step = bisect.bisect_right(starts, same[0]["ts"]) - 1
        k = place[step] = place.get(step, -1) + 1
        if step < skip or step >= len(starts) - 1:
            continue
        begin, end = [e["ts"] for e in same], [e["ts"] + e["dur"] for e in same]
        _, _, v = out.setdefault(k, (same[0]["name"], same[0]["args"]["bytes"], []))
        v.append((max(begin) - min(begin), max(end) - max(begin), max(end) - min(begin), max(end) - min(end)))
    return out


def print_positions(ranks, skip):
    placed = positions(ranks, skip)
    if placed is None:
        print("positions: the ranks' sequences of blocking calls differ; not aligned")
        return
    print("place op bytes: steps | ranks arrive apart | last start to last end | first start to last end | "
          "ranks end apart (median ms)")
    for k, (op, size, v) in sorted(placed.items()):
        print(f"{k} {op} {size:.0f}: {len(v)} | " + " | ".join(
            f"{statistics.median(x[j] for x in v) / 1e3:.2f}" for j in range(4)))


if __name__ == "__main__":
    main()
