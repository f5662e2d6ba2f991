#!/usr/bin/env python3
"""scripts/cluster/scorecard.py: its scoring of hand-made table rows against hand-computed figures
(the targets, the separable pairs, the paper's claim, the link bytes), its totals and its table
(a missed target in bold, a Spearman near 0.9 to three places), and its usage errors exiting 2.
The repricing itself is check.py's (check.analyze, tested with check.py).
Exit 0 on success, 1 with the failed checks listed."""
import contextlib
import io
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts", "cluster")
sys.path.insert(0, SCRIPTS)
import scorecard  # noqa: E402

failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def near(name, got, want, tol=1e-9):
    if abs(got - want) > tol:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def row(plan, measured, predicted, repeats, link=(1000.0, 1000.0)):
    return {"plan": plan, "shape": plan, "measured": measured, "predicted": predicted, "repeats": repeats,
            "link_measured": link[0], "link_model": link[1]}


# Four plans, measured 10, 11, 12, 20 ms; predicted 10, 12, 11, 22 (errors 0, 1/11, 1/12, 0.1).
# Median |error| of (0, 0.0833, 0.0909, 0.1) = (0.0833 + 0.0909) / 2 = 0.08712. Ranks measured
# 1 2 3 4, predicted 1 3 2 4: d² = 0 + 1 + 1 + 0 = 2, Spearman 1 − 6·2 / (4·15) = 0.8 (missed).
# The pick ddp is the measured best (+0 %). Repeats ddp [9.9, 10.1], zero3 [10.9, 11.1], mics(2)
# [11.5, 12.5], amsp-7b [19.9, 20.1]: no two overlap, so all 6 pairs are separable; zero3 against
# mics(2) is predicted the wrong way (12 > 11), the other five right. Paper's claim: amsp-7b (20 ms
# measured, 22 predicted) is the only preset, behind zero3 and mics(2): ratios 11/20, 12/20
# measured and 12/22, 11/22 predicted.
# Link bytes: 1010 over 1000 and 990 over 1000 on two plans, a plan without a model left out.
rows = [row("ddp", 0.010, 0.010, [0.0099, 0.0101], (1010.0, 1000.0)),
        row("zero3", 0.011, 0.012, [0.0109, 0.0111], (990.0, 1000.0)),
        row("mics(2)", 0.012, 0.011, [0.0115, 0.0125], (5.0, 0.0)),
        row("amsp-7b", 0.020, 0.022, [0.0199, 0.0201], (float("nan"), 1000.0))]
score = scorecard.case_score(rows)
near("median error", score["summary"]["median_abs_error"], (1 / 12 + 1 / 11) / 2)
near("Spearman", score["summary"]["spearman"], 0.8)
expect("met", score["met"], {"error": True, "Spearman": False, "pick": True})
expect("separable pairs", score["separable"], (6, 5))
expect("claim peers", [c[0] for c in score["claim"]], ["zero3", "mics(2)"])
near("claim zero3 measured", score["claim"][0][1], 0.011 / 0.020)
near("claim mics predicted", score["claim"][1][2], 0.011 / 0.022)
expect("link ratios", score["link"], [1.01, 0.99])
expect("cell", scorecard.cell(score), "8.7 % / **0.80** / +0.0 %")

# A second case: two plans, both targets-ordered right, the AMSP preset ahead of zero3 (30 vs 15
# ms measured: 2x; 28 vs 14 predicted: 2x); Spearman exactly 1; its Spearman printed to three
# places only near 0.9.
rows2 = [row("zero3", 0.030, 0.028, [0.029, 0.031]), row("amsp-7b", 0.015, 0.014, [0.0149, 0.0151])]
score2 = scorecard.case_score(rows2)
expect("case 2 met", score2["met"], {"error": True, "Spearman": True, "pick": True})
expect("case 2 cell", scorecard.cell(score2), "6.7 % / 1.00 / +0.0 %")
near_miss = dict(score2, summary=dict(score2["summary"], spearman=0.898),
                 met=dict(score2["met"], Spearman=False))
expect("0.898 to three places, bold", scorecard.cell(near_miss), "6.7 % / **0.898** / +0.0 %")

t = scorecard.tally([score, score2])
expect("tally counts", (t["cases"], t["error"], t["Spearman"], t["pick"], t["all"]), (2, 2, 1, 2, 1))
expect("tally pairs", (t["pairs"], t["right"]), (7, 6))
expect("tally claim zero3 counts", t["claim"]["zero3"][:3], [2, 1, 1])
near("tally claim zero3 most measured", t["claim"]["zero3"][4], 2.0)
near("tally claim zero3 least measured", t["claim"]["zero3"][3], 0.55)
expect("tally claim mics counts", t["claim"]["mics"][:3], [1, 0, 0])
expect("tally link", t["link"], (0.99, 1.01))

expect("run name", scorecard.run_name("bench/data/cluster-check-2026-12-07-bg.json.xz"), "2026-12-07-bg")
expect("run name plain", scorecard.run_name("/tmp/x.json"), "x")

# The table: one row per run, the cases in the order first named, a run lacking a case "–", the
# totals per rate and over all.
out = io.StringIO()
with contextlib.redirect_stdout(out):
    totals = scorecard.print_scorecard([("r1", "1gbit", {("4x2", "overlap"): score, ("2x4", "serial"): score2}),
                                        ("r2", "100mbit", {("2x4", "serial"): score2})])
