#!/usr/bin/env python3
"""scripts/cluster/plan_errors.py: its two steps on hand-made table rows against hand-computed
figures (the differences against the reference plan, the means and standard deviations over runs
and over plans), and its usage errors exiting 2. The repricing itself is check.py's
(check.analyze, tested with check.py).
Exit 0 on success, 1 with the failed checks listed."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts", "cluster")
sys.path.insert(0, SCRIPTS)
import plan_errors  # noqa: E402

failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def near(name, got, want, tol=1e-9):
    if abs(got - want) > tol:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def row(plan, measured, predicted):
    return {"plan": plan, "measured": measured, "predicted": predicted}


# One run: ddp measured 35.0 ms, predicted 34.0; x measured 36.0, predicted 35.5. Against ddp:
# x measured +1.0 ms, predicted +1.5 ms (its error −0.5 ms).
diff = plan_errors.differences([row("ddp", 0.035, 0.034), row("x", 0.036, 0.0355)], "ddp")
near("ddp measured", diff["ddp"][0], 0.0)
near("x measured", diff["x"][0], 1.0)
near("x predicted", diff["x"][1], 1.5)
expect("no reference", plan_errors.differences([row("x", 0.036, 0.0355)], "ddp"), None)

# Two runs, plans ddp, x, y ((measured, predicted) ms against ddp):
#   run 1: x (1.0, 1.5), y (2.0, 1.0);  run 2: x (1.2, 1.5), y (2.4, 1.2)
# x: errors −0.5, −0.3: mean −0.4, sd 0.1; predicted 1.5, 1.5: sd 0; measured 1.0, 1.2: sd 0.1.
# y: errors 1.0, 1.2: mean 1.1, sd 0.1; predicted sd 0.1; measured sd 0.2.
# Over the plans, the means 0, −0.4, 1.1 (mean 0.2333): deviations −0.2333, −0.6333, 0.8667;
# squares 0.05444, 0.40111, 0.75111: population sd sqrt(1.20667 / 3) = 0.63421.
# A plan missing from one run (z) is left out.
runs = [{"ddp": (0.0, 0.0), "x": (1.0, 1.5), "y": (2.0, 1.0), "z": (5.0, 5.0)},
        {"ddp": (0.0, 0.0), "x": (1.2, 1.5), "y": (2.4, 1.2)}]
plans, spread = plan_errors.summarize(runs)
expect("plans every run has", list(plans), ["ddp", "x", "y"])
for name, got, want in (("x", plans["x"], (-0.4, 0.1, 0.0, 0.1)), ("y", plans["y"], (1.1, 0.1, 0.1, 0.2)),
                        ("ddp", plans["ddp"], (0.0, 0.0, 0.0, 0.0))):
    for label, g, w in zip(("mean error", "its sd", "predicted's sd", "measured's sd"), got, want):
        near(f"{name} {label}", g, w)
near("sd over plans", spread, (1.20666666667 / 3) ** 0.5, 1e-6)

# Usage errors: no run; an option not in --option=value form; --reference without a plan.
script = os.path.join(SCRIPTS, "plan_errors.py")
for args, says in (([], "usage"), (["run.json", "--build", "x"], "--option=value"), (["run.json", "--reference"],
                                                                                      "--reference")):
    out = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    expect(f"{args}: exit 2", out.returncode, 2)
    expect(f"{args}: says {says}", says in out.stderr, True)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("plan_errors: ok")
