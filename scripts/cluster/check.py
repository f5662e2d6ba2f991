#!/usr/bin/env python3
"""The planner checked against measured step times on the emulated cluster (docs/cluster.md).

For each mesh R x N and inter-node rate: bring the cluster up, measure the compute model's
calibration, measure a bandwidth profile with amsp-profile (the group sets of the plans run,
strided ones included), run every plan with amsp-train under MPI, with and without overlap
(repeats interleaved across plans, so that load drift hits all plans alike), ask the planner
(amsp-cluster-predict) for its prediction, and print one table per configuration with the
targets: median absolute error, Spearman rank correlation, the planner's pick vs the measured
best, and the bytes the node links carried vs what the engine expects. Run it through
scripts/cluster-check.sh, which builds the programs first. --reanalyze re-predicts a saved run.
"""
import argparse
import json
import lzma
import os
import statistics
import subprocess
import sys

# The check's parts, one purpose each; this file holds the planner's model of a run (its calibrated
# overheads and κ, the analysis) and the run's course. check_args reads the command line,
# check_measure runs the cluster,
# check_predict forms the planner's command, check_stats forms the numbers (its STEP_ESTIMATOR is
# set there by main: typical_step reads it), check_report prints the tables.
import check_args
import check_stats
from check_measure import CLUSTER, leave_through_finally_on_sigterm, program_failure, run_config, sh
from check_predict import PROFILE_KINDS, compute_model_args, contention_args, emulated_device_ms, predict_command, \
    profile_kind, queued_device, update_seconds, update_turns
from check_report import print_tables
from phase_compare import compare as compare_phases
from check_stats import measured_compute, measured_computing, run_medians, slope, summarize, typical_step

PREDICTION = {"overlap": "overlapped", "serial": "serial"}  # the planner's step per schedule (check_measure.MODES)


def calibration_step(cal, which):
    """The measured step of calibration plan `which` ("call" or "sync"): typical_step of its runs;
    runs saved before the runs were kept have the median of three only."""
    runs = cal.get(f"{which}_plan_runs")
    return typical_step(runs) if runs else cal[f"{which}_plan_step"]


def overheads(a, config, compute_args):
    """(seconds per collective call or ring step (--overhead-unit), seconds per call between compute
    segments) that make the planner's steps without overlap of the calibration plans equal their
    measured steps. The step is linear in both (nearly, under CPU contention: Newton rounds), so
    two plans give two equations: CALL_PLAN (one
    gradient reduce-scatter per unit between compute segments, then the end-of-step reductions)
    and SYNC_PLAN (a parameter gather before every unit's forward and backward). A negative
    solution means the term is not seen: it is set to 0 and the other fitted alone (least squares).
    Saved runs without SYNC_PLAN's step (measured before the term existed) get 0 for it. Under the
    queued emulated device (queued_device) the overhead per call or ring step is 0 and the one
    between compute segments is fitted alone: the profile times the calls, and the host's own work
    around them reaches the step only where the host blocks before a kernel, between compute
    segments (docs/planner-check-device-queue.md)."""
    cal = config["calibration"]
    given = given_step_overhead(a, config)
    fixed_step = given is not None
    fixed_sync = a.sync_overhead is not None or "sync_plan" not in cal
    step0 = given[0] if fixed_step else None
    sync0 = (a.sync_overhead or 0.0) if fixed_sync else None
    if fixed_step and fixed_sync:
        return step0, sync0
    plans = [(cal["call_plan"], calibration_step(cal, "call"))] + \
        ([] if fixed_sync else [(cal["sync_plan"], calibration_step(cal, "sync"))])

    def serial(plan, step_s, sync_s):
        return json.loads(sh(predict_command(a, config, [plan], compute_args, step_s, sync_s), 60))["serial"]
    # Piecewise linear in both (a call's waits count where they outlast its transfer), and with CPU
    # contention (compute depends on the waits) only nearly so: Newton rounds, each linearised at the
    # last solution.
    step_s, sync_s = step0 or 0.0, sync0 or 0.0
    for _ in range(8):  # the waits overlap the transfers (the longer counts): piecewise linear
        rows = []  # (measured - predicted + the linear part, d/d step, d/d sync) at (step_s, sync_s)
        for plan, measured in plans:
            t0 = serial(plan, step_s, sync_s)
            d_step = (serial(plan, step_s + 1e-3, sync_s) - t0) / 1e-3
            d_sync = (serial(plan, step_s, sync_s + 1e-3) - t0) / 1e-3
            rows.append((measured - t0 + d_step * (step_s - (step0 or 0.0)) + d_sync * (sync_s - (sync0 or 0.0)),
                         d_step, d_sync))
        step_s, sync_s = solve_overheads(rows, step0, sync0, fixed_step, fixed_sync)
    return step_s, sync_s


