"""The measurement of the cluster check (scripts/cluster/check.py): brings the emulated cluster up
(scripts/cluster.sh) and runs amsp-train under MPI for the compute model's calibration (its rate,
its CPU contention points, the overhead calibration plans), measures the bandwidth profiles with
amsp-profile (check_profiles.py), then runs every plan in each schedule, counting the bytes the node links carried
(run_config: the record of one configuration that --out saves and --reanalyze reads)."""
import json
import os
import re
import statistics
import sys
import tempfile
import time

# The programs and how the check runs them (re-exported: check.py, check_args.py and the scripts
# beside them import them from here).
from check_programs import CLUSTER, PREDICT, PROFILE, ROOT, TRAIN, leave_through_finally_on_sigterm, \
    program_failure, sh, unbuilt, words_of  # noqa: F401
from check_profiles import PROFILE_CALLS, analytic_links, profiles
from check_stats import busy_share, measured_computing, median_compute, median_update, typical_step
from trace_calls import load as load_traces
from trace_phases import rank_steps, rank_time


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
# A host busier than this with other work before a configuration gets a warning: on a quiet host
# the check's figures reproduce (docs/planner-check-quiet-host.md).
BUSY_WARNING = 0.10
# Runs of each compute calibration point (the rate and every --compute-turns point): the median.
CALIBRATION_REPEATS = 3
# amsp-train's two schedules (check.py's PREDICTION). The planner's serial step hides nothing, so the
# serial runs put the engine on the caller's thread too: with --no-overlap alone the async engine's
# worker still reduces each bucket while the lower blocks' backward runs, which under an emulated
# accelerator (--train-args '--device-ms-per-sequence X', a sleep that frees the cores) really hides
# the reductions (a smoke run, 2026-12-04, 4x2 at 1 Gbit/s: ddp 38 ms measured against 42 predicted serial). Runs
# saved before this (2026-12-04's tenth session) ran serial with the async engine.
MODES = {"overlap": [], "serial": ["--no-overlap", "--engine-space", "serial"]}


def link_tx_total():
    return sum(int(line.split()[1]) for line in sh([CLUSTER, "counters"], 30).splitlines())


# amsp-train's progress line (examples/amsp_train/train_log.hpp); under MPI its --log-json
# writes nothing (main.cpp passes an empty path to every MPI rank), so the lines are parsed.
STEP_LINE = re.compile(r"step\s+(\d+)/(\d+)\s.*?([0-9.]+) ms \(compute\s+([0-9.]+), comm\s+([0-9.]+)\)")


# The check's model (amsp-train's options; check.py --model): small enough for 8 ranks on 2 cores.
DEFAULT_MODEL = "--context 64 --width 64 --heads 4 --layers 2"


def train(a, mesh, plan, steps, extra, launcher, batch=None):
    """Runs amsp-train; returns (its per-step records without the first and the last step, the
    final JSON record). The first step warms up; the last one runs the final validation."""
    cmd = launcher + [a.train, "--mesh", mesh, "--plan", plan, "--steps", str(steps), "--eval-every", "0",
                      "--eval-windows", "4", "--sample-bytes", "0",
                      "--global-batch", str(batch or a.global_batch), "--mpi-check-calls", a.mpi_check_calls] + \
        a.model_args + a.train_args + extra
    out = sh(cmd, 900)
    records = [{"step": int(m.group(1)), "step_ms": float(m.group(3)), "compute_ms": float(m.group(4)),
                "comm_ms": float(m.group(5))} for m in STEP_LINE.finditer(out)]
    return records[1:-1], json.loads(out.strip().splitlines()[-1])


def traced_entry_skew(a, mesh, launcher, plans, steps=20):
    """{plan: seconds} after the first rank the last one enters a step: the median over the steps
    after the first two (trace_phases.rank_time) of an amsp-train --timeline run with overlap of
    each of `plans`, the calibration's (plans the check does not price, as for κ and the stall).
    The planner's Cluster::entry_skew_s (check.py's entry_skew). A run of its own: tracing adds
    0.4-1 ms to a step (docs/planner-check-traced-terms.md). Each plan's traces overwrite the one
    before (one file per rank, the same ranks); the directory goes with them."""
    skew = {}
    with tempfile.TemporaryDirectory(dir=a.work) as d:
        prefix = os.path.join(d, "entry")
        for plan in plans:
            train(a, mesh, plan, steps, ["--backend", "mpi", *MODES["overlap"], "--timeline", prefix], launcher)
            skew[plan] = rank_time([rank_steps(events) for events in load_traces(prefix)], 2)[0] / 1e3
    return skew


