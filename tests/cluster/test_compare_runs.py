#!/usr/bin/env python3
"""scripts/cluster/compare_runs.py on hand-made saved runs, against hand-computed figures: two
runs of three plans in one configuration (a second configuration only in the first run, skipped),
the leave-one-out floor over three runs (presets of one shape pooled), that floor with a fixed
error per plan (--plan-error), and bad input (one run, a
file that is not a saved check, runs without step records) exiting 2.
Exit 0 on success, 1 with the failed checks listed."""
import json
import lzma
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster", "compare_runs.py")
failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def run_of(steps_s):
    """A saved run (check_measure's format) whose median step is each of `steps_s`, one repeat each."""
    return [{"records": [{"step_ms": 1e3 * s}, {"step_ms": 1e3 * s}, {"step_ms": 1e3 * s + 50}]} for s in steps_s]


def config(mesh, rate, steps):  # steps: plan -> its repeats' median steps in seconds
    return {"mesh": mesh, "rate": rate, "runs": {"serial": {p: run_of(s) for p, s in steps.items()}}}


def compare(*paths):
    """(exit status, the per-pair rows, stderr); the summary after the blank line is dropped."""
    out = subprocess.run([sys.executable, SCRIPT, *paths], capture_output=True, text=True)
    lines = out.stdout.splitlines()
    return out.returncode, lines[1:lines.index("")] if "" in lines else lines[1:], out.stderr


def summary(*paths):
    """The per-configuration summary rows of compare_runs.py, split into cells."""
    lines = subprocess.run([sys.executable, SCRIPT, *paths], capture_output=True, text=True).stdout.splitlines()
    start = lines.index("") + 2
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return [[c.strip() for c in l.split("|")] for l in lines[start:end]]


def leave_one_out(*paths):
    """The leave-one-out rows of compare_runs.py (split into cells) and its last line."""
    lines = subprocess.run([sys.executable, SCRIPT, *paths], capture_output=True, text=True).stdout.splitlines()
    blanks = [i for i, l in enumerate(lines) if l == ""]
    if len(blanks) < 2:
        return [], ""
    return [[c.strip() for c in l.split("|")] for l in lines[blanks[1] + 2:-1]], lines[-1]