def given_step_overhead(a, config):
    """(seconds, where from) of the overhead per call or ring step when it is not fitted: given
    (--call-overhead), not measured (runs without CALL_PLAN) or 0 under the queued emulated device
    (queued_device); None when overheads() fits it."""
    if a.call_overhead is not None:
        return a.call_overhead, "--call-overhead"
    if "call_plan" not in config["calibration"]:
        return 0.0, "--call-overhead"
    if queued_device(config.get("train_args", "")):
        return 0.0, "0 under the queued emulated device"
    return None


def solve_overheads(rows, step0, sync0, fixed_step, fixed_sync):
    """The two overheads from rows (measured - predicted at (step0 or 0, sync0 or 0), d/d step,
    d/d sync) of a linear step; a fixed one stays, a negative one is set to 0 and the other fitted
    alone (least squares through 0)."""
    def alone(k):  # least squares of one unknown through 0, never negative
        den = sum(r[k] ** 2 for r in rows)
        return max(0.0, sum(r[0] * r[k] for r in rows) / den) if den else 0.0
    if fixed_sync:
        return alone(1), sync0
    if fixed_step:
        return step0, alone(2)
    (e1, a1, b1), (e2, a2, b2) = rows
    det = a1 * b2 - a2 * b1
    if det:
        step_s, sync_s = (e1 * b2 - e2 * b1) / det, (a1 * e2 - a2 * e1) / det
        if step_s >= 0 and sync_s >= 0:
            return step_s, sync_s
        if step_s < 0:
            return 0.0, alone(2)
    return alone(1), 0.0


