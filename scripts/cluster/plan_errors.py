#!/usr/bin/env python3
"""The planner's error on each plan, the part that stays with the plan from run to run: saved runs
of scripts/cluster/check.py (--out files, plain or .xz) priced again (check.py --reanalyze, each
run with its own calibration), then per configuration (mesh, rate, schedule) and plan its error
against a reference plan's, in ms:

    (measured step − the reference's measured step) − (predicted step − the reference's predicted)

its mean over the runs and its standard deviation; next to it, where that deviation comes from:
the standard deviation over the runs of the predicted difference (the prediction's own noise:
each run's profile and calibration) and of the measured difference (the measurement's). Relative
to the reference because the plans' order is what Spearman scores: an error every plan shares
changes nothing. Last in each configuration, the standard deviation over the plans of their mean
errors (the reference's 0 included): the model's error that stays with a plan, to set beside
scripts/cluster/compare_runs.py --plan-error, which gives the Spearman misses a model with
errors of that size would have (docs/planner-check-floor.md, "How accurate a model must be").
Presets of one shape are pooled as the check pools them. Exit 2 on a bad argument, an unreadable
file or a configuration without the reference.

  python3 scripts/cluster/plan_errors.py $(ls bench/data/cluster-check-2026-12-0?-a[c-o].json.xz)
"""
import argparse
import statistics
import sys

import check
import check_args
import check_stats

PROGRAM = "plan_errors.py"


def differences(rows, reference):
    """{plan: (measured − reference measured, predicted − reference predicted)} in ms for one
    configuration's rows (check.analyze's table rows, presets of one shape pooled); None when the
    reference is not among them."""
    ref = next((r for r in rows if r["plan"] == reference), None)
    if ref is None:
        return None
    return {r["plan"]: (1e3 * (r["measured"] - ref["measured"]), 1e3 * (r["predicted"] - ref["predicted"]))
            for r in rows}


def summarize(per_run):
    """From a configuration's differences in each run ({plan: (measured, predicted)} each), over
    the plans every run has: {plan: (mean error, its standard deviation over the runs, that of
    the predicted difference, that of the measured difference)}, the error being measured −
    predicted; and the standard deviation over those plans of their mean errors."""
    plans = [p for p in per_run[0] if all(p in d for d in per_run)]
    out = {}
    for p in plans:
        measured, predicted = [d[p][0] for d in per_run], [d[p][1] for d in per_run]
        errors = [m - q for m, q in zip(measured, predicted)]
        out[p] = (statistics.mean(errors), statistics.pstdev(errors), statistics.pstdev(predicted),
                  statistics.pstdev(measured))
    return out, statistics.pstdev([v[0] for v in out.values()]) if out else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="saved runs (check.py --out)")
    ap.add_argument("--reference", default="ddp", help="the plan every error is taken against (default ddp)")
    own, a = check_args.parse_for_saved_runs(ap, check.__doc__)
    paths, reference = own.runs, own.reference
    by_case = {}  # (mesh, rate, mode) -> [{plan: (measured, predicted) ms} per run]
    for path in paths:
        for config in check.load_run(path, PROGRAM):
            config = check.analyze(a, config)
            for mode, rows in config["tables"].items():
                found = differences(check_stats.distinct_plans(rows), reference)
                if found is None:
                    print(f"{PROGRAM}: {path}, {config['mesh']} {config['rate']} {mode}: no {reference} "
                          "[rule cli.value]", file=sys.stderr)
                    sys.exit(2)
                by_case.setdefault((config["mesh"], config["rate"], mode), []).append(found)
    for (mesh, rate, mode), per_run in by_case.items():
        plans, spread = summarize(per_run)
        print(f"\n{mesh} {rate} {mode}, {len(per_run)} runs; ms against {reference}, "
              "standard deviations over the runs\n"
              "| plan | error (measured − predicted), mean | its sd | predicted's sd | measured's sd |\n"
              "|---|---|---|---|---|")
        for p, (mean, sd, predicted_sd, measured_sd) in plans.items():
            print(f"| {p} | {mean:+.2f} | {sd:.2f} | {predicted_sd:.2f} | {measured_sd:.2f} |")
        print(f"error per plan (sd over the plans of the mean errors): {spread:.2f} ms")


if __name__ == "__main__":
    main()