def calibrate(a, mesh, launcher):
    """The compute model's measurement, by the example itself: ddp without overlap on the cluster,
    at the global batch of the runs and at 2x it. amsp-train's compute (the step without its
    waits for communication, every rank's: median_compute) per step = a·samples per rank (the
    line mode's fit, fit_compute_model, also takes an intercept). amsp-train counts its step() among the waits,
    so the update of all parameters is measured apart, from the same run (median_update). (A
    calibration with the ranks as threads of one process came out 2x slower per sample than the
    MPI ranks: other contention.)"""
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
    # The overheads' calibration plans run among the checked plans' runs (run_config).
    return {"points": points, "ddp_step": step, "update_s": median_update(full[1]),
            "update_serial_s": measure_serial_update(a, mesh, launcher),
            "contention": contention_points(a, mesh, launcher, *full)}


def measure_serial_update(a, mesh, launcher):
    """DDP's update as one rank runs it: the median over CALIBRATION_REPEATS runs of ddp in the
    serial engine (MODES["serial"]) of their update_ms (median_update). In the asynchronous engine
    step() also waits for the engine's worker (update_s above: 0.33-0.51 ms on 2x4 against
    0.17-0.22 here), and the ranks' updates take turns on a shared core, which the planner prices
    apart (check_predict.update_turns; docs/planner-check-update-turns.md)."""
    return statistics.median(median_update(train(a, mesh, "ddp", 8, ["--backend", "mpi"] + MODES["serial"], launcher)[1])
                             for _ in range(CALIBRATION_REPEATS))


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


def host_busy(seconds=2.0):
    """The share of the host's CPU time that went to anything over `seconds` (/proc/stat), read
    with nothing of the check running (before a configuration, and after it with the cluster
    down): other work on the machine then (a build, a test suite, an analysis) disturbs the
    measured steps and profiles (docs/planner-check-quiet-host.md). A disturbance that starts and
    ends within a configuration is not seen."""
    with open("/proc/stat") as f:
        before = f.readline()
    time.sleep(seconds)
    with open("/proc/stat") as f:
        return busy_share(before, f.readline())


def warn_if_busy(share, when):
    if share > BUSY_WARNING:
        print(f"  WARNING: the host was {100 * share:.0f} % busy {when} with nothing of the check running: "
              "other work on this machine disturbs the figures of this configuration", file=sys.stderr, flush=True)