def analyze(a, config):
    """The planner's prediction next to the measurement of one configuration."""
    mesh, plans = config["mesh"], config["plans"]
    ranks, nodes = map(int, mesh.split("x"))
    compute_args = compute_model_args(a, config)
    overhead, sync = overheads(a, config, compute_args)
    skew, skew_from = entry_skew(a, config)
    kappa, kappa_from = overlap_slowdown(a, config, compute_args, overhead, sync, skew)
    per_call, per_call_from = overlap_call(a, config, compute_args, overhead, sync, kappa, skew)
    stall, stall_from = gather_stall(a, config, compute_args, overhead, sync, kappa, skew, per_call)
    predict = predict_command(a, config, plans, compute_args, overhead, sync, kappa, stall, skew, per_call)
    predictions = {p["name"]: p for p in map(json.loads, sh(predict, 60).splitlines())}
    tables = {}
    for mode, by_plan in config["runs"].items():
        rows = []
        for plan in plans:
            p, runs = predictions[plan], by_plan[plan]
            medians = run_medians(runs)
            compute = measured_compute(runs)
            link = slope([(run["steps"], run["link_bytes"]) for run in runs]) / nodes if len(runs) > 1 else float("nan")
            rows.append({"plan": plan, "shape": p["plan"], "measured": typical_step(medians),
                         "repeats": medians, "spread": (max(medians) - min(medians)) / typical_step(medians),
                         "predicted": p[PREDICTION[mode]], "measured_compute": compute,
                         # amsp-train's compute leaves the update out (its step() is among the waits)
                         "predicted_compute": p["compute_serial" if mode == "serial" else "compute"],
                         "predicted_comm": p["communication"],
                         "computing_predicted": p["computing_serial" if mode == "serial" else "computing_overlapped"],
                         "computing_measured": measured_computing(runs, ranks * nodes),
                         "link_measured": link, "link_model": p["link_bytes_per_node"],
                         "calls": p["collective_calls"],
                         "engine_inter_x_ranks": runs[0]["final"]["expected_bytes_inter_per_step"] * ranks})
        tables[mode] = rows
    config["tables"] = tables
    config["predictions"] = predictions  # phase_compare reads their "phases"
    if a.diagnose:
        # The same predictions with each overhead raised by 1 ms: the step's slope in each.
        def predicted(step_s, sync_s):
            command = predict_command(a, config, plans, compute_args, step_s, sync_s, kappa, stall, skew, per_call)
            return {p["name"]: p for p in map(json.loads, sh(command, 60).splitlines())}
        base, d_step, d_sync = predicted(0, 0), predicted(1e-3, 0), predicted(0, 1e-3)
        for mode, rows in tables.items():
            key = PREDICTION[mode]
            for r in rows:
                b = base[r["plan"]][key]
                r["diagnose"] = (b, (d_step[r["plan"]][key] - b) / 1e-3, (d_sync[r["plan"]][key] - b) / 1e-3)
    any_p = next(iter(predictions.values()))
    config["model"] = {"seconds_per_sample": any_p["seconds_per_sample"], "call_overhead": overhead,
                       "overhead_unit": "call" if a.overhead_unit == "call" else "ring step",
                       "call_overhead_from": (given_step_overhead(a, config) or
                                              (None, config["calibration"]["call_plan"]))[1],
                       "sync_overhead": sync,
                       "sync_overhead_from": "--sync-overhead" if a.sync_overhead is not None else
                       "not measured: 0" if "sync_plan" not in config["calibration"] else
                       config["calibration"]["call_plan"] + " and " + config["calibration"]["sync_plan"],
                       "update_seconds_per_param": any_p["update_seconds_per_param"],
                       "update_from": update_seconds(a, config)[1],
                       **dict(zip(("update_turns", "update_turns_from"), update_turns(a, config))),
                       "overlap_slowdown": kappa, "overlap_slowdown_from": kappa_from,
                       "overlap_call": per_call, "overlap_call_from": per_call_from,
                       "gather_stall": stall, "gather_stall_from": stall_from,
                       "entry_skew": skew, "entry_skew_from": skew_from,
                       "contention": contention_args(a, config)[1:] or
                       ["off" if a.contention == "off" else "not measured: off"]}
    return config


def entry_skew(a, config):
    """(seconds, where they come from) after the first rank the last one enters a step, before
    which the overlapped step's first forward cannot start (Cluster::entry_skew_s): --entry-skew
    when given; else the median traced in the calibration, the mean over its two plans (runs since
    2026-12-06's twenty-fourth session: check_measure.traced_entry_skew); 0 for runs without it."""
    if a.entry_skew is not None:
        return a.entry_skew, "--entry-skew"
    traced = config["calibration"].get("entry_skew_traced")
    if not traced:
        return 0.0, "not measured: 0"
    return statistics.mean(traced.values()), "traced from " + " and ".join(traced)


