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
import atexit
import json
import lzma
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# amsp-profile --calls: every collective issued as the engine issues it (gathers asynchronous,
# reductions blocking). Open MPI runs the two forms in different components (libnbc, tuned), which
# on the emulated cluster pace large gathers differently (docs/cluster.md, "Blocking and
# nonblocking calls"); runs before 2026-12-04 timed every call blocking.
PROFILE_CALLS = "engine"
# The profile kinds the planner can price with (--profile-kind, besides auto): back to back, gapped,
# or split (back to back for chained calls, gapped for the calls between compute segments).
PROFILE_KINDS = ("back-to-back", "gap", "split")
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")

PLANS = {  # per mesh: the list; MiCS with a group smaller than a node (k = node is hsdp)
    "4x2": ["ddp", "zero1", "zero2", "zero3", "mics(2)", "hsdp", "amsp-7b", "amsp-13b", "amsp-30b"],
    "2x4": ["ddp", "zero1", "zero2", "zero3", "mics(4)", "hsdp", "amsp-7b", "amsp-13b", "amsp-30b"],
}
# The plan whose measured step calibrates the overhead per collective call: more calls than ddp
# and not among the plans checked on either mesh (ZeRO-2 inside a node).
CALL_PLAN = "p=1x1,g=2x1,os=2x1"
# The plan whose measured step calibrates the wait between compute segments (Cluster::sync_overhead_s)
# together with CALL_PLAN: parameters sharded inside a node (a gather before every unit's forward and
# backward), not among the plans checked (a group that spans nodes must fill them: plan.node_filling).
SYNC_PLAN = {"4x2": "p=2x1,g=4x1,os=4x1", "2x4": "p=2x1,g=2x1,os=2x2"}
# Runs of each compute calibration point (the rate and every --compute-turns point): the median.
CALIBRATION_REPEATS = 3
# Runs of each overhead calibration plan (CALL_PLAN, SYNC_PLAN): their typical_step.
CALIBRATION_PLAN_RUNS = 5
# How a plan's measured step is formed from its runs (typical_step): "mean" (the default) or
# "median" (the check before 2026-12-04's ninth session; --estimator reanalyses saved runs so).
STEP_ESTIMATOR = "mean"
MODES = {"overlap": [], "serial": ["--no-overlap"]}  # amsp-train's two schedules; predicted by
PREDICTION = {"overlap": "overlapped", "serial": "serial"}  # the planner's two step times


def sh(cmd, timeout):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout


def link_tx_total():
    return sum(int(line.split()[1]) for line in sh([CLUSTER, "counters"], 30).splitlines())


# amsp-train's progress line (examples/amsp_train/train_log.hpp); under MPI its --log-json
# writes nothing (main.cpp passes an empty path to every MPI rank), so the lines are parsed.
STEP_LINE = re.compile(r"step\s+(\d+)/(\d+)\s.*?([0-9.]+) ms \(compute\s+([0-9.]+), comm\s+([0-9.]+)\)")


def train(a, mesh, plan, steps, extra, launcher, batch=None):
    """Runs amsp-train; returns (its per-step records without the first and the last step, the
    final JSON record). The first step warms up; the last one runs the final validation."""
    cmd = launcher + [a.train, "--mesh", mesh, "--plan", plan, "--steps", str(steps), "--eval-every", "0",
                      "--eval-windows", "4", "--sample-bytes", "0",
                      "--global-batch", str(batch or a.global_batch), "--mpi-check-calls", a.mpi_check_calls] + \
        a.model_args + extra
    out = sh(cmd, 900)
    records = [{"step": int(m.group(1)), "step_ms": float(m.group(3)), "compute_ms": float(m.group(4)),
                "comm_ms": float(m.group(5))} for m in STEP_LINE.finditer(out)]
    return records[1:-1], json.loads(out.strip().splitlines()[-1])


def median_compute(steps, final):
    """The compute measurement: the median over every rank and the timed steps (2 .. n − 1) of
    amsp-train's step less its waits for communication, in seconds; rank 0's own records where the
    final record has no every-rank split (saved runs before it)."""
    ranks = final.get("ranks")
    if not ranks:
        return statistics.median(s["compute_ms"] for s in steps) / 1e3
    return statistics.median(t - c for r in ranks for t, c in zip(r["step_ms"][1:-1], r["comm_ms"][1:-1])) / 1e3


