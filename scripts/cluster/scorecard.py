#!/usr/bin/env python3
"""The planner against the emulated cluster, every saved run at once: saved runs of
scripts/cluster/check.py (--out files, plain or .xz) priced again with today's model (check.py
--reanalyze, each run with its own calibration) and scored on the check's targets (median |error|
<= 15 %, Spearman >= 0.9, the planner's pick within 5 % of the measured best;
check_stats.targets_met), one table:

  - a row per run: the run's name (its file name without `cluster-check-` and the extension), its
    rate, and for each case (mesh and schedule) `error / Spearman / pick`, a missed target in bold;
  - per rate and over all runs: the cases that meet each target and all three, the pairs of plans
    whose repeats do not overlap (check_stats.separable_pairs) and how many the planner orders
    right, and how many cases the measurement's own floor meets Spearman in;
  - the floor: where three runs or more measured the same case (mesh, rate, schedule) of the same
    workload (amsp-train's arguments, the model, the global batch), each run's measured order
    against the mean of the other runs' steps (compare_runs.leave_one_out), what a model that knew
    every plan's expected step would score against that run (docs/planner-check-floor.md). A cell
    whose floor misses 0.9 says so, `(floor 0.88)`: there the measurement itself does not carry the
    target;
  - the runs measured without a profile today's model reads (check_predict.missing_profiles, priced
    without the term it feeds), named with what they lack, and the totals once more over the runs
    that lack none;
  - the paper's claim (check_stats.paper_claim): in how many cases the best AMSP preset measured
    and predicted ahead of ZeRO-3 and of MiCS, and by how much (least..most);
  - the bytes the node links carried over the bytes of the pinned algorithms (least..most over
    every plan of every case).

This is the check's proof table (docs/planner.md, bench/README.md): one command reproduces it
from the data in bench/data. check.py's own options (the model's switches, --build) go as
--option=value and apply to every run, so that a term can be scored on and off:

  python3 scripts/cluster/scorecard.py bench/data/cluster-check-2026-12-07-{as,at,au,av}.json.xz
  python3 scripts/cluster/scorecard.py bench/data/cluster-check-2026-12-07-b[g-i].json.xz --arrival-spread=off

Exit 2 on a bad argument or an unreadable run.
"""
import argparse
import os

import check
import check_args
from check_predict import missing_profiles
from compare_runs import leave_one_out
from check_stats import distinct_plans, paper_claim, separable_pairs, summarize, targets_met

PROGRAM = "scorecard.py"
TARGETS = ("error", "Spearman", "pick")


def run_name(path):
    """`bench/data/cluster-check-2026-12-07-bg.json.xz` -> `2026-12-07-bg`."""
    name = os.path.basename(path)
    for suffix in (".xz", ".json"):
        name = name[:-len(suffix)] if name.endswith(suffix) else name
    return name[len("cluster-check-"):] if name.startswith("cluster-check-") else name


def case_score(rows, workload=None, missing=()):
    """One case's table rows (check.analyze's, one schedule of one configuration) scored: the
    summary over the distinct plans (check_stats.summarize), which targets it meets, the separable
    pairs and how many are ordered right, the paper's claim as (peer, measured ratio, predicted
    ratio) triples (empty without one), each plan's link bytes over the model's (plans without
    a link model left out), for the floor (add_floors) each distinct plan's measured step and
    the workload it ran, and the profiles its run lacks (`missing`, names)."""
    distinct = distinct_plans(rows)
    s = summarize(rows)
    claim = paper_claim(distinct)
    link = [r["link_measured"] / r["link_model"] for r in rows
            if r.get("link_model") and r.get("link_measured") == r.get("link_measured")]
    return {"summary": s, "met": targets_met(s), "separable": separable_pairs(distinct),
            "claim": [(r["plan"], m, p) for r, m, p in claim[1]] if claim else [], "link": link,
            "measured": {r["plan"]: r["measured"] for r in distinct}, "workload": workload,
            "missing": tuple(missing)}


def add_floors(runs):
    """Each case's leave-one-out floor (score["floor"], a Spearman) where three runs or more of
    `runs` ([(name, rate, {(mesh, mode): score})]) measured that case of the same workload; the
    other scores get none."""
    groups = {}
    for _, rate, by_case in runs:
        for (mesh, mode), score in by_case.items():
            groups.setdefault((rate, mesh, mode, score["workload"]), []).append(score)
    for scores in groups.values():
        if len(scores) >= 3:
            for score, floor in zip(scores, leave_one_out([s["measured"] for s in scores])):
                score["floor"] = floor


def cell(score):
    """`error / Spearman / pick` of a case, each missed target in bold."""
    s, met = score["summary"], score["met"]
    # Three places where two would round a miss (0.898) or a hit (0.902) to 0.90.
    rho = f"{s['spearman']:.3f}" if 0.895 <= s["spearman"] < 0.905 else f"{s['spearman']:.2f}"
    parts = (f"{100 * s['median_abs_error']:.1f} %", rho, f"{100 * s['pick_over_best']:+.1f} %")
    text = " / ".join(p if met[t] else f"**{p}**" for p, t in zip(parts, TARGETS))
    floor = score.get("floor")
    return text + (f" (floor {floor:.2f})" if floor is not None and floor < 0.9 else "")


