#!/usr/bin/env python3
"""Each plan's measured compute per step against a reference plan's, in one or more saved runs of
scripts/cluster/check.py (--out files, plain or .xz), configuration by configuration (mesh, rate,
schedule). The compute is amsp-train's step without its waits for communication
(check_stats.measured_compute, the figure check.py's tables print as "compute measured"); what
differs between plans is the host work each plan adds or saves beside the model's compute
(optimizer update, copies into and out of buckets, reductions in shared memory), which the
planner's compute model does not price per plan (docs/planner-check-reproducibility.md, "Compute
per plan"). For every configuration: one row per plan, its compute minus the reference plan's in
ms in each run, then the least and most over the runs. Configurations or plans a run lacks are
"-". Exit 2 on an unreadable file or a configuration without the reference plan or step records.

  python3 scripts/cluster/compute_by_plan.py bench/data/cluster-check-2026-12-05-x.json.xz \\
      bench/data/cluster-check-2026-12-05-y.json.xz
"""
import argparse
import statistics
import sys

from check_stats import measured_compute
from compare_runs import load

PROGRAM = "compute_by_plan.py"


def differences(config, mode, reference, path):
    """plan -> its measured compute minus the reference plan's, in ms, for one configuration."""
    runs = config["runs"][mode]
    if reference not in runs:
        print(f"{PROGRAM}: {path}, {config['mesh']} {config['rate']} {mode}: no runs of the reference plan "
              f"'{reference}' (plans: {', '.join(runs)}; --reference names another)", file=sys.stderr)
        sys.exit(2)
    try:
        base = measured_compute(runs[reference])
        return {plan: 1e3 * (measured_compute(r) - base) for plan, r in runs.items()}
    except (KeyError, TypeError, ValueError, statistics.StatisticsError) as e:
        print(f"{PROGRAM}: {path}, {config['mesh']} {config['rate']} {mode}: a run without compute records "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="saved runs (check.py --out)")
    ap.add_argument("--reference", default="ddp", help="the plan every other is compared with (default ddp)")
    a = ap.parse_args()
    table = {}  # (mesh, rate, mode) -> plan -> [difference per run or None]
    for k, path in enumerate(a.runs):
        for config in load(path, PROGRAM):
            for mode in config["runs"]:
                rows = table.setdefault((config["mesh"], config["rate"], mode), {})
                for plan, ms in differences(config, mode, a.reference, path).items():
                    rows.setdefault(plan, [None] * len(a.runs))[k] = ms
    runs_header = " | ".join(f"run {k + 1}" for k in range(len(a.runs)))
    print(f"mesh rate schedule | plan | compute minus {a.reference}'s, ms: {runs_header} | least..most")
    for (mesh, rate, mode), rows in table.items():
        for plan, ms in rows.items():
            seen = [x for x in ms if x is not None]
            cells = " | ".join("-" if x is None else f"{x:+.1f}" for x in ms)
            print(f"{mesh} {rate} {mode} | {plan} | {cells} | {min(seen):+.1f}..{max(seen):+.1f}")
    print("runs: " + "; ".join(f"run {k + 1} {path}" for k, path in enumerate(a.runs)))


if __name__ == "__main__":
    main()