def calibrate(a, mesh, launcher):
    """The compute model's measurement, by the example itself: ddp without overlap on the cluster,
    at the global batch of the runs and at 2x it. amsp-train's compute (the step without its
    waits for communication, every rank's: median_compute) per step = a·samples per rank
    + update of all parameters; the planner fits a and the update rate (fit_compute_model). (A calibration with the ranks as
    threads of one process came out 2x slower per sample than the MPI ranks: other contention.)"""
    ranks, nodes = map(int, mesh.split("x"))
    points = []
    for batch in (a.global_batch, 2 * a.global_batch):
        # The rate every prediction scales with: the median of CALIBRATION_REPEATS runs (one run
        # of this ddp was 1.5x the others in the validation of 2026-12-03 17:20, 32.5 against
        # 17.6-21.2 ms per sequence, and set a whole case's compute). The 2x point (only the
        # --compute line mode reads it): one run.
        compute, (steps, final) = median_run(
            [(median_compute(*run), run)
             for run in (train(a, mesh, "ddp", 8, ["--backend", "mpi", "--no-overlap"], launcher, batch)
                         for _ in range(CALIBRATION_REPEATS if batch == a.global_batch else 1))])
        points.append((batch // (ranks * nodes), compute))
        if batch == a.global_batch:
            full = (points[-1], final)
            step = statistics.median(s["step_ms"] for s in steps) / 1e3
    # The overheads (Cluster::step_overhead_s or call_overhead_s, and sync_overhead_s): two plans
    # that are NOT among the plans checked, without overlap, CALIBRATION_PLAN_RUNS times each (one
    # run of a plan can be 1.4x another on this CPU: typical_step); overheads() fits them.
    def plan_runs(plan):  # each run's median step without overlap, runs of 12 steps
        return [statistics.median(s["step_ms"] for s in train(a, mesh, plan, 12, ["--backend", "mpi", "--no-overlap"],
                                                                launcher)[0]) / 1e3
                for _ in range(CALIBRATION_PLAN_RUNS)]
    call_runs, sync_runs = plan_runs(CALL_PLAN), plan_runs(SYNC_PLAN[mesh])
    return {"points": points, "ddp_step": step, "contention": contention_points(a, mesh, launcher, *full),
            "call_plan": CALL_PLAN, "call_plan_step": typical_step(call_runs), "call_plan_runs": call_runs,
            "sync_plan": SYNC_PLAN[mesh], "sync_plan_step": typical_step(sync_runs), "sync_plan_runs": sync_runs}


def calibration_step(cal, which):
    """The measured step of calibration plan `which` ("call" or "sync"): typical_step of its runs;
    runs saved before the runs were kept have the median of three only."""
    runs = cal.get(f"{which}_plan_runs")
    return typical_step(runs) if runs else cal[f"{which}_plan_step"]


def median_run(runs):
    """The (value, payload) pair of `runs` whose value is the median (the lower middle of an even
    count): the calibration keeps one real run, not a mean of several."""
    return sorted(runs, key=lambda r: r[0])[(len(runs) - 1) // 2]


def contention_points(a, mesh, launcher, full, full_final):
    """The same compute measurement (ddp without overlap, compute per sequence) with fewer ranks
    computing at once: amsp-train --compute-turns T computes each micro-batch in T turns, the other
    ranks waiting in a barrier (with mpi_yield_when_idle, as they wait on a link). `full` is the
    calibration point above (T = 1). Each point is labelled by the ranks computing at once measured
    in its own run with the estimator the model uses (measured_computing: from every rank's waits;
    at most 1 + (n − 1)/T), not by n/T: ranks staggered by the scheduler wait even with T = 1, and the
    model's k counts them the same way. Returns [[k, seconds per sequence], ...] for T = 1, 2, 4, ..., n
    (the planner's CpuContention, docs/planner-check-terms.md)."""
    ranks, nodes = map(int, mesh.split("x"))
    n = ranks * nodes
    samples, seconds = full
    out = [[measured_computing([{"final": full_final}], n), seconds / samples]]
    turns = 2
    while turns <= n:
        if n % turns == 0:
            # The median run of CALIBRATION_REPEATS by its compute, labelled with its own k.
            runs = []
            for _ in range(CALIBRATION_REPEATS):
                steps, final = train(a, mesh, "ddp", 8,
                                     ["--backend", "mpi", "--no-overlap", "--compute-turns", str(turns)], launcher)
                runs.append((median_compute(steps, final) / samples, measured_computing([{"final": final}], n)))
            seconds, k = median_run(runs)
            out.append([k, seconds])
        turns *= 2
    return out


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


def call_sizes(a, mesh, plans):
    """The buffer sizes of the plans' own collective calls (amsp-cluster-predict's "calls", groups
    of more than one rank), so that the profile times them instead of interpolating between its
    sizes: on 4x2 at 200 Mbit/s the 64 KiB -> 256 KiB segment of the AllGather rose with slope 1.46
    in log-log (docs/planner-check-terms.md, "The waits for peers overlap the transfer")."""
    out = sh([a.predict, "--mesh", mesh, "--plans", ";".join(plans), "--seconds-per-sample", "1e-3",
              "--global-batch", str(a.global_batch)] + a.model_args, 60)
    return sorted({int(c[4]) for p in map(json.loads, out.splitlines()) for c in p["calls"]
                   if c[2] * c[3] > 1 and c[4] > 8})


def profile(a, mesh, plans, path, gap_us=0):
    """amsp-profile on the cluster: back to back (gap_us = 0, the planner's profile), or every call
    after an idle gap (--gap-us; fewer calls: --profile-gap-iterations)."""
    ranks, nodes = map(int, mesh.split("x"))
    sizes = a.profile_sizes
    if a.profile_call_sizes == "on":
        sizes = ",".join(str(b) for b in sorted({int(x) for x in sizes.split(",")} | set(call_sizes(a, mesh, plans))))
    iterations = a.profile_gap_iterations if gap_us else a.profile_iterations
    sh([CLUSTER, "run", "--", "-np", str(ranks * nodes), a.profile, "--backend", "mpi", "--mesh", mesh,
        "--ops", "all_gather,reduce_scatter,all_reduce", "--plans", ";".join(plans), "--sizes", sizes,
        "--max-iterations", str(iterations), "--gap-us", str(gap_us), "--mpi-check-calls", a.mpi_check_calls,
        "--calls", PROFILE_CALLS, "--out", path], 1800)
    # Analytic figures for what the profile still lacks: bandwidth of the largest node-sized
    # AllGather, and per ring step the time of the smallest AllGather inside a node and over the
    # most nodes (on an oversubscribed CPU, mostly scheduling delay).
    entries = json.load(open(path))["entries"]

    def ag(pred):
        return sorted((e for e in entries if e["op"] == "all_gather" and pred(e["group"])), key=lambda e: e["bytes"])
    inside = ag(lambda g: g.endswith("x1")) or ag(lambda g: True)
    across = ag(lambda g: not g.endswith("x1")) or inside

    def ring_steps(e):
        p0, p1 = map(int, e["group"].split("x"))
        return max(p0 * p1 - 1, 1)
    return {"intra_gbytes": inside[-1]["busbw_gbps"],
            "intra_latency": inside[0]["seconds"] / ring_steps(inside[0]),
            "inter_latency": across[0]["seconds"] / ring_steps(across[0]) if nodes > 1 else 0.0}


def typical_step(runs):
    """A plan's measured step from its runs' median steps: their mean (STEP_ESTIMATOR "median": their
    median). Ranks that share a core settle, per run, into one of two schedules (docs/cluster.md,
    "Two schedules of ranks that share a core"): staggered, one rank computing while the others
    wait for the link, or in step, all computing at once. The step of one plan then comes in two
    modes: hsdp on 4x2 at 200 Mbit/s ran 71-77 or 90-104 ms per step, the slow mode in 42 of 135
    runs. A median of a few such runs jumps between the modes (drawn from those 135 runs: a
    relative spread of 9.0 % for the median of 3 and 7.8 % of 5, against 7.0 and 5.4 % for the
    mean); the mean estimates the expected step, which is what a training run's length is."""
    return statistics.median(runs) if STEP_ESTIMATOR == "median" else statistics.mean(runs)


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((p - mx) * (q - my) for p, q in zip(rx, ry))
    var = (sum((p - mx) ** 2 for p in rx) * sum((q - my) ** 2 for q in ry)) ** 0.5
    return cov / var if var else float("nan")


def slope(points):
    """Least-squares slope of y against x."""
    mx = statistics.mean(x for x, _ in points)
    my = statistics.mean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else float("nan")


def run_config(a, mesh, rate):
    ranks, nodes = map(int, mesh.split("x"))
    plans = a.plans.split(";") if a.plans else PLANS[mesh]
    tag = f"{mesh}-{rate}"
    print(f"=== {tag}: cluster up, calibration, profile", flush=True)
    sh([CLUSTER, "up", str(nodes), str(ranks), rate], 120)
    launcher = [CLUSTER, "run", "--", "-np", str(ranks * nodes)]
    calibration = calibrate(a, mesh, launcher)
    prof_path = os.path.join(a.work, f"profile-{tag}.json")
    links = profile(a, mesh, plans, prof_path)
    gap_path = os.path.join(a.work, f"profile-gap-{tag}.json")
    if a.profile_gap_us:
        profile(a, mesh, plans, gap_path, a.profile_gap_us)
    runs = {mode: {p: [] for p in plans} for mode in a.modes}
    for rep in range(a.repeats):
        steps = a.steps + 2 * rep  # different lengths: link bytes per step = slope over the repeats
        for mode in a.modes:
            for plan in plans[rep % len(plans):] + plans[:rep % len(plans)]:
                before = link_tx_total()
                records, final = train(a, mesh, plan, steps, ["--backend", "mpi"] + MODES[mode], launcher)
                runs[mode][plan].append({"steps": steps, "records": records, "link_bytes": link_tx_total() - before,
                                         "final": final})
                print(f"  {mode:7s} {plan:9s} rep {rep}: median step "
                      f"{statistics.median(r['step_ms'] for r in records):.1f} ms", flush=True)
    sh([CLUSTER, "down"], 60)
    return {"mesh": mesh, "rate": rate, "plans": plans, "calibration": calibration, "links": links,
            # How the nodes shared the host's CPUs (scripts/cluster.sh); runs saved before it have none.
            "cpus": os.environ.get("AMSP_CLUSTER_CPUS", "node"),
            # The token buckets' burst (scripts/cluster.sh): runs saved before the field had 64kb;
            # "rate" is cluster.sh's default since 2026-12-04 (1.5 ms of the rate, at least 18000 bytes).
            "burst": os.environ.get("AMSP_CLUSTER_BURST", "rate"),
            # How amsp-profile issued each collective; runs saved before 2026-12-04 have none (blocking).
            "profile_calls": PROFILE_CALLS,
            "profile": prof_path, **({"profile_gap": gap_path} if a.profile_gap_us else {}), "runs": runs,
            # The profiles themselves: the paths above are overwritten by the next run in the same
            # directory, and a saved run must reanalyse anywhere (embedded_profile).
            "profile_data": json.load(open(prof_path)),
            **({"profile_gap_data": json.load(open(gap_path))} if a.profile_gap_us else {})}


def analyze(a, config):
    """The planner's prediction next to the measurement of one configuration."""
    mesh, rate, plans, links = config["mesh"], config["rate"], config["plans"], config["links"]
    ranks, nodes = map(int, mesh.split("x"))
    compute_args = compute_model_args(a, config)
    overhead, sync = overheads(a, config, compute_args)
    predict = predict_command(a, config, plans, compute_args, overhead, sync)
    predictions = {p["name"]: p for p in map(json.loads, sh(predict, 60).splitlines())}
    tables = {}
    for mode, by_plan in config["runs"].items():
        rows = []
        for plan in plans:
            p, runs = predictions[plan], by_plan[plan]
            medians = [statistics.median(r["step_ms"] for r in run["records"]) / 1e3 for run in runs]
            compute = statistics.median(r["compute_ms"] for run in runs for r in run["records"]) / 1e3
            link = slope([(run["steps"], run["link_bytes"]) for run in runs]) / nodes if len(runs) > 1 else float("nan")
            rows.append({"plan": plan, "shape": p["plan"], "measured": typical_step(medians),
                         "repeats": medians, "spread": (max(medians) - min(medians)) / typical_step(medians),
                         "predicted": p[PREDICTION[mode]], "measured_compute": compute,
                         "predicted_compute": p["compute_serial" if mode == "serial" else "compute"] + p["update"],
                         "predicted_comm": p["communication"],
                         "computing_predicted": p["computing_serial" if mode == "serial" else "computing_overlapped"],
                         "computing_measured": measured_computing(runs, ranks * nodes),
                         "link_measured": link, "link_model": p["link_bytes_per_node"],
                         "calls": p["collective_calls"],
                         "engine_inter_x_ranks": runs[0]["final"]["expected_bytes_inter_per_step"] * ranks})
        tables[mode] = rows
    config["tables"] = tables
    if a.diagnose:
        # The same predictions with each overhead raised by 1 ms: the step's slope in each.
        base = {p["name"]: p for p in map(json.loads, sh(predict_command(a, config, plans, compute_args, 0, 0), 60).splitlines())}
        d_step = {p["name"]: p for p in map(json.loads, sh(predict_command(a, config, plans, compute_args, 1e-3, 0), 60).splitlines())}
        d_sync = {p["name"]: p for p in map(json.loads, sh(predict_command(a, config, plans, compute_args, 0, 1e-3), 60).splitlines())}
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
                       "contention": contention_args(a, config)[1:] or
                       ["off" if a.contention == "off" else "not measured: off"]}
    return config


def measured_computing(runs, n):
    """From every rank's split (amsp-train's final "ranks"; saved runs before it have none: nan):
    the ranks computing beside one rank, 1 + (n − 1)(1 − b), b the mean over ranks of the share of
    the step spent waiting, steps 2 .. n − 1 as in the records. Compare with the model's k."""
    shares = [c / t for run in runs for r in run["final"].get("ranks", [])
              for t, c in zip(r["step_ms"][1:-1], r["comm_ms"][1:-1]) if t > 0]
    return 1 + (n - 1) * (1 - statistics.mean(shares)) if shares else float("nan")


def compute_model_args(a, config):
    """The compute model given to the planner, from the calibration (ddp without overlap):
    line: the planner fits the points (fit_compute_model: seconds per sequence and per updated
      parameter) of the example's compute_ms (the step without its waits);
    origin (the default): seconds per sequence of the point at the runs' own batch (no
      extrapolation: under the load we measured, 4x the batch took 7 to 12x as long);
    step: the whole ddp step at the runs' batch, less what the planner prices for
      ddp's own communication: the compute as the slowest rank delivers it, waits for the others
      included. On an oversubscribed CPU a rank's own compute_ms is not what the group waits for:
      every collective waits for the last rank, descheduled more than rank 0 (measured: the steps
      missed 0.3 to 0.8 s with rank 0's compute, whatever the plan's number of collectives). Not
      the default: under load the one ddp step it rests on varied by 67 % between runs.
    Then the CPU contention points (contention_args), anchored at the same rate for k = n."""
    points = config["calibration"]["points"]
    return compute_rate_args(a, config, points) + contention_args(a, config)


def contention_args(a, config):
    """--contention for the planner when on and measured (saved runs before it have none)."""
    points = config["calibration"].get("contention")
    if a.contention == "off" or not points or len({k for k, _ in points}) < 2:
        return []
    return ["--contention", ",".join(f"{k:.4g}:{t:.4g}" for k, t in points)]


def compute_rate_args(a, config, points):
    """The compute rate (every rank computing) of compute_model_args's modes."""
    if a.compute == "line":
        return ["--calibration", ",".join(f"{b}:{t}" for b, t in points)]
    samples, seconds = points[0]
    if a.compute == "step" and "ddp_step" in config["calibration"]:
        ddp = json.loads(sh(predict_command(a, config, ["ddp"], ["--seconds-per-sample", "1e-12"]), 60))
        seconds = max(config["calibration"]["ddp_step"] - ddp["serial"], 1e-6)
    return ["--seconds-per-sample", str(seconds / samples), "--update-seconds-per-param", "0"]


def predict_command(a, config, plans, compute_args, call_overhead_s=0.0, sync_overhead_s=0.0):
    mesh, rate, links = config["mesh"], config["rate"], config["links"]
    return [a.predict, "--mesh", mesh, "--plans", ";".join(plans), *profile_args(a, config),
            "--node-gbit", str(rate_gbit(rate)), "--intra-gbytes", str(links["intra_gbytes"]),
            "--intra-latency", str(links["intra_latency"]), "--inter-latency", str(links["inter_latency"]),
            "--global-batch", str(a.global_batch), "--overlap-slowdown", str(a.overlap_slowdown),
            "--call-overhead" if a.overhead_unit == "call" else "--step-overhead", str(call_overhead_s),
            "--sync-overhead", str(sync_overhead_s), "--gather-scatter", a.gather_scatter, "--waits", a.waits] + \
        compute_args + \
        a.model_args


def profile_kind(a, config):
    """--profile-kind resolved for one case. auto (the default): back to back for a run whose
    nodes had CPUs of their own (config "cpus" == "node": scripts/cluster.sh's default since
    2026-12-03 21:45), else the gapped profile when the run measured one. The rule, written before
    any run had both: the profile that predicts better is the one the check prices with.
    Without per-node CPUs the gapped one did (2026-12-03 17:59: lower median error in 7 of 8
    cases; a call in training followed a compute segment and waits for descheduled peers); with
    them the back-to-back one does (the two pinned runs, 21:15 and 21:55: lower error in 13 of 20
    cases, higher in 5; Spearman higher in 12, lower in 5): a call now mostly follows another call of
    the same chain, and the gapped profile's idle 10 ms refill the token bucket, so each of its
    calls passes a free 64 KiB burst (5 ms at 100 Mbit/s) that a chain of calls does not get
    (docs/planner-check.md)."""
    if a.profile_kind == "auto":
        if config.get("cpus") == "node" or "profile_gap" not in config:
            return "back-to-back"
        return "gap"
    return a.profile_kind


def profile_args(a, config):
    """amsp-cluster-predict's profile options for profile_kind: back to back (--profile), gapped
    (amsp-profile --gap-us, measured since 2026-12-03's reanalysis; earlier runs have none), or
    split: back to back for the calls chained after other calls and gapped for the calls between
    two compute segments (--profile-after-compute, Cluster::profile_after_compute)."""
    kind = profile_kind(a, config)
    if kind in ("gap", "split") and "profile_gap" not in config:
        print(f"check.py: --profile-kind {kind}: the run of {config['mesh']} {config['rate']} has no gapped "
              "profile (measured before amsp-profile --gap-us, or with --profile-gap-us 0) [rule cli.value]",
              file=sys.stderr)
        sys.exit(2)
    if kind == "gap":
        return ["--profile", embedded_profile(config, "profile_gap")]
    if kind == "split":
        return ["--profile", embedded_profile(config, "profile"),
                "--profile-after-compute", embedded_profile(config, "profile_gap")]
    return ["--profile", embedded_profile(config, "profile")]


def embedded_profile(config, key):
    """The path of the run's profile `key`: the profile the run embedded (written once to a
    temporary file), else the path it was measured at (runs saved before embedding)."""
    if key + "_data" not in config:
        return config[key]
    if key + "_file" not in config:
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="amsp-profile-", delete=False) as out:
            json.dump(config[key + "_data"], out)
        atexit.register(os.unlink, out.name)
        config[key + "_file"] = out.name
    return config[key + "_file"]


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


def rate_gbit(rate):
    m = re.match(r"([0-9.]+)([kmgt]?)bit$", rate)
    return float(m.group(1)) * {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3}[m.group(2)]


def distinct_plans(rows):
    """One row per distinct plan: presets that resolve to the same p, g, os on the mesh and are
    priced the same (amsp-7b and amsp-13b on these meshes: both p=1x1,g=1x1,os=2x1) are one plan
    measured twice, not two plans. Counted as two, the noise between them decided the pick (the
    planner's pick "amsp-7b" against a measured best "amsp-13b", +5.9 and +11.7 % on 2x4 in the
    21:15 run, for the very same plan) and added a pair no model can order. Merged: the labels
    joined by "=", their repeats pooled, the measured step the typical_step of the pool."""
    merged = {}
    for r in rows:
        key = (r.get("shape", r["plan"]), r["predicted"])
        if key in merged:
            m = merged[key]
            m["plan"] += "=" + r["plan"]
            m["repeats"] = m["repeats"] + r["repeats"]
            m["measured"] = typical_step(m["repeats"])
        else:
            merged[key] = dict(r)
    return list(merged.values())


def summarize(rows, merge_identical=True):
    """The three targets, over the distinct plans (distinct_plans) unless merge_identical=False."""
    if merge_identical:
        rows = distinct_plans(rows)
    errors = [abs(r["predicted"] - r["measured"]) / r["measured"] for r in rows]
    pick = min(rows, key=lambda r: r["predicted"])
    best = min(rows, key=lambda r: r["measured"])
    return {"median_abs_error": statistics.median(errors),
            "spearman": spearman([r["predicted"] for r in rows], [r["measured"] for r in rows]),
            "pick": pick["plan"], "best": best["plan"], "pick_over_best": pick["measured"] / best["measured"] - 1}


def best_fit(rows, with_sync=True):
    """Diagnosis, not a prediction: the two overheads fitted to the checked plans' own measured
    steps (least squares of the relative error, neither negative): the best any calibration of the
    model's form could do on this measurement. Where it still misses a target, the form is wrong
    (a term is missing) or the measurement cannot separate the plans, not the calibration.
    with_sync=False (--sync-overhead 0) fits the overhead per call or ring step alone. The step is
    linearised between 0 and 1 ms of each overhead (--diagnose's slopes): exact where the waits add
    to the transfers (--waits add), an approximation where the longer counts (the default)."""
    ys = [(r["measured"] - r["diagnose"][0]) / r["measured"] for r in rows]
    cols = [[r["diagnose"][k] / r["measured"] for r in rows] for k in (1, 2)]

    def fit(ks):
        g = [[sum(p * q for p, q in zip(cols[i], cols[j])) for j in ks] for i in ks]
        h = [sum(p * y for p, y in zip(cols[i], ys)) for i in ks]
        if len(ks) == 1:
            return {ks[0]: h[0] / g[0][0] if g[0][0] else 0.0}
        det = g[0][0] * g[1][1] - g[0][1] * g[1][0]
        return {ks[0]: (h[0] * g[1][1] - g[0][1] * h[1]) / det, ks[1]: (g[0][0] * h[1] - g[1][0] * h[0]) / det} if det else {}
    w = fit([0, 1]) if with_sync else {k: max(0.0, v) for k, v in fit([0]).items()}
    if not w or min(w.values()) < 0:
        w = min(({k: max(0.0, v) for k, v in fit([k]).items()} for k in (0, 1)),
                key=lambda x: sum((y - sum(x.get(k, 0) * cols[k][i] for k in (0, 1))) ** 2 for i, y in enumerate(ys)))
    step_s, sync_s = w.get(0, 0.0), w.get(1, 0.0)
    fitted = [dict(r, predicted=r["diagnose"][0] + step_s * r["diagnose"][1] + sync_s * r["diagnose"][2]) for r in rows]
    return step_s, sync_s, summarize(fitted)


def separable_pairs(rows):
    """Pairs of plans whose repeats do not overlap (every run of one is faster than every run of
    the other: the measurement orders them), and how many of those the prediction orders the same
    way. Plans whose repeats overlap cannot be ranked by this measurement; the plain Spearman
    counts them all and stays the target."""
    pairs = right = 0
    for i, p in enumerate(rows):
        for q in rows[i + 1:]:
            fast, slow = (p, q) if max(p["repeats"]) < min(q["repeats"]) else (q, p)
            if max(fast["repeats"]) < min(slow["repeats"]):
                pairs += 1
                right += fast["predicted"] < slow["predicted"]
    return pairs, right


def bootstrap_floor(rows, draws=2000, seed=1):
    """What a model that knew every plan's expected step (taken as the measured one) would score if
    the plans were measured again: each draw resamples every plan's runs with replacement and forms
    its step as the measurement does (typical_step). Returns the means over the draws of the median
    |error| and of Spearman, and the shares of draws with Spearman >= 0.9 and with the pick within
    5 % of the best: the targets' own ceiling on this measurement (resampling n runs understates
    the noise by (n - 1) / n, so the ceiling is if anything too high)."""
    rng = random.Random(seed)
    model = [r["measured"] for r in rows]
    pick = min(range(len(rows)), key=lambda i: model[i])
    errors, rhos, rho_ok, pick_ok = [], [], 0, 0
    for _ in range(draws):
        again = [typical_step([rng.choice(r["repeats"]) for _ in r["repeats"]]) for r in rows]
        errors.append(statistics.median(abs(m / x - 1) for m, x in zip(model, again)))
        rhos.append(spearman(model, again))
        rho_ok += rhos[-1] >= 0.9
        pick_ok += again[pick] / min(again) - 1 <= 0.05
    return statistics.mean(errors), statistics.mean(rhos), rho_ok / draws, pick_ok / draws


def print_tables(config):
    m, links = config["model"], config["links"]
    print(f"\n#### {config['mesh']} (ranks per node x nodes), {config['rate']} per node link\n")
    print(f"Compute model (calibration points {[(b, round(t, 4)) for b, t in config['calibration']['points']]}): "
          f"{m['seconds_per_sample'] * 1e3:.2f} ms per sequence per rank, {m['update_seconds_per_param'] * 1e9:.1f} ns "
          f"per updated parameter; {m['call_overhead'] * 1e3:.2f} ms per collective {m['overhead_unit']} (from {m['call_overhead_from']}), "
          f"{m['sync_overhead'] * 1e3:.2f} ms per call between compute segments (from {m['sync_overhead_from']}); "
          f"CPU contention, computing ranks:seconds per sequence: {m['contention'][0]}. Analytic links where the profile has no entry: {links['intra_gbytes']:.2f} GB/s "
          f"inside a node, {links['intra_latency'] * 1e3:.2f} / {links['inter_latency'] * 1e3:.2f} ms per intra / "
          f"inter ring step.\n")
    for mode, rows in config["tables"].items():
        print(f"{mode} (amsp-train {' '.join(MODES[mode]) or 'default'}; planner's "
              f"{'step with overlap' if mode == 'overlap' else 'step without overlap'}):\n")
        print(f"| plan | p, g, os | measured s/step ({STEP_ESTIMATOR} of runs; spread) | predicted | error | compute measured / predicted | "
              "link B/step/node measured | link model | engine inter-node B x R |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            lm = r["link_model"]
            link_err = f" ({100 * (r['link_measured'] / lm - 1):+.1f} %)" if lm else ""
            print(f"| {r['plan']} | {r['shape']} | {r['measured']:.3f} ({100 * r['spread']:.0f} %) | "
                  f"{r['predicted']:.3f} | {100 * (r['predicted'] / r['measured'] - 1):+.0f} % | "
                  f"{r['measured_compute']:.3f} / {r['predicted_compute']:.3f} | {r['link_measured']:.0f} | "
                  f"{lm:.0f}{link_err} | {r['engine_inter_x_ranks']:.0f} |")
        if any(r["computing_predicted"] > 0 or r["computing_measured"] == r["computing_measured"] for r in rows):
            print("\ncomputing ranks beside one rank (CPU contention), predicted / from every rank's waits: " + ", ".join(
                f"{r['plan']} {r['computing_predicted']:.1f} / {r['computing_measured']:.1f}" for r in rows))
        s, distinct = summarize(rows), distinct_plans(rows)
        # Which term is wrong: the part of the step the model misses, against the number of
        # collective calls per step (a per-call cost the back-to-back profile does not see).
        excess = [r["measured"] - r["predicted"] for r in rows]
        calls = [r["calls"] for r in rows]
        per_call = sum(e * c for e, c in zip(excess, calls)) / sum(c * c for c in calls)
        corr = statistics.correlation(calls, excess) if len(set(calls)) > 1 else float("nan")
        print(f"\nmissed time per step vs collective calls per step: {per_call * 1e3:+.1f} ms per call "
              f"(least squares through 0), correlation {corr:+.2f}")
        if "diagnose" in rows[0]:
            # The same for the model without its overheads, against the counts each overhead prices.
            bare = [r["measured"] - r["diagnose"][0] for r in rows]
            print("missed time per step of the model without overheads, correlation with: " + ", ".join(
                f"{name} {statistics.correlation([r['diagnose'][k] for r in rows], bare):+.2f}"
                if len({r['diagnose'][k] for r in rows}) > 1 else f"{name} n/a"
                for name, k in ((f"{config['model']['overhead_unit']}s", 1), ("calls between compute segments", 2))))
        amsp = [r for r in distinct if r["plan"].startswith("amsp-")]
        peers = [r for r in distinct if r["plan"] == "zero3" or r["plan"].startswith("mics")]
        if amsp and peers:
            best = min(amsp, key=lambda r: r["measured"])
            print("paper's claim (the best AMSP preset vs ZeRO-3 and MiCS), measured (predicted): " + ", ".join(
                f"{best['plan']} {best['measured']:.3f} s ({best['predicted']:.3f}) vs {r['plan']} {r['measured']:.3f} s "
                f"({r['predicted']:.3f}): {r['measured'] / best['measured']:.2f}x ({r['predicted'] / best['predicted']:.2f}x)"
                for r in peers))
        print(f"median |error| {100 * s['median_abs_error']:.1f} % (target <= 15 %), Spearman {s['spearman']:.2f} "
              f"(>= 0.9), planner's pick {s['pick']} vs measured best {s['best']}: {100 * s['pick_over_best']:+.1f} % "
              f"(<= 5 %)")
        if len(distinct) < len(rows):
            merged = ", ".join(r["plan"] for r in distinct if "=" in r["plan"])
            labelled = summarize(rows, merge_identical=False)
            print(f"(one plan under two labels: {merged}, counted once above; counted per label: median |error| "
                  f"{100 * labelled['median_abs_error']:.1f} %, Spearman {labelled['spearman']:.2f}, pick "
                  f"{labelled['pick']} vs measured best {labelled['best']}: {100 * labelled['pick_over_best']:+.1f} %)")
        pairs, right = separable_pairs(distinct)
        floor_error, floor_rho, rho_share, pick_share = bootstrap_floor(distinct)
        print(f"separable pairs (repeats do not overlap): {pairs} of {len(distinct) * (len(distinct) - 1) // 2}, "
              f"ordered right by the planner: {right}; a model exact in expectation, measured again (bootstrap "
              f"of the runs): median |error| {100 * floor_error:.1f} %, Spearman {floor_rho:.2f} (>= 0.9 in "
              f"{100 * rho_share:.0f} % of draws), pick within 5 % in {100 * pick_share:.0f} % of draws")
        if "diagnose" in rows[0]:
            step_s, sync_s, f = best_fit(rows, with_sync=config["model"]["sync_overhead_from"] != "--sync-overhead")
            print(f"diagnosis (overheads fitted to these plans' own steps, not a prediction): {step_s * 1e3:.2f} ms per "
                  f"{config['model']['overhead_unit']}, {sync_s * 1e3:.2f} ms between compute segments: median |error| "
                  f"{100 * f['median_abs_error']:.1f} %, Spearman {f['spearman']:.2f}, pick {100 * f['pick_over_best']:+.1f} %")
        print()


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
    ap.add_argument("--repeats", type=int, default=5,
                    help="runs of each plan and schedule (interleaved); the measured step is their typical_step")
    ap.add_argument("--estimator", choices=["mean", "median"], default="mean",
                    help="a plan's measured step from its runs: mean (default) or median (the check before "
                         "2026-12-04's ninth session; for reanalysing saved runs as they were read then)")
    ap.add_argument("--steps", type=int, default=10, help="steps of the first repeat (+2 per repeat)")
    ap.add_argument("--mpi-check-calls", choices=["on", "off"], default="off",
                    help="amsp-train's and amsp-profile's MPI argument check: a small MPI_Allreduce before every "
                         "collective, which on this oversubscribed CPU made steps 20-50 %% slower (measured "
                         "side by side); off, as a timing run would be")
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--model", default="--context 64 --width 64 --heads 4 --layers 2",
                    help="amsp-train's model options (also given to the planner)")
    ap.add_argument("--overlap-slowdown", type=float, default=1.0,
                    help="the planner's kappa: 1 = communication hides behind no compute (measured on this "
                         "cluster: the same cores move the bytes, and Open MPI progresses nonblocking "
                         "collectives only inside MPI calls); 0 = hidden for free")
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
    ap.add_argument("--overhead-unit", choices=["call", "step"], default="step",
                    help="the overhead counts once per collective call (Cluster::call_overhead_s) or once per "
                         "step of its ring (Cluster::step_overhead_s)")
    ap.add_argument("--gather-scatter", choices=["recursive", "ring"], default="ring",
                    help="hand-overs the per-step overhead is paid for in AllGather and ReduceScatter: "
                         "ring = n - 1 (default); recursive = ceil(log2 n), the hand-overs of the recursive "
                         "doubling / halving scripts/cluster.sh pins (predicts worse: docs/planner-check.md)")
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
    ap.add_argument("--profile-kind", choices=["auto", *PROFILE_KINDS], default="auto",
                    help="the profile the planner prices with; split: back to back for chained calls, gapped for "
                         "calls between compute segments; auto: back to back for runs with a CPU block per node "
                         "(the default cluster), else the gapped one when the run measured it (the other kinds' "
                         "targets are printed too, when the run has both profiles)")
    ap.add_argument("--profile-call-sizes", choices=["on", "off"], default="on",
                    help="also profile the plans' own call sizes (call_sizes), not only --profile-sizes")
    ap.add_argument("--out", default="cluster-check.json")
    ap.add_argument("--reanalyze", default="", help="a saved --out file (or its .xz, as bench/data keeps them): predict "
                                                    "and print again, measure nothing")
    a = ap.parse_args()
    global STEP_ESTIMATOR
    STEP_ESTIMATOR = a.estimator
    a.train = os.path.join(a.build, "examples", "amsp_train", "amsp-train")
    a.profile = os.path.join(a.build, "tools", "amsp_profile", "amsp-profile")
    a.predict = os.path.join(a.build, "tests", "cluster", "amsp-cluster-predict")
    a.model_args = a.model.split()
    a.modes = a.modes.split(",")
    a.work = os.path.dirname(os.path.abspath(a.out))
    if a.reanalyze:
        for c in load_run(a.reanalyze):
            print_tables(analyze(a, c))
            gap_summary(a, c)
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