def tally(scores):
    """Totals over a list of case scores: cases, cases meeting each target and all three,
    separable pairs and those ordered right, the claim per peer kind ("zero3", "mics") as [cases,
    measured ahead, predicted ahead, least and most measured ratio, least and most predicted],
    the least and most link-bytes ratio, and the cases with a floor and those whose floor meets
    Spearman >= 0.9."""
    out = {"cases": len(scores), "all": sum(all(s["met"].values()) for s in scores),
           "pairs": sum(s["separable"][0] for s in scores), "right": sum(s["separable"][1] for s in scores)}
    floors = [s["floor"] for s in scores if s.get("floor") is not None]
    out["floor"] = (len(floors), sum(f >= 0.9 for f in floors))
    for t in TARGETS:
        out[t] = sum(s["met"][t] for s in scores)
    claim = {}
    for s in scores:
        for peer, measured, predicted in s["claim"]:
            kind = "mics" if peer.startswith("mics") else peer
            c = claim.setdefault(kind, [0, 0, 0, [], []])
            c[0] += 1
            c[1] += measured > 1
            c[2] += predicted > 1
            c[3].append(measured)
            c[4].append(predicted)
    out["claim"] = {k: c[:3] + [min(c[3]), max(c[3]), min(c[4]), max(c[4])] for k, c in claim.items()}
    links = [x for s in scores for x in s["link"]]
    out["link"] = (min(links), max(links)) if links else None
    return out


def print_scorecard(runs):
    """`runs`: [(name, rate, {(mesh, mode): score})] in the order given; the floors added first."""
    add_floors(runs)
    cases = []  # in the order the runs first name them (the check's: 4x2 before 2x4, overlap first)
    for _, _, by_case in runs:
        cases += [c for c in by_case if c not in cases]
    print("Median |error| / Spearman / pick against the measured best; a missed target in bold.\n")
    print("| run | rate | " + " | ".join(f"{mesh} {mode}" for mesh, mode in cases) + " |")
    print("|---|---|" + "---|" * len(cases))
    for name, rate, by_case in runs:
        print(f"| {name} | {rate} | " + " | ".join(cell(by_case[c]) if c in by_case else "–" for c in cases) + " |")
    rates = []
    for _, rate, _ in runs:
        if rate not in rates:
            rates.append(rate)
    groups = [(rate, [s for _, r, by_case in runs if r == rate for s in by_case.values()]) for rate in rates]
    groups.append(("all", [s for _, _, by_case in runs for s in by_case.values()]))
    lacking = {}  # what a run lacks -> the runs lacking it, in order
    for name, _, by_case in runs:
        missing = next(iter(by_case.values()))["missing"] if by_case else ()
        if missing and name not in lacking.setdefault(missing, []):
            lacking[missing].append(name)
    complete = [s for _, _, by_case in runs for s in by_case.values() if not s["missing"]]
    if lacking and complete:
        groups.append(("all, every profile measured", complete))
    print("\n| rate | cases | error met | Spearman met | pick met | all three | separable pairs ordered right "
          "| Spearman met by the floor |")
    print("|---|---|---|---|---|---|---|---|")
    totals = {}
    for rate, scores in groups:
        t = totals[rate] = tally(scores)
        print(f"| {rate} | {t['cases']} | {t['error']} | {t['Spearman']} | {t['pick']} | {t['all']} | "
              f"{t['right']} of {t['pairs']} | " + (f"{t['floor'][1]} of {t['floor'][0]} |" if t["floor"][0] else "– |"))
    for missing, names in lacking.items():
        print(f"\nMeasured without the {' or the '.join(missing)}, so priced without the term{'s' if len(missing) > 1 else ''} "
              f"{'they feed' if len(missing) > 1 else 'it feeds'}: {', '.join(names)}.")
    t = totals["all"]
    for kind, label in (("zero3", "ZeRO-3"), ("mics", "MiCS")):
        if kind in t["claim"]:
            n, measured, predicted, m_lo, m_hi, p_lo, p_hi = t["claim"][kind]
            print(f"\nPaper's claim, the best AMSP preset against {label}: ahead in {measured} of {n} cases measured "
                  f"({m_lo:.2f}–{m_hi:.2f}x), in {predicted} of {n} predicted ({p_lo:.2f}–{p_hi:.2f}x).")
    if t["link"]:
        lo, hi = t["link"]
        print(f"\nNode-link bytes measured over the pinned algorithms' bytes: {100 * (lo - 1):+.1f} to "
              f"{100 * (hi - 1):+.1f} % over every plan of every case.")
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="saved runs (check.py --out)")
    own, a = check_args.parse_for_saved_runs(ap, check.__doc__)
    runs = []
    for path in own.runs:
        by_rate = {}
        for config in check.load_run(path, PROGRAM):
            config = check.analyze(a, config)
            scores = by_rate.setdefault(config["rate"], {})
            for mode, rows in config["tables"].items():
                workload = (config.get("train_args", ""), config.get("model_args", ""), config.get("global_batch"))
                scores[(config["mesh"], mode)] = case_score(rows, workload, missing_profiles(config))
        for rate, scores in by_rate.items():
            runs.append((run_name(path), rate, scores))
    print_scorecard(runs)


if __name__ == "__main__":
    main()
