#!/usr/bin/env python3
"""scripts/cluster/check.py's statistics (check_stats.py), its readings of amsp-train's output
(check_measure.py), the planner's profile options (check_predict.py) and its calibration of the
overheads and κ (check.py), against hand-computed values (no cluster, no planner: the planner is replaced by a linear stand-in whose
slopes are known). Exit 0 on success, 1 with the failed checks listed."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster"))
import check  # noqa: E402
import check_measure  # noqa: E402
import check_predict  # noqa: E402
import check_stats  # noqa: E402

failures = []


def expect(name, got, want, tol=1e-9):
    if (abs(got - want) > tol) if isinstance(want, float) else got != want:
        failures.append(f"{name}: got {got}, want {want}")


# Spearman with a tie: ranks x (0.5, 0.5, 2), y (0, 1, 2): cov 1.5, var 1.5 and 2 -> 1.5 / sqrt(3).
expect("spearman tie", check_stats.spearman([1, 1, 2], [1, 2, 3]), 1.5 / 3 ** 0.5)
expect("spearman reversed", check_stats.spearman([1, 2, 3], [3, 2, 1]), -1.0)

# Separable pairs: a (1.0..1.1) and b (1.2..1.3) do not overlap; c (1.05..1.25) overlaps both.
rows = [{"plan": "a", "repeats": [1.0, 1.1], "predicted": 1.0},
        {"plan": "b", "repeats": [1.3, 1.2], "predicted": 2.0},
        {"plan": "c", "repeats": [1.05, 1.25], "predicted": 0.5}]
expect("separable pairs", check_stats.separable_pairs(rows)[0], 1)
expect("ordered right", check_stats.separable_pairs(rows)[1], 1)
rows[1]["predicted"] = 0.9  # now b is predicted faster than a: the one separable pair is wrong
expect("ordered wrong", check_stats.separable_pairs(rows)[1], 0)

# Bootstrap floor, by hand: a runs (1.0, 1.4), measured 1.2 (mean); b (1.3, 1.3), 1.3. Drawn
# again, a's mean is 1.0, 1.2 or 1.4 with probability 1/4, 1/2, 1/4; b stays 1.3. Spearman of
# two plans is +1 unless a comes out slower (a = 1.4, 1/4): mean 0.5, >= 0.9 in 3/4. The pick (a)
# is within 5 % of the best unless a = 1.4 (7.7 % over b): 3/4. Median |error| of the two plans:
# (0.2 + 0) / 2 = 0.1, 0, (1.2 / 1.4 - 1 = 0.1429 + 0) / 2: mean 0.1 / 4 + 0.0714 / 4 = 0.0429.
floor = check_stats.bootstrap_floor([{"repeats": [1.0, 1.4], "measured": 1.2}, {"repeats": [1.3, 1.3], "measured": 1.3}],
                              draws=20000)
expect("floor error", floor[0], 0.1 / 4 + (1 - 1.2 / 1.4) / 2 / 4, 0.003)
expect("floor spearman", floor[1], 0.5, 0.03)
expect("floor spearman share", floor[2], 0.75, 0.015)
expect("floor pick share", floor[3], 0.75, 0.015)
# Plans measured without noise: every draw is the measurement itself.
expect("floor without noise", check_stats.bootstrap_floor([{"repeats": [1.0] * 3, "measured": 1.0},
                                                     {"repeats": [2.0] * 3, "measured": 2.0}], draws=50),
       (0.0, 1.0, 1.0, 1.0))
# The estimator: the mean of the runs (a bimodal step: the median jumps between the modes).
expect("typical step is the mean", check_stats.typical_step([0.07, 0.07, 0.10]), 0.08, 1e-12)

# A linear stand-in for amsp-cluster-predict: serial = base + ring steps x step overhead + calls
# between compute segments x sync overhead, per plan.
PLANS = {"cal": (0.10, 20, 4), "sync": (0.12, 30, 16), "x": (0.2, 50, 0), "y": (0.15, 10, 12)}
STEP, SYNC = 4e-4, 3e-3  # the overheads the calibration must recover
NONLINEAR = 3.0  # with --contention: serial += 3·(overhead part)², about 10 % of it


def true_step(plan):
    base, steps, calls = PLANS[plan]
    return base + steps * STEP + calls * SYNC


def fake_sh(cmd, timeout):
    value = dict(zip(cmd[1::2], cmd[2::2]))
    lines = []
    for plan in value["--plans"].split(";"):
        base, steps, calls = PLANS[plan]
        t = base + steps * float(value["--step-overhead"]) + calls * float(value["--sync-overhead"])
        if "--contention" in value:  # contention makes the step nonlinear in the overheads
            t += NONLINEAR * (t - base) ** 2
        lines.append(json.dumps({"name": plan, "serial": t}))
    return "\n".join(lines)


check.sh = fake_sh  # check.py's own binding of check_measure.sh: the one overheads() calls


class Args:
    predict, global_batch, overlap_slowdown, overhead_unit, model_args = "predict", 32, 1.0, "step", []
    call_overhead = sync_overhead = None
    gather_scatter, profile_kind, waits, stagger, arrival_spread, chain_wait = \
        "ring", "back-to-back", "overlap", "on", "on", "on"
    overlap_form, overlap_call = "call", None


config = {"mesh": "2x4", "rate": "1gbit", "profile": "p.json",
          "links": {"intra_gbytes": 1, "intra_latency": 0, "inter_latency": 0},
          "calibration": {"call_plan": "cal", "call_plan_step": true_step("cal"),
                          "sync_plan": "sync", "sync_plan_step": true_step("sync")}}
step_s, sync_s = check.overheads(Args(), config, [])
expect("calibrated step overhead", step_s, STEP, 1e-12)
expect("calibrated sync overhead", sync_s, SYNC, 1e-12)
# A sync plan measured faster than the model with no sync wait: that term is 0, the per-step
# overhead is fitted alone by least squares over both plans: slopes 20 and 30 ring steps, misses
# e1 = 20·STEP + 4·SYNC and e2 = 0 − 0.12 -> (20·e1 + 30·e2) / (20² + 30²), clamped at 0.
config["calibration"]["sync_plan_step"] = 0.0
e1, e2 = 20 * STEP + 4 * SYNC, -0.12
want = max(0.0, (20 * e1 + 30 * e2) / (20 ** 2 + 30 ** 2))
step_s, sync_s = check.overheads(Args(), config, [])
expect("clamped sync overhead", sync_s, 0.0)
expect("step overhead alone", step_s, want, 1e-12)
# A call plan measured 10 ms below its base: the per-step overhead is 0, the sync wait fitted alone
# over both plans (4 and 16 calls between compute): (4·(−0.01) + 16·e2) / (4² + 16²).
config["calibration"]["call_plan_step"], config["calibration"]["sync_plan_step"] = 0.09, true_step("sync")
e2 = 30 * STEP + 16 * SYNC
step_s, sync_s = check.overheads(Args(), config, [])
expect("clamped step overhead", step_s, 0.0)
expect("sync overhead alone", sync_s, (4 * -0.01 + 16 * e2) / (4 ** 2 + 16 ** 2), 1e-12)
config["calibration"]["call_plan_step"] = true_step("cal")
# Saved runs without the sync plan: the sync term is 0 and the step overhead fits the call plan.
del config["calibration"]["sync_plan"], config["calibration"]["sync_plan_step"]
step_s, sync_s = check.overheads(Args(), config, [])
expect("no sync plan: sync", sync_s, 0.0)
expect("no sync plan: step", step_s, (20 * STEP + 4 * SYNC) / 20, 1e-12)

# With CPU contention the step is nonlinear in the overheads: the Newton rounds still recover them
# (one linear round alone misses by about 10 %).
CONTENTION = ["--contention", "8:0.01,1:0.002"]
cal = {"call_plan": "cal", "sync_plan": "sync"}
for plan in ("cal", "sync"):
    u = PLANS[plan][1] * STEP + PLANS[plan][2] * SYNC
    cal[plan + "_plan_step" if plan == "sync" else "call_plan_step"] = PLANS[plan][0] + u + NONLINEAR * u * u
config["calibration"] = cal
step_s, sync_s = check.overheads(Args(), config, CONTENTION)
expect("contention: step overhead", step_s, STEP, 1e-9)
expect("contention: sync overhead", sync_s, SYNC, 1e-9)


# The contention points reach the planner only when measured and on.
class On(Args):
    contention, compute = "on", "origin"


class Off(On):
    contention = "off"


config["calibration"]["contention"] = [[8, 0.01], [4, 0.005]]
expect("contention args", check.contention_args(On(), config), ["--contention", "8:0.01,4:0.005"])
expect("contention off", check.contention_args(Off(), config), [])
config["calibration"]["contention"] = [[4.5, 0.01], [4.5, 0.005]]  # one k only: no curve, off
expect("contention one k", check.contention_args(On(), config), [])
del config["calibration"]["contention"]
expect("contention not measured", check.contention_args(On(), config), [])
# Computing ranks from every rank's waits: shares 0.25 and 0.75 (first and last step dropped),
# mean 0.5, on 8 ranks: 1 + 7·0.5.
runs = [{"final": {"ranks": [{"step_ms": [9, 100, 100, 9], "comm_ms": [9, 25, 75, 9]}]}}]
expect("measured computing ranks", check_stats.measured_computing(runs, 8), 4.5, 1e-12)
expect("no ranks: nan", str(check_stats.measured_computing([{"final": {}}], 8)), "nan")

# The compute measurement: every rank's step less its waits, steps 2 .. n − 1, median (of 25, 15,
# 40, 30 ms: 27.5 ms); rank 0's records without the every-rank split.
final = {"ranks": [{"step_ms": [1, 50, 40, 1], "comm_ms": [0, 25, 25, 0]},
                   {"step_ms": [1, 60, 70, 1], "comm_ms": [0, 20, 40, 0]}]}
expect("median compute, every rank", check_stats.median_compute([], final), 0.0275, 1e-12)
expect("median compute, rank 0", check_stats.median_compute([{"compute_ms": 10}, {"compute_ms": 30}], {}), 0.02, 1e-12)

# The update's measurement: every rank's update_ms, steps 2 .. n − 1, median (of 0.3, 0.5, 0.2,
# 1.0 ms: 0.4 ms; their mean is 0.5).
final["ranks"][0]["update_ms"], final["ranks"][1]["update_ms"] = [9, 0.3, 0.5, 9], [9, 0.2, 1.0, 9]
expect("median update", check_stats.median_update(final), 0.4e-3, 1e-15)


# The update reaches the planner per parameter of the model: the measurement (or --update-seconds)
# over the parameter count of the run's final records; 0 for runs saved before it was measured.
class Origin(On):
    update_seconds = update_turns = None


update_config = {"mesh": "4x2", "calibration": {"points": [[2, 0.05]], "update_s": 0.35e-3},
                 "runs": {"serial": {"ddp": [{"final": {"parameters": 1000}}]}}, "host": {"cpus": 2}}
expect("update measured", check.update_seconds(Origin(), update_config), (0.35e-3, "from ddp's update without overlap, 0.35 ms"))
# An update measured in the asynchronous engine (with the worker's waits): its turns not priced.
expect("update per parameter", check_predict.compute_rate_args(Origin(), update_config, [[2, 0.05]]),
       ["--seconds-per-sample", "0.025", "--update-seconds-per-param", repr(0.35e-3 / 1000), "--update-turns", "1"])

# The update in the serial engine: ddp's serial runs' update_ms for runs saved before the
# calibration took it (median over every rank and timed step of every repeat: of 0.1, 0.3, 0.2,
# 0.6 ms, 0.25 ms), the calibration's own when it did; its turns the ranks per host CPU (8 ranks
# on 2 CPUs: 4; on 3 CPUs ⌈8/3⌉ = 3), 1 without the host's CPU count, --update-turns when given.
serial_config = json.loads(json.dumps(update_config))
serial_config["runs"]["serial"]["ddp"] = [
    {"final": {"parameters": 1000, "ranks": [{"update_ms": [9, 0.1, 0.3, 9]}]}},
    {"final": {"parameters": 1000, "ranks": [{"update_ms": [9, 0.2, 0.6, 9]}]}}]
expect("update from ddp's serial runs", check.update_seconds(Origin(), serial_config)[0], 0.25e-3, 1e-15)
expect("its turns", check_predict.update_turns(Origin(), serial_config), (4, "8 ranks on 2 CPUs"))
expect("turns passed", check_predict.compute_rate_args(Origin(), serial_config, [[2, 0.05]])[2:],
       ["--update-seconds-per-param", repr(0.25e-3 / 1000), "--update-turns", "4"])
serial_config["calibration"]["update_serial_s"] = 0.18e-3
expect("update from the calibration", check.update_seconds(Origin(), serial_config),
       (0.18e-3, "from ddp's update in the serial engine, 0.18 ms"))
serial_config["host"]["cpus"] = 3
expect("turns on 3 CPUs", check_predict.update_turns(Origin(), serial_config)[0], 3)
del serial_config["host"]
expect("turns without the CPU count", check_predict.update_turns(Origin(), serial_config)[0], 1)
turns_given = Origin()
turns_given.update_turns = 2
expect("turns given", check_predict.update_turns(turns_given, serial_config), (2, "--update-turns"))
given = Origin()
given.update_seconds = 2e-3
expect("update given", check_predict.compute_rate_args(given, update_config, [[2, 0.05]])[3], repr(2e-3 / 1000))
del update_config["calibration"]["update_s"]
expect("update not measured", check.update_seconds(Origin(), update_config), (0.0, "not measured: 0"))
expect("update not measured: 0 per parameter", check_predict.compute_rate_args(Origin(), update_config, [[2, 0.05]])[3],
       repr(0.0))

# best_fit recovers overheads that make every plan's measured step exact (error 0, Spearman 1).
rows = [{"plan": p, "measured": true_step(p), "diagnose": PLANS[p]} for p in PLANS]
step_s, sync_s, summary = check_stats.best_fit(rows)
expect("best fit step", step_s, STEP, 1e-12)
expect("best fit sync", sync_s, SYNC, 1e-12)
expect("best fit error", summary["median_abs_error"], 0.0, 1e-12)

# The calibration keeps the run whose compute is the median (by hand: 3 of 1, 3, 7; the lower
# middle of an even count), with its own payload.
expect("median run of three", check_measure.median_run([(7.0, "c"), (1.0, "a"), (3.0, "b")])[0], 3.0)
if check_measure.median_run([(7.0, "c"), (1.0, "a"), (3.0, "b")])[1] != "b":
    failures.append("median run of three: the payload of another run")
expect("median run of four", check_measure.median_run([(4.0, 0), (2.0, 0), (8.0, 0), (6.0, 0)])[0], 4.0)

# One plan under two labels (same shape, same prediction): one row, repeats pooled (typical_step of
# 0.9, 1.0, 1.1, 1.2, 1.3, 1.4 = 1.15), so neither label's luck decides the pick. By hand:
# distinct rows x (1.15, predicted 1.0) and y (1.1, predicted 2.0): best y, pick x, 1.15/1.1 - 1.
twins = [{"plan": "x7", "shape": "s", "repeats": [1.0, 0.9, 1.1], "measured": 1.0, "predicted": 1.0},
         {"plan": "x13", "shape": "s", "repeats": [1.2, 1.3, 1.4], "measured": 1.3, "predicted": 1.0},
         {"plan": "y", "shape": "t", "repeats": [1.1, 1.1, 1.1], "measured": 1.1, "predicted": 2.0}]
distinct = check_stats.distinct_plans(twins)
expect("distinct rows", len(distinct), 2)
expect("merged label", distinct[0]["plan"], "x7=x13")
expect("pooled typical step (mean and median alike)", distinct[0]["measured"], 1.15)
expect("merged pick over best", check_stats.summarize(twins)["pick_over_best"], 1.15 / 1.1 - 1)
# Per label the pick (x7, the first of the two cheapest) reads 1.0 against the best x7 itself.
expect("per-label pick over best", check_stats.summarize(twins, merge_identical=False)["pick_over_best"], 0.0)
twins[1]["predicted"] = 1.5  # priced differently: two plans after all, nothing merged
expect("not merged", len(check_stats.distinct_plans(twins)), 3)
if twins[0]["plan"] != "x7" or len(twins[0]["repeats"]) != 3:
    failures.append("distinct_plans changed its input rows")

# Which profile prices a case: auto is split on a cluster with a CPU block per node (back to back
# for chained calls, gapped for the calls after compute), the gapped profile on one without (runs
# saved before the field: none) when the run measured it, back to back when it did not.
auto, gap = argparse.Namespace(profile_kind="auto"), argparse.Namespace(profile_kind="gap")
expect("auto, pinned", check_predict.profile_kind(auto, {"cpus": "node", "profile_gap": "g"}), "split")
expect("auto, pinned, no gapped profile", check_predict.profile_kind(auto, {"cpus": "node"}), "back-to-back")
expect("auto, shared cores", check_predict.profile_kind(auto, {"cpus": "none", "profile_gap": "g"}), "gap")
expect("auto, saved before the field", check_predict.profile_kind(auto, {"profile_gap": "g"}), "gap")
expect("auto, no gapped profile", check_predict.profile_kind(auto, {"cpus": "none"}), "back-to-back")
expect("explicit", check_predict.profile_kind(gap, {"cpus": "node", "profile_gap": "g"}), "gap")

# The planner's profile options per kind (paths of profiles saved before embedding are used as is):
# split prices chained calls back to back and the calls between compute segments gapped.
saved = {"cpus": "node", "profile": "b2b.json", "profile_gap": "gap.json"}
expect("args, back to back", check_predict.profile_args(argparse.Namespace(profile_kind="back-to-back"), saved),
       ["--profile", "b2b.json"])
expect("args, gap", check_predict.profile_args(gap, saved), ["--profile", "gap.json"])
expect("args, split", check_predict.profile_args(argparse.Namespace(profile_kind="split"), saved),
       ["--profile", "b2b.json", "--profile-after-compute", "gap.json"])

# A saved run reads back plain and xz-compressed (bench/data keeps them as .json.xz).
import lzma  # noqa: E402
import tempfile  # noqa: E402
with tempfile.TemporaryDirectory() as tmp:
    run = [{"mesh": "4x2", "rate": "100mbit", "plans": ["ddp"], "runs": {}, "calibration": {}}]
    with open(os.path.join(tmp, "r.json"), "w") as f:
        json.dump(run, f)
    with lzma.open(os.path.join(tmp, "r.json.xz"), "wt") as f:
        json.dump(run, f)
    expect("load plain", check.load_run(os.path.join(tmp, "r.json")), run)
    expect("load xz", check.load_run(os.path.join(tmp, "r.json.xz")), run)
    check.save_run(run + run, os.path.join(tmp, "r.json"))  # over the file before, as each configuration ends
    expect("saved again, read back", check.load_run(os.path.join(tmp, "r.json")), run + run)
    expect("no part file left", sorted(os.listdir(tmp)), ["r.json", "r.json.xz"])

# The planner's κ per run: given, else 0 under an emulated accelerator (a time above 0) and 1 for CPU compute.
expect("device ms, spaced", check.emulated_device_ms("--foo 1 --device-ms-per-sequence 30"), 30.0)
expect("device ms, =", check.emulated_device_ms("--device-ms-per-sequence=0.5"), 0.5)
expect("device ms, last wins", check.emulated_device_ms("--device-ms-per-sequence 3 --device-ms-per-sequence 0"), 0.0)
expect("device ms, absent", check.emulated_device_ms(""), 0.0)
# The queued emulated device: its overhead per call or ring step is 0, not fitted.
expect("queued", check.queued_device("--device-ms-per-sequence 30 --device-timing queued"), True)
expect("queued, =", check.queued_device("--device-timing=queued --device-ms-per-sequence=30"), True)
expect("blocking", check.queued_device("--device-ms-per-sequence 30 --device-timing blocking"), False)
expect("timing absent: blocking", check.queued_device("--device-ms-per-sequence 30"), False)
expect("queued, last wins", check.queued_device("--device-ms-per-sequence 30 --device-timing queued "
                                                "--device-timing blocking"), False)
expect("queued without a device", check.queued_device("--device-timing queued"), False)
calibrated = {"calibration": {"call_plan": "p=1x1,g=2x1,os=2x1", "sync_plan": "p=2x1,g=4x1,os=4x1"}}
expect("overheads, queued: ring steps 0, the sync given",
       check.overheads(argparse.Namespace(call_overhead=None, sync_overhead=2e-4),
                       dict(calibrated, train_args="--device-ms-per-sequence 30 --device-timing queued"), []),
       (0.0, 2e-4))
expect("overheads, both given", check.overheads(argparse.Namespace(call_overhead=1e-4, sync_overhead=2e-4),
                                                dict(calibrated, train_args="--device-ms-per-sequence 30"), []),
       (1e-4, 2e-4))
ns = argparse.Namespace
expect("kappa, cpu", check.overlap_slowdown(ns(overlap_slowdown=None), {"calibration": {}}, [], 0, 0)[0], 1.0)
expect("kappa, device", check.overlap_slowdown(ns(overlap_slowdown=None), {
    "calibration": {}, "train_args": "--device-ms-per-sequence 30"}, [], 0, 0)[0], 0.0)
expect("kappa, device off", check.overlap_slowdown(ns(overlap_slowdown=None), {
    "calibration": {}, "train_args": "--device-ms-per-sequence 0"}, [], 0, 0)[0], 1.0)
expect("kappa, given", check.overlap_slowdown(ns(overlap_slowdown=0.3), {
    "calibration": {"call_plan_overlap_runs": [1.0]}}, [], 0, 0)[0], 0.3)
# Calibrated: a stand-in planner whose CALL_PLAN steps with overlap are 0.040 + 0.020·κ s, measured
# at 0.045 and 0.047 (mean 0.046) -> κ = 0.3; measured at 0.035 (below κ = 0) -> 0; at 0.07 -> 1.
def fake_step_sh(cmd, timeout):
    kappa = float(cmd[cmd.index("--overlap-slowdown") + 1])
    return json.dumps({"overlapped": 0.040 + 0.020 * kappa})
class KappaArgs(Args):
    overlap_slowdown = None


saved_sh = check.sh
check.sh = fake_step_sh
# The report's verdict reads the unrounded figures: a Spearman of 0.898 misses though it prints 0.90.
import check_report  # noqa: E402
expect("verdict, all met", check_report.verdict({"median_abs_error": 0.15, "spearman": 0.9, "pick_over_best": 0.05}),
       "met: error, Spearman, pick")
expect("verdict, 0.898", check_report.verdict({"median_abs_error": 0.03, "spearman": 0.8982, "pick_over_best": 0.0}),
       "met: error, pick; missed: Spearman")
expect("verdict, none", check_report.verdict({"median_abs_error": 0.2, "spearman": 0.1, "pick_over_best": 0.06}),
       "met: none; missed: error, Spearman, pick")

kappa_config = {"mesh": "4x2", "rate": "1gbit", "profile": "p.json",
                "links": {"intra_gbytes": 1, "intra_latency": 0, "inter_latency": 0},
                "calibration": {"call_plan": "cal", "call_plan_overlap_runs": [0.045, 0.047]}}
for runs, want in (([0.045, 0.047], 0.3), ([0.035], 0.0), ([0.07], 1.0)):
    kappa_config["calibration"]["call_plan_overlap_runs"] = runs
    expect(f"kappa calibrated from {runs}", check.overlap_slowdown(KappaArgs(), kappa_config, [], 0, 0)[0], want, 1e-5)


# The stall after a gather inside a node: a stand-in planner whose SYNC_PLAN steps with overlap
# are 0.040 + 8 stalls s (eight gathers a step), measured at 0.0408 and 0.0412 (mean 0.041) ->
# 0.125 ms; at 0.039 (below no stall) -> 0; at 0.07 (above 2 ms stalls: 0.056) -> 2 ms. Given:
# as given; no measurement (runs saved before it): 0. The stall goes into the planner's command.
def fake_stall_sh(cmd, timeout):
    expect("stall's plan", cmd[cmd.index("--plans") + 1], "sync")
    return json.dumps({"overlapped": 0.040 + 8 * float(cmd[cmd.index("--gather-stall") + 1])})


class StallArgs(KappaArgs):
    gather_stall = None


check.sh = fake_stall_sh
stall_config = dict(kappa_config, calibration={"sync_plan": "sync"})
for runs, want in (([0.0408, 0.0412], 0.000125), ([0.039], 0.0), ([0.07], 0.002)):
    stall_config["calibration"]["sync_plan_overlap_runs"] = runs
    expect(f"stall calibrated from {runs}", check.gather_stall(StallArgs(), stall_config, [], 0, 0, 0)[0], want, 1e-7)
given = StallArgs()
given.gather_stall = 3e-4
expect("stall given", check.gather_stall(given, stall_config, [], 0, 0, 0), (3e-4, "--gather-stall"))
expect("stall not measured", check.gather_stall(StallArgs(), dict(kappa_config, calibration={}), [], 0, 0, 0)[0], 0.0)

# The ranks' entry skew: given, as given; traced in the calibration, the mean over its plans; runs
# saved before it, 0. It reaches the planner's command, κ's calibration and the stall's: a stand-in
# planner whose step with overlap grows by the skew it is given calibrates κ and the stall lower.
class SkewArgs(StallArgs):
    entry_skew = None


skewed = SkewArgs()
skewed.entry_skew = 4e-4
expect("skew given", check.entry_skew(skewed, {"calibration": {"entry_skew_traced": {"cal": 1e-3}}}),
       (4e-4, "--entry-skew"))
traced_skew, traced_from = check.entry_skew(SkewArgs(), {"calibration": {"entry_skew_traced": {"cal": 3e-4,
                                                                                                 "sync": 5e-4}}})
expect("skew traced", traced_skew, 4e-4, 1e-15)
expect("skew traced from", traced_from, "traced from cal and sync")
expect("skew not measured", check.entry_skew(SkewArgs(), {"calibration": {}}), (0.0, "not measured: 0"))


def fake_skew_sh(cmd, timeout):
    skew, stall = (float(cmd[cmd.index(flag) + 1]) for flag in ("--entry-skew", "--gather-stall"))
    kappa = float(cmd[cmd.index("--overlap-slowdown") + 1])
    return json.dumps({"overlapped": 0.040 + 0.020 * kappa + 8 * stall + skew})


check.sh = fake_skew_sh
kappa_config["calibration"]["call_plan_overlap_runs"] = [0.046]
expect("kappa with the skew", check.overlap_slowdown(KappaArgs(), kappa_config, [], 0, 0, 0.002)[0], 0.2, 1e-5)
stall_config["calibration"]["sync_plan_overlap_runs"] = [0.041]
expect("stall with the skew", check.gather_stall(StallArgs(), stall_config, [], 0, 0, 0, 0.0002)[0], 0.0001, 1e-7)
command = check_predict.predict_command(Args(), kappa_config, ["ddp"], [], entry_skew_s=2.5e-4)
expect("skew in the command", command[command.index("--entry-skew") + 1], "0.00025")
check.sh = saved_sh

# A profile from its passes: each entry as its median pass gave it, every field of that pass.
def entry(op, seconds, extra):
    return {"op": op, "group": "4x2", "bytes": 4096, "seconds": seconds, "busbw_gbps": extra}


passes = [{"format": "f", "entries": [entry("all_gather", 3.0, "a0"), entry("all_reduce", 1.0, "r0")]},
          {"format": "f", "entries": [entry("all_reduce", 9.0, "r1"), entry("all_gather", 1.0, "a1")]},
          {"format": "f", "entries": [entry("all_gather", 2.0, "a2"), entry("all_reduce", 2.0, "r2")]}]
merged = {e["op"]: e for e in check_stats.median_profile(passes)["entries"]}
expect("median pass of an entry", (merged["all_gather"]["seconds"], merged["all_gather"]["busbw_gbps"]), (2.0, "a2"))
expect("median pass, other entry", (merged["all_reduce"]["seconds"], merged["all_reduce"]["busbw_gbps"]), (2.0, "r2"))
expect("passes counted", check_stats.median_profile(passes)["passes"], 3)
# Two passes: the lower of the middle two (the faster pass, not a mean of the two).
expect("even count: lower middle", check_stats.median_profile(passes[:2])["entries"][0]["seconds"], 1.0)
for name, bad in (("no passes", []), ("other entries", [passes[0], {"entries": [entry("all_gather", 1.0, "x")]}])):
    try:
        check_stats.median_profile(bad)
        failures.append(f"median_profile accepted {name}")
    except ValueError:
        pass

# The host's busy share from two /proc/stat lines: user nice system idle iowait irq softirq steal
# moved by 30 5 10 40 10 0 3 2 (100 ticks), of which idle + iowait 50: busy 0.5.
expect("busy share", check_stats.busy_share("cpu 100 0 50 1000 20 0 7 0 0 0", "cpu 130 5 60 1040 30 0 10 2 0 0"), 0.5)
for before, after in (("cpu 1 2 3", "cpu 1 2 3"), ("cpu 1 1 1 1 1 1 1 1", "cpu 1 1 1 1 1 1 1 1")):
    try:
        check_stats.busy_share(before, after)
        failures.append(f"busy_share accepted {before!r} -> {after!r}")
    except ValueError:
        pass

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("check.py statistics: all checks passed")
