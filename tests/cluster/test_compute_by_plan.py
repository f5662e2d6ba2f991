#!/usr/bin/env python3
"""scripts/cluster/compute_by_plan.py on hand-made saved runs, against hand-computed differences:
two runs, a configuration in both and one only in the second, a plan only in the first; and bad
input (a file that is not a saved check, a configuration without the reference plan, records
without compute) exiting 2. Exit 0 on success, 1 with the failed checks listed."""
import json
import lzma
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster", "compute_by_plan.py")
failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def plan_runs(*repeats):  # each repeat: its steps' compute_ms
    return [{"records": [{"step_ms": 99.0, "compute_ms": c} for c in r]} for r in repeats]


def config(mesh, plans):
    return {"mesh": mesh, "rate": "1gbit", "runs": {"overlap": plans}}


def run(*args):
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return out.returncode, out.stdout.splitlines(), out.stderr


with tempfile.TemporaryDirectory() as tmp:
    a_path, b_path = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json.xz")
    # Run 1, 4x2: ddp's records 30, 31, 40 | 31, 32: median 31 ms. zero1's 29, 29, 50 | 28: median
    # of 28, 29, 29, 50 = 29, so -2.0. hsdp's 33, 34, 35: 34, so +3.0.
    with open(a_path, "w") as f:
        json.dump([config("4x2", {"ddp": plan_runs([30, 31, 40], [31, 32]),
                                  "zero1": plan_runs([29, 29, 50], [28]),
                                  "hsdp": plan_runs([33, 34, 35])})], f)
    # Run 2, 4x2: ddp 30, zero1 30.5: +0.5; no hsdp. 2x4 (only in run 2): ddp 10, zero1 12: +2.0.
    with lzma.open(b_path, "wt") as f:
        json.dump([config("4x2", {"ddp": plan_runs([30, 30, 30]), "zero1": plan_runs([30.5])}),
                   config("2x4", {"ddp": plan_runs([10]), "zero1": plan_runs([12])})], f)
    rc, lines, err = run(a_path, b_path)
    expect("exit status", (rc, err), (0, ""))
    expect("rows", lines[1:-1], [
        "4x2 1gbit overlap | ddp | +0.0 | +0.0 | +0.0..+0.0",
        "4x2 1gbit overlap | zero1 | -2.0 | +0.5 | -2.0..+0.5",
        "4x2 1gbit overlap | hsdp | +3.0 | - | +3.0..+3.0",
        "2x4 1gbit overlap | ddp | - | +0.0 | +0.0..+0.0",
        "2x4 1gbit overlap | zero1 | - | +2.0 | +2.0..+2.0"])
    # Against zero1: hsdp 34 - 29 = +5.0 in run 1; run 2 has no hsdp, and ddp 30 - 30.5 = -0.5.
    rc, lines, err = run("--reference", "zero1", a_path, b_path)
    expect("--reference zero1: hsdp", [l for l in lines if "| hsdp |" in l], ["4x2 1gbit overlap | hsdp | +5.0 | - | +5.0..+5.0"])
    expect("--reference zero1: ddp", [l for l in lines if "4x2 1gbit overlap | ddp |" in l],
           ["4x2 1gbit overlap | ddp | +2.0 | -0.5 | -0.5..+2.0"])

    rc, _, err = run("--reference", "hsdp", a_path, b_path)
    expect("a configuration without the reference plan exits 2", rc, 2)
    expect("... naming the plan", "'hsdp'" in err, True)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump({"not": "a run"}, f)
    rc, _, err = run(bad)
    expect("not a saved check exits 2", (rc, bad in err), (2, True))
    no_compute = os.path.join(tmp, "no_compute.json")
    with open(no_compute, "w") as f:
        json.dump([config("4x2", {"ddp": [{"records": [{"step_ms": 1.0}]}]})], f)
    rc, _, err = run(no_compute)
    expect("records without compute exit 2", (rc, "without compute records" in err), (2, True))

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("compute_by_plan.py: the hand-computed differences, the reference option and three bad inputs")
