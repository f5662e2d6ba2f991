#!/usr/bin/env python3
"""check.py's calibration of the step with overlap from CALL_PLAN (overlap_slowdown, overlap_call)
against a stand-in planner whose figures are worked out by hand: κ from the plan's compute, the
rest of its step per collective call; the form before (κ alone from the step); given values;
runs without the plan's records. Exit 0 on success, 1 with the failed checks listed."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "cluster"))
import check  # noqa: E402
import check_predict  # noqa: E402

failures = []


def expect(name, got, want, tol=None):
    ok = abs(got - want) <= tol if tol is not None else got == want
    if not ok:
        failures.append(f"{name}: got {got!r}, want {want!r}")


class Args:
    predict, global_batch, overhead_unit, model_args = "predict", 32, "step", []
    call_overhead = sync_overhead = None
    gather_scatter, profile_kind, waits, stagger, arrival_spread, chain_wait = \
        "ring", "back-to-back", "overlap", "on", "on", "on"
    overlap_slowdown, overlap_form, overlap_call, gather_stall = None, "call", None, None


# The stand-in planner: CALL_PLAN ("cal", 14 collective calls a step) computes 30 ms and its step
# with overlap is 40 ms + 20 ms × κ + 14 × the seconds per call.
def planner(cmd, timeout):
    value = {flag: float(cmd[cmd.index(flag) + 1]) for flag in ("--overlap-slowdown", "--overlap-call")}
    return json.dumps({"compute": 0.030, "overlapped": 0.040 + 0.020 * value["--overlap-slowdown"] +
                       14 * value["--overlap-call"]})


check.sh = planner


def config(step_s, compute_ms, records=True):
    cal = {"call_plan": "cal", "call_plan_overlap_runs": [step_s]}
    if records:
        cal["plan_records"] = {"cal overlap": [{"records": [{"compute_ms": c} for c in compute_ms]}]}
    return {"mesh": "2x4", "rate": "1gbit", "profile": "p.json", "calibration": cal,
            "links": {"intra_gbytes": 1, "intra_latency": 0, "inter_latency": 0}}


def calibrate(args, cfg):
    kappa, kappa_from = check.overlap_slowdown(args, cfg, [], 0, 0)
    per_call, per_call_from = check.overlap_call(args, cfg, [], 0, 0, kappa)
    return kappa, kappa_from, per_call, per_call_from


# Measured: compute 30.3, 30.4, 30.5 ms (median 30.4: 0.4 ms lost beside 20 ms of streams busy
# inside compute, κ = 0.02) and a step of 42.1 ms: 42.1 − 40 − 0.4 = 1.7 ms over 14 calls.
kappa, kappa_from, per_call, per_call_from = calibrate(Args(), config(0.0421, [30.3, 30.4, 30.5]))
expect("κ from the compute", kappa, 0.02, 1e-12)
expect("κ's source", kappa_from, "cal's compute with overlap")
expect("per call", per_call, 0.0017 / 14, 1e-9)
expect("per call's source", per_call_from, "cal with overlap")
# Its compute under the model's: κ 0, the whole excess per call (2.1 ms / 14); over 20 ms beyond
# it: κ 1.
kappa, _, per_call, _ = calibrate(Args(), config(0.0421, [29.0]))
expect("κ, less compute than the model's", kappa, 0.0)
expect("per call, κ 0", per_call, 0.0021 / 14, 1e-9)
expect("κ at most 1", calibrate(Args(), config(0.07, [55.0]))[0], 1.0)
# A step under the schedule: no seconds per call.
_, _, per_call, per_call_from = calibrate(Args(), config(0.039, [30.0]))
expect("per call, step under the schedule", per_call, 0.0)
expect("its source", per_call_from, "cal with overlap (its step without it already reaches the measured one)")

# The form before: κ alone from the step, 0.0421 = 0.040 + 0.020 κ -> κ = 0.105; nothing per call.
before = Args()
before.overlap_form = "beside"
kappa, _, per_call, per_call_from = calibrate(before, config(0.0421, [30.4]))
expect("κ from the step", kappa, 0.105, 1e-6)
expect("per call, form before", (per_call, per_call_from), (0.0, "--overlap-form beside"))
# Runs without the plan's records (before run ao): κ from the step, nothing per call.
kappa, _, per_call, per_call_from = calibrate(Args(), config(0.0421, [], records=False))
expect("κ without records", kappa, 0.105, 1e-6)
expect("per call without records", (per_call, per_call_from), (0.0, "not measured: 0"))
# Given: as given; the planner's command carries the seconds per call.
given = Args()
given.overlap_call = 2e-4
expect("per call given", check.overlap_call(given, config(0.0421, [30.4]), [], 0, 0, 0.02), (2e-4, "--overlap-call"))
command = check_predict.predict_command(Args(), config(0.0421, [30.4]), ["ddp"], [], overlap_call_s=1.5e-4)
expect("per call in the command", command[command.index("--overlap-call") + 1], "0.00015")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("check.py's overlap calibration: all checks passed")
