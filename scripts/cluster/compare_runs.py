#!/usr/bin/env python3
"""How far the cluster check's measurement reproduces between runs: two or more saved runs of
scripts/cluster/check.py (--out files, plain or .xz) compared configuration by configuration
(mesh, rate, schedule), measurement against measurement, no planner. For every pair of runs:

  - Spearman's rank correlation of the plans' measured steps: the most a model can expect to
    score against one run when the other is as good a measurement of the same plans;
  - the median and the largest change of a plan's measured step between the two runs;
  - of the pairs of plans the first run separates (every repeat of one faster than every repeat
    of the other, check_stats.separable_pairs), how many the second orders the same way;
  - whether the first run's fastest plan lies within 5 % of the second's fastest (the pick target
    with the first run as the prediction).

Next to them, the first run's bootstrap floor (check_stats.bootstrap_floor: its mean Spearman
when its plans are resampled from its own repeats), which sees the noise inside one run and not
the drift between runs. Last, per configuration over every pair of runs: the least, most and
median Spearman, the least and most median change, and the separable pairs carried over.
Configurations missing from a run are skipped; plans are the ones both runs of a pair measured.
With three runs or more, last, the leave-one-out floor (leave_one_out): each run's measured order
against the mean of the other runs' steps, plan by plan: what a model that knew every plan's
expected step as well as the other runs together do would score against that run. A pair of
single runs carries the noise of both; this predictor averages the others' away, so it is the
floor a model's Spearman misses should be compared with.
With --plan-error σ,.. (ms), last, how accurate a model must be to meet the floor's figure: the
same leave-one-out prediction with each plan's step off by a fixed error, drawn once per plan and
configuration from a normal distribution of standard deviation σ and kept over every run, the
way a model's error stays with a plan (plan_error_misses); the mean count of run cases below 0.9
over --draws draws (seeded: the same figures every time) and its 5th to 95th percentile.
Exit 2 on a bad argument or an unreadable file.

  python3 scripts/cluster/compare_runs.py bench/data/cluster-check-2026-12-04-v.json.xz \\
      bench/data/cluster-check-2026-12-05-w.json.xz
"""
import argparse
import itertools
import math
import random
import statistics
import sys

import check_stats
from check import load_run
from check_stats import bootstrap_floor, distinct_plans, run_medians, separable_pairs, spearman, typical_step


def load(path, program="compare_runs.py"):
    """A saved run's configurations (check.load_run); exits 2 naming the file when it cannot be read as one."""
    return load_run(path, program, keys=("mesh", "rate", "runs"))


def measured_rows(config, mode, plans):
    """One row per plan as check.py forms it: the repeats (each run's median step) and their
    typical_step."""
    rows = []
    for plan in plans:
        repeats = run_medians(config["runs"][mode][plan])
        rows.append({"plan": plan, "repeats": repeats, "measured": typical_step(repeats)})
    return rows


def distinct_steps(config, mode, plans):
    """{plan: measured step} for `plans`, presets of one shape (amsp-7b and amsp-13b on 2x4) one
    plan measured twice, as the check counts them (check_stats.distinct_plans)."""
    rows = [dict(r, shape=config["runs"][mode][r["plan"]][0].get("final", {}).get("plan", r["plan"]), predicted=0.0)
            for r in measured_rows(config, mode, plans)]
    return {r["plan"]: r["measured"] for r in distinct_plans(rows)}


def leave_one_out(steps_by_run):
    """For each run (a {plan: measured step} each, the plans of every run), Spearman of its steps
    against the mean of the other runs' steps of the same plans."""
    plans = [p for p in steps_by_run[0] if all(p in steps for steps in steps_by_run)]
    out = []
    for i, steps in enumerate(steps_by_run):
        others = [o for j, o in enumerate(steps_by_run) if j != i]
        out.append(spearman([statistics.mean(o[p] for o in others) for p in plans], [steps[p] for p in plans]))
    return out


def plan_error_misses(cases, sigma_s, draws, seed=1):
    """The leave-one-out floor with a fixed error per plan: for each of `draws` draws, every
    configuration of `cases` (each a list over runs of {plan: measured step}, the plans of every
    run) gets one error per plan from N(0, sigma_s), added to that plan's mean of the other runs
    for every run; returns the count of run cases below Spearman 0.9, per draw."""
    # Each run's leave-one-out prediction and measurement, plan by plan: the same in every draw.
    prepared = []
    for steps_by_run in cases:
        plans = [p for p in steps_by_run[0] if all(p in steps for steps in steps_by_run)]
        runs = []
        for i, steps in enumerate(steps_by_run):
            others = [o for j, o in enumerate(steps_by_run) if j != i]
            runs.append(([statistics.mean(o[p] for o in others) for p in plans], [steps[p] for p in plans]))
        prepared.append((plans, runs))
    rng = random.Random(seed)
    counts = []
    for _ in range(draws):
        below = 0
        for plans, runs in prepared:
            error = [rng.gauss(0.0, sigma_s) for _ in plans]
            for floor, measured in runs:
                below += spearman([f + e for f, e in zip(floor, error)], measured) < 0.9
        counts.append(below)
    return counts


