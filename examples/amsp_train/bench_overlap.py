#!/usr/bin/env python3
"""Tokens per second of amsp-train per plan, with communication overlapped (prefetch of the next
bucket, spread running into the next forward) and serialized (--no-overlap), run side by side.
Prints a Markdown table; keeps each run's --log-json file in --logs for plot_runs.py.

    bench_overlap.py --binary build/default/examples/amsp_train/amsp-train --logs /tmp/bench \
        [--steps 60] [--repeats 1] [--plans ddp zero3 ...] [-- extra amsp-train options]

The hidden fraction is 1 - comm_ms(overlap) / comm_ms(serialized): how much of the exposed
communication time the overlap removes (medians over steps, rank 0). Runs alternate (overlap,
serialized, overlap, ...) so that a change in machine load hits both sides alike.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

PLANS = ["ddp", "zero1", "zero2", "zero3", "mics(2)", "amsp-7b", "amsp-13b", "amsp-30b"]


def run(binary, plan, overlap, log, steps, extra):
    cmd = [binary, "--plan", plan, "--steps", str(steps), "--eval-every", "0", "--sample-bytes", "0", "--quiet",
           "--log-json", log] + ([] if overlap else ["--no-overlap"]) + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    final = json.loads(out.strip().splitlines()[-1])
    with open(log) as f:
        steps_ = [json.loads(line) for line in f if "final_loss" not in line]
    return final["tokens_per_second"], statistics.median(r["comm_ms"] for r in steps_)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--logs", required=True, help="folder for the --log-json files")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--plans", nargs="+", default=PLANS)
    parser.add_argument("extra", nargs="*", help="further amsp-train options (after --)")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)
    print("| plan | tokens/s overlapped | tokens/s serialized | speed-up | comm ms overlapped | comm ms serialized | hidden |")
    print("|---|---|---|---|---|---|---|")
    for plan in args.plans:
        results = {True: [], False: []}
        for rep in range(args.repeats):
            for overlap in (True, False):
                safe = plan.replace("(", "").replace(")", "").replace(",", "_").replace("=", "")
                log = os.path.join(args.logs, f"{safe}_{'overlap' if overlap else 'serial'}_{rep}.jsonl")
                results[overlap].append(run(args.binary, plan, overlap, log, args.steps, args.extra))
        tps = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
        comm = {k: statistics.median(r[1] for r in v) for k, v in results.items()}
        hidden = 1.0 - comm[True] / comm[False] if comm[False] > 0 else 0.0
        print(f"| {plan} | {tps[True]:.0f} | {tps[False]:.0f} | {tps[True] / tps[False]:.2f} | {comm[True]:.1f} | "
              f"{comm[False]:.1f} | {hidden:.0%} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