text = out.getvalue()
for line in ("| run | rate | 4x2 overlap | 2x4 serial |",
             "| r1 | 1gbit | 8.7 % / **0.80** / +0.0 % | 6.7 % / 1.00 / +0.0 % |",
             "| r2 | 100mbit | – | 6.7 % / 1.00 / +0.0 % |",
             "| 1gbit | 2 | 2 | 1 | 2 | 1 | 6 of 7 | – |",
             "| 100mbit | 1 | 1 | 1 | 1 | 1 | 1 of 1 | – |",
             "| all | 3 | 3 | 2 | 3 | 2 | 7 of 8 | – |",
             "ahead in 2 of 3 cases measured"):
    if line not in text:
        failures.append(f"table lacks {line!r}:\n{text}")
expect("totals all", (totals["all"]["cases"], totals["all"]["Spearman"]), (3, 2))

# The floor: four runs of one case and workload, plans a..d measured (ms) 1 2 3 4 in r1, r2 and r4,
# 2.1 1 3 4 in r3 (a and b swapped). r1's leave-one-out prediction, the mean of r2, r3, r4: a
# (1 + 2.1 + 1) / 3 = 1.37, b (2 + 1 + 2) / 3 = 1.67, c 3, d 4, the order r1 measured: 1.0 (so
# r2's and r4's). r3's, the mean of the three others, a 1 b 2 c 3 d 4 against r3's ranks 2 1 3 4:
# d² = 2, 1 − 6·2 / (4·15) = 0.8, a miss the cell reports beside the model's own score (the
# predictions equal the measured steps here: Spearman 1, every pair of single repeats separable
# and ordered right). A fifth run of another workload and
# two runs at another rate have fewer than three runs in their group: no floor.
def floor_score(steps, workload="w"):
    return scorecard.case_score([row(p, s / 1e3, s / 1e3, [s / 1e3]) for p, s in zip("abcd", steps)], workload)


same, swapped = (1, 2, 3, 4), (2.1, 1, 3, 4)
floor_runs = [(name, "1gbit", {("4x2", "overlap"): floor_score(steps)})
              for name, steps in (("r1", same), ("r2", same), ("r3", swapped), ("r4", same))]
floor_runs += [("r5", "1gbit", {("4x2", "overlap"): floor_score(swapped, "other")}),
               ("r6", "200mbit", {("4x2", "overlap"): floor_score(same)}),
               ("r7", "200mbit", {("4x2", "overlap"): floor_score(swapped)})]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    floor_totals = scorecard.print_scorecard(floor_runs)
floors = [by_case[("4x2", "overlap")].get("floor") for _, _, by_case in floor_runs]
for name, got, want in zip(("r1", "r2", "r3", "r4"), floors, (1.0, 1.0, 0.8, 1.0)):
    near(f"floor of {name}", got, want)
expect("no floor for a lone workload or two runs", floors[4:], [None, None, None])
text = out.getvalue()
for line in ("| r3 | 1gbit | 0.0 % / 1.00 / +0.0 % (floor 0.80) |", "| r1 | 1gbit | 0.0 % / 1.00 / +0.0 % |",
             "| 1gbit | 5 | 5 | 5 | 5 | 5 | 30 of 30 | 3 of 4 |", "| 200mbit | 2 | 2 | 2 | 2 | 2 | 12 of 12 | – |",
             "| all | 7 | 7 | 7 | 7 | 7 | 42 of 42 | 3 of 4 |"):
    if line not in text:
        failures.append(f"floor table lacks {line!r}:\n{text}")
expect("floor totals", floor_totals["all"]["floor"], (4, 3))

# Runs measured without a profile the model reads: named with what they lack, and the totals again
# over the other runs (case 2 twice, case 1 once: error 3 of 3, Spearman 2 of 3, pairs 7 of 8 over
# all; over r2 and r3 alone, both case 2: 2 of 2 met, 2 of 2 pairs).
lack = dict(score, missing=("paced AllReduce profile", "end spread"))
out = io.StringIO()
with contextlib.redirect_stdout(out):
    lack_totals = scorecard.print_scorecard([("r1", "1gbit", {("4x2", "overlap"): lack}),
                                             ("r2", "1gbit", {("4x2", "overlap"): dict(score2)}),
                                             ("r3", "100mbit", {("4x2", "overlap"): dict(score2)})])
text = out.getvalue()
for line in ("Measured without the paced AllReduce profile or the end spread, so priced without the terms they feed: r1.",
             "| all, every profile measured | 2 | 2 | 2 | 2 | 2 | 2 of 2 | – |",
             "| all | 3 | 3 | 2 | 3 | 2 | 7 of 8 | – |"):
    if line not in text:
        failures.append(f"lacking table lacks {line!r}:\n{text}")
expect("every-profile totals", lack_totals["all, every profile measured"]["cases"], 2)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    scorecard.print_scorecard([("r2", "1gbit", {("4x2", "overlap"): dict(score2)})])
if "every profile measured" in out.getvalue() or "Measured without" in out.getvalue():
    failures.append(f"a table of complete runs only has no second total:\n{out.getvalue()}")

# Usage errors: no run; an option not in --option=value form; an unreadable run.
script = os.path.join(SCRIPTS, "scorecard.py")
for args, says in (([], "usage"), (["run.json", "--build", "x"], "--option=value"),
                   (["/nonexistent/run.json"], "not a saved cluster check")):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    expect(f"exit of {args}", p.returncode, 2)
    if says not in p.stderr:
        failures.append(f"{args}: stderr lacks {says!r}: {p.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("scorecard: all checks passed")