def milliseconds_list(text):
    """argparse type of --plan-error: comma-separated non-negative finite milliseconds."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) and v >= 0 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of milliseconds >= 0, e.g. 0.1,0.2")
    return values


def compare(a_rows, b_rows):
    """The figures of one configuration, run a against run b (rows in the same plan order)."""
    a = [r["measured"] for r in a_rows]
    b = [r["measured"] for r in b_rows]
    changes = [abs(y / x - 1) for x, y in zip(a, b)]
    # separable_pairs orders the pairs run a separates by "predicted": here run b's measurement.
    pairs, same = separable_pairs([dict(r, predicted=y) for r, y in zip(a_rows, b)])
    pick = min(range(len(a)), key=lambda i: a[i])
    return {"spearman": spearman(a, b), "median_change": statistics.median(changes), "max_change": max(changes),
            "separable": pairs, "same_order": same, "pick_over_best": b[pick] / min(b) - 1,
            "bootstrap_spearman": bootstrap_floor(a_rows)[1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="saved runs (check.py --out), two or more")
    ap.add_argument("--estimator", choices=["mean", "median"], default="mean",
                    help="a plan's measured step from its repeats, as check.py --estimator")
    ap.add_argument("--plan-error", type=milliseconds_list, default=[], metavar="MS[,MS...]",
                    help="also the leave-one-out floor with a fixed error per plan of each standard deviation "
                         "(ms): the accuracy a model needs (three runs or more)")
    ap.add_argument("--draws", type=int, default=200, help="draws per --plan-error value (default 200)")
    a = ap.parse_args()
    if a.draws < 1:
        ap.error(f"--draws must be at least 1, got {a.draws}")
    if len(a.runs) < 2:
        ap.error(f"need two or more saved runs, got {len(a.runs)}")
    if a.plan_error and len(a.runs) < 3:
        ap.error(f"--plan-error needs three saved runs or more (the leave-one-out floor), got {len(a.runs)}")
    check_stats.STEP_ESTIMATOR = a.estimator
    loaded = [(path, {(c["mesh"], c["rate"]): c for c in load(path)}) for path in a.runs]
    print("run a | run b | mesh rate schedule | plans | Spearman a~b | step change median / max | "
          "a's separable pairs b orders alike | a's pick in b | a's bootstrap Spearman")
    by_case = {}  # "mesh rate schedule" -> the figures of every pair of runs
    for (path_a, by_a), (path_b, by_b) in itertools.combinations(loaded, 2):
        for key, config_a in by_a.items():
            config_b = by_b.get(key)
            if config_b is None:
                continue
            for mode in config_a["runs"]:
                if mode not in config_b["runs"]:
                    continue
                plans = [p for p in config_a["runs"][mode] if p in config_b["runs"][mode]]
                if len(plans) < 2:
                    continue
                try:
                    f = compare(measured_rows(config_a, mode, plans), measured_rows(config_b, mode, plans))
                except (KeyError, TypeError, ValueError, ZeroDivisionError, statistics.StatisticsError) as e:
                    print(f"compare_runs.py: {path_a} or {path_b}, {key[0]} {key[1]} {mode}: a run without "
                          f"step records ({type(e).__name__}: {e})", file=sys.stderr)
                    sys.exit(2)
                case = f"{key[0]} {key[1]} {mode}"
                by_case.setdefault(case, []).append(f)
                print(f"{path_a} | {path_b} | {case} | {len(plans)} | {f['spearman']:.2f} | "
                      f"{100 * f['median_change']:.1f} / {100 * f['max_change']:.1f} % | "
                      f"{f['same_order']}/{f['separable']} | {100 * f['pick_over_best']:+.1f} % | "
                      f"{f['bootstrap_spearman']:.2f}")
    print("\nmesh rate schedule | pairs of runs | Spearman a~b: least - most (median) | "
          "step change median: least - most | a's separable pairs b orders alike")
    for case, figures in by_case.items():
        rho = [f["spearman"] for f in figures]
        change = [f["median_change"] for f in figures]
        print(f"{case} | {len(figures)} | {min(rho):.2f} - {max(rho):.2f} ({statistics.median(rho):.2f}) | "
              f"{100 * min(change):.1f} - {100 * max(change):.1f} % | "
              f"{sum(f['same_order'] for f in figures)}/{sum(f['separable'] for f in figures)}")
    if len(loaded) < 3:
        return
    print("\nmesh rate schedule | runs | leave-one-out Spearman of each run (the others' mean as the prediction) | "
          "below 0.9")
    below_total = cases_total = 0
    floor_cases = []  # per configuration with three runs or more: each run's {plan: step}
    for case in by_case:
        mesh, rate, mode = case.split()
        having = [by[(mesh, rate)] for _, by in loaded if (mesh, rate) in by and mode in by[(mesh, rate)]["runs"]]
        if len(having) < 3:
            continue
        plans = [p for p in having[0]["runs"][mode] if all(p in c["runs"][mode] for c in having)]
        floor_cases.append([distinct_steps(c, mode, plans) for c in having])
        rho = leave_one_out(floor_cases[-1])
        below = sum(r < 0.9 for r in rho)
        below_total, cases_total = below_total + below, cases_total + len(rho)
        print(f"{case} | {len(having)} | " + ", ".join(f"{r:.2f}" for r in rho) + f" | {below} of {len(rho)}")
    print(f"leave-one-out: {below_total} of {cases_total} run cases below Spearman 0.9")
    for sigma_ms in a.plan_error:
        counts = sorted(plan_error_misses(floor_cases, sigma_ms / 1e3, a.draws))
        low, high = counts[int(0.05 * (len(counts) - 1))], counts[int(math.ceil(0.95 * (len(counts) - 1)))]
        print(f"leave-one-out with a fixed error per plan of sigma {sigma_ms:.2f} ms: {statistics.mean(counts):.1f} "
              f"of {cases_total} run cases below Spearman 0.9 on average ({low} - {high}, 5th - 95th percentile "
              f"of {a.draws} draws)")


if __name__ == "__main__":
    main()