def overlap_slowdown(a, config, compute_args, call_overhead_s, sync_overhead_s, entry_skew_s=0.0):
    """(κ, where it comes from) for a run's predictions with overlap: --overlap-slowdown when given;
    else from a plan not among those checked, CALL_PLAN with overlap (runs since 2026-12-04's tenth
    session measure it): by default (--overlap-form call) the compute it lost beside communication,
    its measured compute (amsp-train's step without its waits) over the planner's, divided by the
    seconds the planner has its streams busy inside compute, in [0, 1] (the rest of its step goes
    to overlap_call); with --overlap-form beside, or for runs without its records (before
    2026-12-06's run ao), the κ in [0, 1] that makes its predicted step with overlap its measured
    one (the model before 2026-12-07's thirty-eighth session; the step never falls as κ grows:
    bisection). Runs without that plan with overlap: 1 where the example computes on the CPU (the
    cores that compute also move the bytes, and Open MPI progresses nonblocking collectives only
    inside MPI calls: docs/planner-check-terms.md), 0 under an emulated accelerator (amsp-train
    --device-ms-per-sequence: a sleep that leaves the cores to the communication, as a GPU's
    kernels leave the host; docs/planner-check-accelerator.md)."""
    if a.overlap_slowdown is not None:
        return a.overlap_slowdown, "--overlap-slowdown"
    cal = config["calibration"]
    if not cal.get("call_plan_overlap_runs"):
        device = emulated_device_ms(config.get("train_args", "")) > 0
        return (0.0, "not measured: 0 under an emulated accelerator") if device else \
            (1.0, "not measured: 1 for CPU compute")
    records = cal.get("plan_records", {}).get(f"{cal['call_plan']} overlap")

    def predicted(kappa):
        return json.loads(sh(predict_command(a, config, [cal["call_plan"]], compute_args, call_overhead_s,
                                             sync_overhead_s, kappa, 0.0, entry_skew_s), 60))
    if a.overlap_form == "call" and records:
        at0 = predicted(0.0)
        beside = predicted(1.0)["overlapped"] - at0["overlapped"]
        lost = measured_compute(records) - at0["compute"]
        kappa = min(1.0, max(0.0, lost / beside)) if beside > 0 else 0.0
        return kappa, f"{cal['call_plan']}'s compute with overlap"
    measured = typical_step(cal["call_plan_overlap_runs"])
    return matching_value(lambda kappa: predicted(kappa)["overlapped"], measured, 0.0, 1.0, 20, cal["call_plan"],
                          "its step at κ = 0 already reaches the measured one",
                          "its step at κ = 1 stays below the measured one")


def overlap_call(a, config, compute_args, call_overhead_s, sync_overhead_s, kappa, entry_skew_s=0.0):
    """(seconds, where they come from) the step with overlap adds per collective call of the step
    (Cluster::overlap_call_s): --overlap-call when given; else, with --overlap-form call (the
    default), calibrated like κ from CALL_PLAN with overlap, after κ: the seconds per call that make
    its predicted step its measured one (docs/planner-check-overlap-slowdown.md); 0 with
    --overlap-form beside or for runs without that plan's records. The step never falls as the
    seconds grow: bisection over [0, 1 ms]."""
    if a.overlap_call is not None:
        return a.overlap_call, "--overlap-call"
    cal = config["calibration"]
    if a.overlap_form != "call":
        return 0.0, "--overlap-form beside"
    if not cal.get("call_plan_overlap_runs") or f"{cal['call_plan']} overlap" not in cal.get("plan_records", {}):
        return 0.0, "not measured: 0"
    measured = typical_step(cal["call_plan_overlap_runs"])

    def step(per_call):
        return json.loads(sh(predict_command(a, config, [cal["call_plan"]], compute_args, call_overhead_s,
                                             sync_overhead_s, kappa, 0.0, entry_skew_s, per_call), 60))["overlapped"]
    return matching_value(step, measured, 0.0, 1e-3, 20, cal["call_plan"],
                          "its step without it already reaches the measured one",
                          "its step at 1 ms a call stays below the measured one")


def matching_value(step, measured, lo, hi, rounds, plan, at_lo, at_hi):
    """The value in [lo, hi] at which `step` (never falling as the value grows) reaches `measured`,
    by bisection, and where it comes from: `plan` with overlap, or a bound and `at_lo`/`at_hi`."""
    if step(lo) >= measured:
        return lo, f"{plan} with overlap ({at_lo})"
    if step(hi) <= measured:
        return hi, f"{plan} with overlap ({at_hi})"
    for _ in range(rounds):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step(mid) < measured else (lo, mid)
    return (lo + hi) / 2, f"{plan} with overlap"