with tempfile.TemporaryDirectory() as tmp:
    a_path, b_path = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json.xz")
    # Run a: x 1.0, y 2.0, z 3.0 s (two repeats each, far apart: every pair separable); run b:
    # x 1.0, y 3.0, z 2.0. Ranks (0, 1, 2) against (0, 2, 1): sum of d^2 = 2, Spearman
    # 1 - 6 * 2 / (3 * 8) = 0.50. Changes |b / a - 1|: 0, 50, 33.3 %: median 33.3, max 50.0. Of a's
    # three separable pairs b orders x < y and x < z alike, y < z not: 2/3. a's pick x is b's
    # fastest: +0.0 %. a's bootstrap: every plan's repeats are distinct but never cross, so every
    # draw keeps the order: 1.00.
    with open(a_path, "w") as f:
        json.dump([config("4x2", "1gbit", {"x": [1.0, 1.0], "y": [2.0, 2.0], "z": [3.0, 3.0]}),
                   config("2x4", "1gbit", {"x": [1.0], "y": [2.0]})], f)
    with lzma.open(b_path, "wt") as f:
        json.dump([config("4x2", "1gbit", {"x": [1.0, 1.0], "y": [3.0, 3.0], "z": [2.0, 2.0]})], f)
    rc, rows, err = compare(a_path, b_path)
    expect("exit status", rc, 0)
    expect("rows (the 2x4 configuration is only in run a)", len(rows), 1)
    if rows:
        cells = [c.strip() for c in rows[0].split("|")]
        expect("configuration", cells[2], "4x2 1gbit serial")
        expect("plans", cells[3], "3")
        expect("Spearman", cells[4], "0.50")
        expect("step change", cells[5], "33.3 / 50.0 %")
        expect("separable pairs ordered alike", cells[6], "2/3")
        expect("pick", cells[7], "+0.0 %")
        expect("bootstrap", cells[8], "1.00")
    # Swapped (run b first): Spearman is symmetric, the same 0.50.
    rc, rows, err = compare(b_path, a_path)
    expect("swapped Spearman", [c.strip() for c in rows[0].split("|")][4] if rows else None, "0.50")
    # A pick that is not the other run's best: run c has x at 2.5 s, so b's pick x is 25 % over c's
    # fastest z (2.0).
    c_path = os.path.join(tmp, "c.json")
    with open(c_path, "w") as f:
        json.dump([config("4x2", "1gbit", {"x": [2.5, 2.5], "y": [3.0, 3.0], "z": [2.0, 2.0]})], f)
    rc, rows, err = compare(b_path, c_path)
    expect("pick over c's best", [c.strip() for c in rows[0].split("|")][7] if rows else None, "+25.0 %")
    # The summary over the three pairs a~b (0.50; change 33.3 %, 3 pairs, 2 alike), a~c and b~c.
    # a~c: a (1, 2, 3) against c (2.5, 3, 2): ranks (0, 1, 2) and (1, 2, 0), sum of d^2 = 6,
    # Spearman -0.50; changes 150, 50, 33.3 %: median 50.0; c orders a's x < y, not x < z, y < z:
    # 1 of 3. b~c: b (1, 3, 2) against c: ranks (0, 2, 1) and (1, 2, 0), d^2 = 2, 0.50; changes
    # 150, 0, 0 %: median 0.0; b separates all three pairs, c orders x < y and z < y alike: 2 of 3.
    # Least -0.50, most 0.50, median 0.50; median changes 0.0 - 50.0 %; 5 of 9.
    rows = summary(a_path, b_path, c_path)
    expect("summary rows (one configuration in all three)", len(rows), 1)
    if rows:
        expect("summary", rows[0], ["4x2 1gbit serial", "3", "-0.50 - 0.50 (0.50)", "0.0 - 50.0 %", "5/9"])
    # Leave-one-out over a, b, c (4x2 1gbit serial; the 2x4 configuration is in run a alone):
    # a (1, 2, 3) against the mean of b and c (1.75, 3, 2): ranks (0, 1, 2) and (0, 2, 1), 0.50;
    # b (1, 3, 2) against a and c (1.75, 2.5, 2.5): ranks (0, 2, 1) and (0, 1.5, 1.5), covariance
    # 1.5 over sqrt(2 * 1.5): 0.87; c (2.5, 3, 2) against a and b (1, 2.5, 2.5): ranks (1, 2, 0) and
    # (0, 1.5, 1.5), covariance 0: 0.00. All three below 0.9.
    rows, total = leave_one_out(a_path, b_path, c_path)
    expect("leave-one-out rows", rows, [["4x2 1gbit serial", "3", "0.50, 0.87, 0.00", "3 of 3"]])
    expect("leave-one-out total", total, "leave-one-out: 3 of 3 run cases below Spearman 0.9")
    expect("no leave-one-out with two runs", leave_one_out(a_path, b_path), ([], ""))
    # Presets of one shape are one plan (check_stats.distinct_plans): y and y2 share shape B and
    # their repeats pool to 2.5 s in every run, above x's 1 s: each run's order is the others',
    # 1.00. Kept apart, run e's y 3, y2 2 against d's and f's 2, 3 would read 0.50 there.
    def shaped(steps):  # plan -> (shape, repeats' median steps)
        return {"mesh": "4x2", "rate": "1gbit",
                "runs": {"overlap": {p: [dict(r, final={"plan": shape}) for r in run_of(s)]
                                     for p, (shape, s) in steps.items()}}}
    paths = []
    for name, y, y2 in (("d", 2.0, 3.0), ("e", 3.0, 2.0), ("f", 2.0, 3.0)):
        paths.append(os.path.join(tmp, name + ".json"))
        with open(paths[-1], "w") as f:
            json.dump([shaped({"x": ("A", [1.0]), "y": ("B", [y]), "y2": ("B", [y2])})], f)
    rows, total = leave_one_out(*paths)
    expect("pooled shapes", rows, [["4x2 1gbit overlap", "3", "1.00, 1.00, 1.00", "0 of 3"]])
    # --plan-error: the leave-one-out floor with a fixed error per plan. Runs g, h, i all measure
    # x 1 s, y 2 s, z 3 s: with no error every run's order is the others' (0 of 3 below 0.9), and
    # with an error of 1 µs against gaps of a second too. With an error far above the gaps the
    # prediction's order is the order of the three errors, drawn once per plan and so the same
    # for the three runs of a draw: every run meets 0.9 when it is x < y < z (one order in six),
    # none otherwise. So each draw counts 0 or 3, 3 in five draws of six on average (mean near
    # 2.5), and the 5th percentile is 0: errors drawn per run instead would rarely leave all
    # three runs right at once ((1/6)^3), putting it at 1 or more.
    paths = []
    for name in ("g", "h", "i"):
        paths.append(os.path.join(tmp, name + ".json"))
        with open(paths[-1], "w") as f:
            json.dump([config("4x2", "1gbit", {"x": [1.0], "y": [2.0], "z": [3.0]})], f)

    def plan_error(*args):
        out = subprocess.run([sys.executable, SCRIPT, *paths, *args], capture_output=True, text=True)
        return out.returncode, [l for l in out.stdout.splitlines() if "fixed error" in l], out.stderr

    rc, lines, err = plan_error("--plan-error", "0,0.001,1e9")
    expect("--plan-error exit status", rc, 0)
    expect("--plan-error lines", len(lines), 3)
    if len(lines) == 3:
        expect("no error", lines[0], "leave-one-out with a fixed error per plan of sigma 0.00 ms: 0.0 of 3 run cases "
               "below Spearman 0.9 on average (0 - 0, 5th - 95th percentile of 200 draws)")
        expect("an error far below the gaps", lines[1].split(": ")[1].split(" of")[0], "0.0")
        words = lines[2].split()
        mean = float(lines[2].split(": ")[1].split(" of")[0])
        expect("an error far above the gaps: mean near 2.5", 2.2 <= mean <= 2.8, True)
        expect("an error far above the gaps: 5th - 95th percentile", lines[2].split("(")[1].split(",")[0], "0 - 3")
    rc, lines, err = plan_error("--plan-error", "1e9", "--draws", "1000")
    mean = float(lines[0].split(": ")[1].split(" of")[0]) if lines else -1
    expect("1000 draws: mean within 0.15 of 2.5", abs(mean - 2.5) <= 0.15, True)
    for bad_args in (("--plan-error", "-1"), ("--plan-error", "0.1,x"), ("--plan-error", "nan"), ("--draws", "0")):
        rc, lines, err = plan_error(*bad_args)
        expect(f"{' '.join(bad_args)}: exit 2", rc, 2)
        expect(f"{' '.join(bad_args)}: names the value", bad_args[1] in err, True)
    out = subprocess.run([sys.executable, SCRIPT, *paths[:2], "--plan-error", "0.1"], capture_output=True, text=True)
    expect("--plan-error with two runs: exit 2", out.returncode, 2)
    expect("--plan-error with two runs: says why", "three saved runs" in out.stderr, True)
    # Bad input: one run; a file that is not a saved check.
    rc, rows, err = compare(a_path)
    expect("one run: exit 2", rc, 2)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"mesh": "4x2"}')
    rc, rows, err = compare(a_path, bad)
    expect("not a saved check: exit 2", rc, 2)
    expect("names the file", bad in err, True)
    with open(bad, "w") as f:
        f.write("[1, 2]")  # a list, but not of configurations
    rc, rows, err = compare(a_path, bad)
    expect("a list of numbers: exit 2", rc, 2)
    # A configuration whose runs lack their step records: exit 2 naming the configuration.
    broken = os.path.join(tmp, "broken.json")
    with open(broken, "w") as f:
        json.dump([{"mesh": "4x2", "rate": "1gbit", "runs": {"serial": {"x": [{}], "y": [{}], "z": [{}]}}}], f)
    rc, rows, err = compare(a_path, broken)
    expect("no step records: exit 2", rc, 2)
    expect("names the configuration", "4x2 1gbit serial" in err, True)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("compare_runs: ok")
