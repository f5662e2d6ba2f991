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
# overheads and κ, the analysis) and the command line. check_measure runs the cluster,
# check_predict forms the planner's command, check_stats forms the numbers (its STEP_ESTIMATOR is
# set there by main: typical_step reads it), check_report prints the tables.
import check_stats
import check_measure
from check_measure import CLUSTER, ROOT, measured_computing, run_config, sh
from check_predict import PROFILE_KINDS, compute_model_args, contention_args, predict_command, profile_kind, \
    update_seconds
from check_report import print_tables
from phase_compare import compare as compare_phases
from check_stats import measured_compute, run_medians, slope, summarize, typical_step

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
    Saved runs without SYNC_PLAN's step (measured before the term existed) get 0 for it."""
    cal = config["calibration"]
    fixed_step = a.call_overhead is not None or "call_plan" not in cal
    fixed_sync = a.sync_overhead is not None or "sync_plan" not in cal
    step0 = (a.call_overhead or 0.0) if fixed_step else None
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
    stall, stall_from = gather_stall(a, config, compute_args, overhead, sync, kappa, skew)
    predict = predict_command(a, config, plans, compute_args, overhead, sync, kappa, stall, skew)
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
            command = predict_command(a, config, plans, compute_args, step_s, sync_s, kappa, stall, skew)
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
                       "call_overhead_from": "--call-overhead" if a.call_overhead is not None or
                       "call_plan" not in config["calibration"] else config["calibration"]["call_plan"],
                       "sync_overhead": sync,
                       "sync_overhead_from": "--sync-overhead" if a.sync_overhead is not None else
                       "not measured: 0" if "sync_plan" not in config["calibration"] else
                       config["calibration"]["call_plan"] + " and " + config["calibration"]["sync_plan"],
                       "update_seconds_per_param": any_p["update_seconds_per_param"],
                       "update_from": update_seconds(a, config)[1],
                       "overlap_slowdown": kappa, "overlap_slowdown_from": kappa_from,
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
    else calibrated like the overheads, from a plan not among those checked: the κ in [0, 1] that
    makes the planner's step with overlap of CALL_PLAN equal its measured one (runs since
    2026-12-04's tenth session measure it); else, for runs without that measurement, 1 where the
    example computes on the CPU (the cores that compute also move the bytes, and Open MPI
    progresses nonblocking collectives only inside MPI calls: docs/planner-check-terms.md) and 0
    under an emulated accelerator (amsp-train --device-ms-per-sequence: a sleep that leaves the
    cores to the communication, as a GPU's kernels leave the host;
    docs/planner-check-accelerator.md). The step with overlap never falls as κ grows: bisection."""
    if a.overlap_slowdown is not None:
        return a.overlap_slowdown, "--overlap-slowdown"
    cal = config["calibration"]
    if not cal.get("call_plan_overlap_runs"):
        device = emulated_device_ms(config.get("train_args", "")) > 0
        return (0.0, "not measured: 0 under an emulated accelerator") if device else \
            (1.0, "not measured: 1 for CPU compute")
    measured = typical_step(cal["call_plan_overlap_runs"])

    def step(kappa):
        return json.loads(sh(predict_command(a, config, [cal["call_plan"]], compute_args, call_overhead_s,
                                             sync_overhead_s, kappa, 0.0, entry_skew_s), 60))["overlapped"]
    return matching_value(step, measured, 0.0, 1.0, 20, cal["call_plan"], "its step at κ = 0 already reaches the measured one",
                          "its step at κ = 1 stays below the measured one")


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


def gather_stall(a, config, compute_args, call_overhead_s, sync_overhead_s, kappa, entry_skew_s=0.0):
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
                                             sync_overhead_s, kappa, stall, entry_skew_s), 60))["overlapped"]
    return matching_value(step, measured, 0.0, 2e-3, 16, cal["sync_plan"],
                          "its step without a stall already reaches the measured one",
                          "its step with 2 ms stalls stays below the measured one")


def emulated_device_ms(train_args):
    """amsp-train's --device-ms-per-sequence in a run's --train-args (either "--opt X" or "--opt=X";
    the last one counts, as in amsp-train), 0 when absent."""
    words, ms = train_args.split(), 0.0
    for i, w in enumerate(words):
        if w == "--device-ms-per-sequence" and i + 1 < len(words):
            ms = float(words[i + 1])
        elif w.startswith("--device-ms-per-sequence="):
            ms = float(w.split("=", 1)[1])
    return ms


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


def load_run(path):
    """A saved --out file, plain or xz-compressed (bench/data keeps them as .json.xz)."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "default"))
    ap.add_argument("--meshes", default="4x2,2x4")
    ap.add_argument("--rates", default="1gbit,200mbit")
    ap.add_argument("--plans", default="", help="';'-separated plans (default: the issue's nine per mesh)")
    ap.add_argument("--modes", default="overlap,serial", help="overlap, serial or both")
    ap.add_argument("--repeats", type=int, default=10,
                    help="runs of each plan and schedule (interleaved); the measured step is their typical_step "
                         "(10 since 2026-12-05's twenty-second session: with 5, at 1 Gbit/s the plans' steps, "
                         "0.1-0.5 ms apart, ranked as they would again in only 60-82 %% of bootstrap draws)")
    ap.add_argument("--estimator", choices=["mean", "median"], default="mean",
                    help="a plan's measured step from its runs: mean (default) or median (the check before "
                         "2026-12-04's ninth session; for reanalysing saved runs as they were read then)")
    ap.add_argument("--steps", type=int, default=10, help="steps of the first repeat (+2 per repeat)")
    ap.add_argument("--mpi-check-calls", choices=["on", "off"], default="off",
                    help="amsp-train's and amsp-profile's MPI argument check: a small MPI_Allreduce before every "
                         "collective, which on this oversubscribed CPU made steps 20-50 %% slower (measured "
                         "side by side); off, as a timing run would be")
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--model", default=check_measure.DEFAULT_MODEL,
                    help="amsp-train's model options (also given to the planner)")
    ap.add_argument("--train-args", default="",
                    help="more amsp-train options for every run, not given to the planner (e.g. "
                         "'--device-ms-per-sequence 20': an emulated accelerator, docs/planner-check.md)")
    ap.add_argument("--overlap-slowdown", type=float, default=None,
                    help="the planner's kappa: 1 = communication hides behind no compute, 0 = hidden for free "
                         "(default: calibrated from the run's CALL_PLAN with overlap; see overlap_slowdown)")
    ap.add_argument("--compute", choices=["step", "origin", "line"], default="origin",
                    help="compute model from the calibration (see compute_model_args)")
    ap.add_argument("--contention", choices=["on", "off"], default="on",
                    help="price compute at the CPU contention each plan's step implies (the calibration's "
                         "--compute-turns points; saved runs without them: off); off = every rank computing at once")
    ap.add_argument("--call-overhead", type=float, default=None,
                    help="seconds per collective call for the planner (default: calibrated from the run of "
                         "CALL_PLAN; 0 reproduces the model without the term)")
    ap.add_argument("--sync-overhead", type=float, default=None,
                    help="seconds per collective call between two compute segments (Cluster::sync_overhead_s; "
                         "default: calibrated with CALL_PLAN and SYNC_PLAN; 0 reproduces the model without it)")
    ap.add_argument("--update-seconds", type=float, default=None,
                    help="seconds of the optimizer update of all parameters on one rank (DDP's), which the "
                         "planner prices as this / s_os per plan (default: measured by the calibration's ddp "
                         "runs without overlap; 0 for runs saved before)")
    ap.add_argument("--gather-stall", type=float, default=None,
                    help="seconds a unit's compute waits after a gather inside a node in the step with overlap "
                         "(Cluster::gather_stall_s; default: calibrated from SYNC_PLAN's run with overlap; 0 "
                         "reproduces the model without the term)")
    ap.add_argument("--entry-skew", type=float, default=None,
                    help="seconds after the first rank the last one enters a step (Cluster::entry_skew_s; "
                         "default: traced in the calibration; 0 reproduces the model without it)")
    ap.add_argument("--overhead-unit", choices=["call", "step"], default="step",
                    help="the overhead counts once per collective call (Cluster::call_overhead_s) or once per "
                         "step of its ring (Cluster::step_overhead_s)")
    ap.add_argument("--gather-scatter", choices=["recursive", "ring"], default="ring",
                    help="hand-overs the per-step overhead is paid for in AllGather and ReduceScatter: "
                         "ring = n - 1 (default); recursive = ceil(log2 n), the hand-overs of the recursive "
                         "doubling / halving scripts/cluster.sh pins (predicts worse: docs/planner-check.md)")
    ap.add_argument("--stagger", choices=["on", "off"], default="on",
                    help="the step without overlap hides backward compute behind the head start of the backward "
                         "gathers' first pair, from the gapped profile's first_pair_seconds (gather_stagger.hpp; "
                         "runs measured before 2026-12-04 23:40 have none); off: the model before it")
    ap.add_argument("--waits", choices=["overlap", "add"], default="overlap",
                    help="a collective's waits for peers and its transfer: overlap (the longer counts) or add "
                         "(their sum: the model before 2026-12-03's reanalysis)")
    ap.add_argument("--diagnose", action="store_true",
                    help="also print the best any calibration of the model's overheads could do (fitted to the "
                         "checked plans themselves: a diagnosis of the model's form, not a prediction)")
    ap.add_argument("--profile-sizes", default="4096,65536,262144")
    ap.add_argument("--profile-iterations", type=int, default=50)
    ap.add_argument("--profile-gap-us", type=int, default=10000,
                    help="also measure a profile with every call after this idle gap (amsp-profile --gap-us; "
                         "0: not measured)")
    ap.add_argument("--profile-gap-iterations", type=int, default=10, help="calls per entry of the gapped profile")
    ap.add_argument("--profile-passes", type=int, default=3,
                    help="passes of each profile, taken in turn; the planner reads each entry's median pass "
                         "(check_stats.median_profile; 1: the check before 2026-12-05's eighteenth session)")
    ap.add_argument("--profile-kind", choices=["auto", *PROFILE_KINDS], default="auto",
                    help="the profile the planner prices with; split: back to back for chained calls, gapped for "
                         "calls that follow compute (CommTerm::after_compute); auto: split for runs with a CPU block "
                         "per node (the default cluster) and both profiles, the gapped one for runs without a CPU "
                         "block, back to back for runs without a gapped profile (the other kinds' targets are "
                         "printed too, when the run has both profiles)")
    ap.add_argument("--profile-call-sizes", choices=["on", "off"], default="on",
                    help="also profile the plans' own call sizes (call_sizes), not only --profile-sizes")
    ap.add_argument("--out", default="cluster-check.json")
    ap.add_argument("--reanalyze", default="", help="a saved --out file (or its .xz, as bench/data keeps them): predict "
                                                    "and print again, measure nothing")
    ap.add_argument("--phase-traces", default="",
                    help="with --reanalyze: amsp-train --timeline prefixes with {mesh}, {rate} and {plan} "
                         "(scripts/cluster/trace_plans.py records them); each configuration with a DDP trace also "
                         "prints the model's phases of the overlapped step next to the traced ones, each minus "
                         "DDP's (phase_compare.py)")
    a = ap.parse_args()
    if a.update_seconds is not None and a.update_seconds < 0:
        ap.error(f"--update-seconds must be at least 0 seconds, got {a.update_seconds} (rule cli.value)")
    if a.update_seconds is not None and a.compute == "line":
        ap.error("--update-seconds prices the update of --compute origin and step; --compute line fits its own "
                 "(rule cli.value)")
    for name, value in (("--gather-stall", a.gather_stall), ("--entry-skew", a.entry_skew)):
        if value is not None and value < 0:
            ap.error(f"{name} must be at least 0 seconds, got {value} (rule cli.value)")
    if a.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {a.repeats} (rule cli.value)")
    if a.steps < 1:
        ap.error(f"--steps must be at least 1, got {a.steps} (rule cli.value)")
    if a.profile_passes < 1:
        ap.error(f"--profile-passes must be at least 1, got {a.profile_passes} (rule cli.value)")
    check_stats.STEP_ESTIMATOR = a.estimator  # where typical_step reads it
    a.train = os.path.join(a.build, check_measure.TRAIN)
    a.profile = os.path.join(a.build, check_measure.PROFILE)
    a.predict = os.path.join(a.build, check_measure.PREDICT)
    a.model_args = a.model.split()
    a.train_args = a.train_args.split()
    a.modes = a.modes.split(",")
    a.work = os.path.dirname(os.path.abspath(a.out))
    if a.phase_traces and not a.reanalyze:
        ap.error("--phase-traces reads traces next to a saved run: give --reanalyze too (rule cli.value)")
    missing = check_measure.unbuilt(a.build, [check_measure.PREDICT] if a.reanalyze else
                                    [check_measure.TRAIN, check_measure.PROFILE, check_measure.PREDICT])
    if missing:
        ap.error(missing)
    if a.reanalyze:
        for c in load_run(a.reanalyze):
            print_tables(analyze(a, c))
            gap_summary(a, c)
            if a.phase_traces:
                compare_phases(c, c["predictions"], a.phase_traces)
        return 0
    configs = []
    try:
        for mesh in a.meshes.split(","):
            for rate in a.rates.split(","):
                configs.append(run_config(a, mesh, rate))
                json.dump(configs, open(a.out, "w"), indent=1)
    finally:
        subprocess.run([CLUSTER, "down"], capture_output=True)
    for c in configs:
        print_tables(analyze(a, c))
        gap_summary(a, c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