def gather_stall(a, config, compute_args, call_overhead_s, sync_overhead_s, kappa, entry_skew_s=0.0,
                 overlap_call_s=0.0):
    """(seconds, where they come from) a unit's compute waits after a gather inside a node in the
    step with overlap (Cluster::gather_stall_s): --gather-stall when given; else calibrated like κ,
    from a plan not among those checked that gathers inside a node: the stall that makes the
    planner's step with overlap of SYNC_PLAN equal its measured one (runs since 2026-12-05's
    nineteenth session measure it); 0 for runs without that measurement (the model before). The
    step never falls as the stall grows: bisection over [0, 2 ms]."""
    if a.gather_stall is not None:
        return a.gather_stall, "--gather-stall"
    cal = config["calibration"]
    if not cal.get("sync_plan_overlap_runs"):
        return 0.0, "not measured: 0"
    measured = typical_step(cal["sync_plan_overlap_runs"])

    def step(stall):
        return json.loads(sh(predict_command(a, config, [cal["sync_plan"]], compute_args, call_overhead_s,
                                             sync_overhead_s, kappa, stall, entry_skew_s, overlap_call_s),
                             60))["overlapped"]
    return matching_value(step, measured, 0.0, 2e-3, 16, cal["sync_plan"],
                          "its step without a stall already reaches the measured one",
                          "its step with 2 ms stalls stays below the measured one")


def gap_summary(a, config):
    """The targets once more with each other profile kind (back to back, gapped, split), when the
    run has both profiles: one line per kind and schedule, so that one run says which kind predicts
    the steps."""
    if "profile_gap" not in config:
        return
    for kind in PROFILE_KINDS:
        if kind == profile_kind(a, config):
            continue
        other = argparse.Namespace(**vars(a))
        other.profile_kind = kind
        other.diagnose = False
        tables = analyze(other, json.loads(json.dumps({k: v for k, v in config.items() if k != "tables"})))["tables"]
        for mode, rows in tables.items():
            s = summarize(rows)
            print(f"{config['mesh']} {config['rate']} {mode}, priced with the {kind} profile instead: "
                  f"median |error| {100 * s['median_abs_error']:.1f} %, Spearman {s['spearman']:.2f}, "
                  f"pick {s['pick']} vs measured best {s['best']}: {100 * s['pick_over_best']:+.1f} %")


def load_run(path, program="check.py", keys=("mesh", "rate", "plans", "runs", "calibration")):
    """A saved --out file, plain or xz-compressed (bench/data keeps them as .json.xz): its
    configurations, each with `keys`. Exits 2 naming the file when it cannot be read as one."""
    opener = lzma.open if path.endswith(".xz") else open
    try:
        with opener(path, "rt") as f:
            configs = json.load(f)
        if not isinstance(configs, list) or not all(isinstance(c, dict) and set(keys) <= c.keys() for c in configs):
            raise ValueError(f"not a list of configurations with {', '.join(keys)}")
        return configs
    except (OSError, ValueError, EOFError, lzma.LZMAError) as e:
        print(f"{program}: {path}: not a saved cluster check ({e})", file=sys.stderr)
        sys.exit(2)


def save_run(configs, path):
    """Writes the configurations measured so far; a kill while it writes leaves the previous file."""
    with open(path + ".part", "w") as f:
        json.dump(configs, f, indent=1)
    os.replace(path + ".part", path)


def main():
    a = check_args.parse(__doc__)
    check_stats.STEP_ESTIMATOR = a.estimator  # where typical_step reads it
    if a.reanalyze:
        for c in load_run(a.reanalyze):
            print_tables(analyze(a, c))
            gap_summary(a, c)
            if a.phase_traces:
                compare_phases(c, c["predictions"], a.phase_traces)
        return 0
    leave_through_finally_on_sigterm()
    configs = []
    try:
        for mesh in a.meshes.split(","):
            for rate in a.rates.split(","):
                configs.append(run_config(a, mesh, rate))
                save_run(configs, a.out)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        report, code = program_failure(e)
        print(f"check.py: {report}", file=sys.stderr)
        if configs:
            print(f"check.py: the {len(configs)} configurations measured before it are in {a.out}", file=sys.stderr)
        return code
    finally:
        subprocess.run([CLUSTER, "down"], capture_output=True)
    for c in configs:
        print_tables(analyze(a, c))
        gap_summary(a, c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
