#!/usr/bin/env python3
"""scripts/cluster/overlap_forms.py: each form's predicted steps from hand-made predictions at
κ = 0 and κ = 1 against hand-computed figures, the rows it scores, and its usage errors exiting 2.
The repricing itself is check.py's (check.analyze, tested with check.py).
Exit 0 on success, 1 with the failed checks listed."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts", "cluster")
sys.path.insert(0, SCRIPTS)
import overlap_forms  # noqa: E402

failures = []


def near(name, got, want, tol=1e-12):
    if abs(got - want) > tol:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def line(plan, overlapped, calls, link, compute=0.0):
    return {"plan": plan, "overlapped": overlapped, "collective_calls": calls, "link_bytes_per_node": link,
            "compute": compute}


# Plans a and b, calibration plan c (steps in seconds). At κ = 0: a 10, b 12, c 11; at κ = 1:
# 12, 16, 14, so beside is 2, 4 and 3. c measured 0.6 over its schedule (its excess).
#   beside:   0.6 / 3 = 0.2 per second beside:  a 10 + 0.4 = 10.4,   b 12 + 0.8 = 12.8
#   constant: 0.6 each:                        a 10.6,              b 12.6
#   calls:    c has 8, 0.075 a call:           a 10 + 5·0.075 = 10.375, b 12 + 10·0.075 = 12.75
#   bytes:    c sends 200, 0.003 a byte:        a 10 + 100·0.003 = 10.3, b 12 + 300·0.003 = 12.9
#   compute:  the model's κ 0.1 (check.overlap_slowdown: c computed 0.3 over the model's in 3 s
#             beside); the rest 0.6 − 0.1·3 = 0.3 over its 8 calls, 0.0375 a call: a 10 + 0.2 + 0.1875 = 10.3875, b 12 + 0.4 + 0.375 = 12.775
at0 = {"a": line("a", 10.0, 5, 100.0), "b": line("b", 12.0, 10, 300.0), "c": line("c", 11.0, 8, 200.0, 9.0)}
at1 = {"a": line("a", 12.0, 5, 100.0), "b": line("b", 16.0, 10, 300.0), "c": line("c", 14.0, 8, 200.0, 9.0)}
steps = overlap_forms.form_steps(["a", "b"], at0, at1, "c", 0.6, 0.1)
want = {"beside": (10.4, 12.8), "constant": (10.6, 12.6), "calls": (10.375, 12.75), "bytes": (10.3, 12.9),
        "compute": (10.3875, 12.775)}
if sorted(steps) != sorted(want):
    failures.append(f"forms: got {sorted(steps)}, want {sorted(want)}")
for form, (a, b) in want.items():
    near(f"{form} a", steps[form]["a"], a, 1e-9)
    near(f"{form} b", steps[form]["b"], b, 1e-9)

# κ 0 (the calibration plan lost no compute): the whole excess per call.
steps = overlap_forms.form_steps(["a"], at0, at1, "c", 0.6, 0.0)
near("compute, κ 0", steps["compute"]["a"], 10.375, 1e-9)

# The rows scored: the measured step of each plan from its runs' median steps (check_stats), its
# shape from the prediction.
config = {"plans": ["a"], "runs": {"overlap": {"a": [{"records": [{"step_ms": 10.0}, {"step_ms": 12.0}]},
                                                     {"records": [{"step_ms": 13.0}]}]}}}
rows = overlap_forms.case_rows(config, {"a": dict(at0["a"], plan="p=1x1")}, {"a": 0.0105})
if rows[0]["repeats"] != [0.011, 0.013] or rows[0]["shape"] != "p=1x1" or rows[0]["predicted"] != 0.0105:
    failures.append(f"rows: got {rows}")

# Usage errors: no run; an option not in --option=value form; an unreadable run.
script = os.path.join(SCRIPTS, "overlap_forms.py")
for args, says in (([], "usage"), (["run.json", "--build", "x"], "--option=value"),
                   (["/nonexistent/run.json"], "not a saved cluster check")):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    if p.returncode != 2:
        failures.append(f"exit of {args}: got {p.returncode}, want 2")
    if says not in p.stderr:
        failures.append(f"{args}: stderr lacks {says!r}: {p.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("overlap_forms: all checks passed")