def run_config(a, mesh, rate):
    ranks, nodes = map(int, mesh.split("x"))
    plans = a.plans.split(";") if a.plans else PLANS[mesh]
    tag = f"{mesh}-{rate}"
    print(f"=== {tag}: cluster up, calibration, profile", flush=True)
    busy_before = host_busy()
    warn_if_busy(busy_before, f"before {tag}")
    sh([CLUSTER, "up", str(nodes), str(ranks), rate], 120)
    burst = re.search(r"token-bucket burst (\S+);", sh([CLUSTER, "status"], 30)).group(1)
    launcher = [CLUSTER, "run", "--", "-np", str(ranks * nodes)]
    calibration = calibrate(a, mesh, launcher)
    prof_path = os.path.join(a.work, f"profile-{tag}.json")
    gap_path = os.path.join(a.work, f"profile-gap-{tag}.json")
    paced_path = os.path.join(a.work, f"profile-paced-{tag}.json")
    passes, gap_passes, paced_passes = profiles(a, mesh, plans, prof_path, gap_path, paced_path)
    links = analytic_links(json.load(open(prof_path))["entries"], nodes)
    runs = {mode: {p: [] for p in plans} for mode in a.modes}
    # The overheads (Cluster::step_overhead_s or call_overhead_s, and sync_overhead_s; overheads()
    # fits them): the steps without overlap of two plans that are NOT among the plans checked, run
    # once in every repeat, among the checked plans' runs. The schedule the ranks of a node fall
    # into drifts over minutes (docs/cluster.md, "Two schedules of ranks that share a core"); run
    # before the checked plans, as until 2026-12-04's ninth session, the calibration saw other
    # minutes than the plans it prices (2x4 at 1 Gbit/s: CALL_PLAN 60-63 ms in all five runs, then
    # ddp 61-96 ms among the checked runs).
    # The overlap slowdown κ (check.py's overlap_slowdown) from CALL_PLAN's step with overlap, run
    # the same way (since 2026-12-04's tenth session), and the stall after a gather inside a node
    # (check.py's gather_stall) from SYNC_PLAN's (since 2026-12-05's nineteenth session).
    calibration_runs = {(CALL_PLAN, "serial"): [], (SYNC_PLAN[mesh], "serial"): [], (CALL_PLAN, "overlap"): [],
                        (SYNC_PLAN[mesh], "overlap"): []}
    plan_records = {}  # "PLAN MODE": the runs of calibration_runs, records and final line kept
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
        for plan, mode in sorted(calibration_runs, reverse=rep % 2 == 1):
            records, final = train(a, mesh, plan, steps, ["--backend", "mpi"] + MODES[mode], launcher)
            calibration_runs[plan, mode].append(statistics.median(r["step_ms"] for r in records) / 1e3)
            plan_records.setdefault(f"{plan} {mode}", []).append({"steps": steps, "records": records, "final": final})
            print(f"  calibration {plan} {mode} rep {rep}: median step "
                  f"{1e3 * calibration_runs[plan, mode][-1]:.1f} ms", flush=True)
    for which, plan in (("call", CALL_PLAN), ("sync", SYNC_PLAN[mesh])):
        calibration.update({f"{which}_plan": plan, f"{which}_plan_runs": calibration_runs[plan, "serial"],
                            f"{which}_plan_step": typical_step(calibration_runs[plan, "serial"])})
    calibration["call_plan_overlap_runs"] = calibration_runs[CALL_PLAN, "overlap"]
    calibration["sync_plan_overlap_runs"] = calibration_runs[SYNC_PLAN[mesh], "overlap"]
    calibration["plan_runs_interleaved"] = True  # saved runs before run l (2026-12-04): run first
    # Their whole records as the checked plans' (compute, every rank's split; since 2026-12-06's
    # twenty-eighth session, for a model of each plan's compute: docs/planner-check-floor.md).
    calibration["plan_records"] = plan_records
    # The ranks' entry skew (check.py's entry_skew), traced after the timed runs (since 2026-12-06's
    # twenty-fourth session; docs/planner-check-entry-skew.md).
    calibration["entry_skew_traced"] = traced_entry_skew(a, mesh, launcher, [CALL_PLAN, SYNC_PLAN[mesh]])
    print("  calibration entry skew: " + ", ".join(f"{plan} {1e3 * s:.2f} ms"
                                                   for plan, s in calibration["entry_skew_traced"].items()), flush=True)
    sh([CLUSTER, "down"], 60)
    busy_after = host_busy()
    warn_if_busy(busy_after, f"after {tag}")
    print(f"  host: {100 * busy_before:.0f} % busy before, {100 * busy_after:.0f} % after", flush=True)
    return {"mesh": mesh, "rate": rate, "plans": plans, "calibration": calibration, "links": links,
            # How the nodes shared the host's CPUs (scripts/cluster.sh); runs saved before it have none.
            "cpus": os.environ.get("AMSP_CLUSTER_CPUS", "node"),
            # amsp-train's options beyond the model's (check.py --train-args); runs saved before it: none.
            "train_args": " ".join(a.train_args),
            # The workload the planner prices (runs saved before these fields: check.py's defaults).
            "global_batch": a.global_batch, "model_args": " ".join(a.model_args),
            "serial_args": " ".join(MODES["serial"]),  # runs saved before it: --no-overlap alone
            # The token buckets' burst as `cluster.sh status` read it (bytes, or AMSP_CLUSTER_BURST as
            # given). Runs saved before the field had 64kb; "rate" was cluster.sh's default from
            # 2026-12-04 until commit a3d69dd on 2026-12-05 (1.5 ms of the rate, at least 18000 bytes).
            "burst": burst,
            # How amsp-profile issued each collective; runs saved before 2026-12-04 have none (blocking).
            "profile_calls": PROFILE_CALLS,
            "profile": prof_path, **({"profile_gap": gap_path} if a.profile_gap_us else {}), "runs": runs,
            # The profiles themselves: the paths above are overwritten by the next run in the same
            # directory, and a saved run must reanalyse anywhere (embedded_profile).
            "profile_data": json.load(open(prof_path)),
            **({"profile_gap_data": json.load(open(gap_path))} if a.profile_gap_us else {}),
            # Each pass the profiles above are the median of (runs saved before 2026-12-05's
            # eighteenth session: one pass, no such fields); the host's load around it (host_busy).
            "profile_passes": passes, **({"profile_gap_passes": gap_passes} if a.profile_gap_us else {}),
            # The paced AllReduce profile (Cluster::profile_paced; runs saved before 2026-12-07's
            # thirty-sixth session have none) and its passes.
            **({"profile_paced": paced_path, "profile_paced_data": json.load(open(paced_path)),
                "profile_paced_passes": paced_passes} if paced_passes else {}),
            "host": {"busy_before": busy_before, "busy_after": busy_after, "cpus": os.cpu_count(),
                     "cpu": cpu_model()}}


def cpu_model():
    """The host's CPU model as /proc/cpuinfo names it (hosts differ: docs/planner-check-quiet-host.md)."""
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
