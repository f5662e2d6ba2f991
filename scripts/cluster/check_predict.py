"""The planner's command for one configuration of the cluster check (scripts/cluster/check.py):
amsp-cluster-predict's options from a saved run: the compute model from the calibration (its
rate and CPU contention points), the profile kind and the profile files, the links, the
workload (batch, model) the run trained. No measurement and no analysis here."""
import atexit
import json
import os
import re
import sys
import tempfile

from check_measure import sh
from check_stats import median_update

# The profile kinds the planner can price with (--profile-kind, besides auto): back to back, gapped,
# or split (back to back for chained calls, gapped for the calls between compute segments).
PROFILE_KINDS = ("back-to-back", "gap", "split")


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
    """The compute rate (every rank computing) of compute_model_args's modes, and the update's
    (update_seconds)."""
    if a.compute == "line":
        return ["--calibration", ",".join(f"{b}:{t}" for b, t in points)]
    samples, seconds = points[0]
    update_s, _ = update_seconds(a, config)
    update = ["--update-seconds-per-param", repr(update_s / model_parameters(config)),
              "--update-turns", str(update_turns(a, config)[0])]
    if a.compute == "step" and "ddp_step" in config["calibration"]:
        ddp = json.loads(sh(predict_command(a, config, ["ddp"], ["--seconds-per-sample", "1e-12"] + update), 60))
        seconds = max(config["calibration"]["ddp_step"] - ddp["serial"], 1e-6)
    return ["--seconds-per-sample", str(seconds / samples)] + update


def update_seconds(a, config):
    """(seconds of the optimizer update of every parameter on one rank, where it comes from):
    none under --compute line (its fit takes the update as the intercept), else --update-seconds
    when given, else the calibration's measurement: ddp's update in the serial engine (amsp-train's
    update_ms, check_measure.measure_serial_update; since 2026-12-08), the update as one rank runs it, its
    turns priced apart (update_turns). Runs saved before it: the same measurement from ddp's own
    runs without overlap, which ran in the serial engine (check_measure.MODES) and take the same
    update_ms; their steps are what the check scores, but the update is 0.2-0.5 % of them and not what
    the step's other terms are fitted on. Runs saved before those: the calibration's ddp without
    overlap in the asynchronous engine (update_s: its step() also waits for the engine's worker,
    0.33-0.51 ms on 2x4 against 0.17-0.22 in the serial engine), turns not priced; else 0. The
    planner prices a plan's update as this times 1 / s_os (step_model.hpp). amsp-train counts
    step() among its waits, so the compute the calibration measures (the step less its waits)
    leaves the update out: without this term no plan paid for its update, and DDP's, all
    parameters on every rank, is the largest (docs/planner-check-phases.md, "The update")."""
    if a.compute == "line":
        return 0.0, "fitted to the calibration points: --compute line"
    if a.update_seconds is not None:
        return a.update_seconds, "from --update-seconds"
    source = serial_update(config)
    if source:
        return source
    measured = config["calibration"].get("update_s")
    if measured is None:
        return 0.0, "not measured: 0"
    return measured, f"from ddp's update without overlap, {measured * 1e3:.2f} ms"


def serial_update(config):
    """(seconds, where from) of ddp's update in the serial engine: the calibration's (update_serial_s)
    or, for runs saved before it, the median update_ms of ddp's serial runs (check_stats.median_update
    over every rank and timed step of every repeat); None when neither was measured."""
    measured = config["calibration"].get("update_serial_s")
    if measured is not None:
        return measured, f"from ddp's update in the serial engine, {measured * 1e3:.2f} ms"
    runs = config.get("runs", {}).get("serial", {}).get("ddp", [])
    ranks = [r for run in runs for r in run.get("final", {}).get("ranks", []) if "update_ms" in r]
    if not ranks:
        return None
    measured = median_update({"ranks": ranks})
    return measured, f"from ddp's update in its serial runs, {measured * 1e3:.2f} ms (saved before the calibration took it)"


def update_turns(a, config):
    """(ranks whose updates run one after another on a core, where it comes from): --update-turns
    when given; else, when the update is the serial engine's (serial_update: the update as one rank
    runs it), the ranks per host CPU, ⌈ranks / CPUs⌉ (every node's ranks share the host's CPUs:
    scripts/cluster.sh); 1 otherwise (an update measured with waits in it, or runs saved without
    the host's CPU count). ComputeModel::update_turns; docs/planner-check-update-turns.md."""
    if a.update_turns is not None:
        return a.update_turns, "--update-turns"
    if a.compute == "line" or a.update_seconds is None and not serial_update(config):
        return 1, "1: the update measured with the engine's waits"
    cpus = config.get("host", {}).get("cpus")
    if not cpus:
        return 1, "1: the host's CPUs not recorded"
    ranks, nodes = map(int, config["mesh"].split("x"))
    return max(1, -(-ranks * nodes // cpus)), f"{ranks * nodes} ranks on {cpus} CPUs"


def model_parameters(config):
    """The trained model's parameter count, from any of the run's final records."""
    for by_plan in config["runs"].values():
        for runs in by_plan.values():
            for run in runs:
                return run["final"]["parameters"]
    raise ValueError("a run without any training run: no parameter count")


def predict_command(a, config, plans, compute_args, call_overhead_s=0.0, sync_overhead_s=0.0, kappa=0.0,
                    gather_stall_s=0.0, entry_skew_s=0.0, overlap_call_s=0.0):
    """amsp-cluster-predict's command for `plans`; `kappa` (the overlap slowdown), `gather_stall_s`,
    `entry_skew_s` and `overlap_call_s` only change the step with overlap (check.py's
    overlap_slowdown, gather_stall, entry_skew and overlap_call resolve them)."""
    mesh, rate, links = config["mesh"], config["rate"], config["links"]
    return [a.predict, "--mesh", mesh, "--plans", ";".join(plans), *profile_args(a, config),
            "--node-gbit", str(rate_gbit(rate)), "--intra-gbytes", str(links["intra_gbytes"]),
            "--intra-latency", str(links["intra_latency"]), "--inter-latency", str(links["inter_latency"]),
            "--global-batch", str(config.get("global_batch", a.global_batch)),
            "--overlap-slowdown", str(kappa), "--gather-stall", str(gather_stall_s), "--entry-skew", str(entry_skew_s),
            "--overlap-call", str(overlap_call_s),
            "--call-overhead" if a.overhead_unit == "call" else "--step-overhead", str(call_overhead_s),
            "--sync-overhead", str(sync_overhead_s), "--gather-scatter", a.gather_scatter, "--waits", a.waits,
            "--stagger", a.stagger, "--arrival-spread", a.arrival_spread,
            "--chain-wait", a.chain_wait] + \
        compute_args + \
        (config["model_args"].split() if "model_args" in config else a.model_args)


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
    (docs/planner-check.md).
    Since 2026-12-04's thirteenth session split for such runs when they have both profiles: the
    model now knows which calls follow compute in the engine's schedule (a unit's last-micro-batch
    reductions too, CommTerm::after_compute; the overlapped step decides per call whether it
    queued), and split prices those with the gapped profile, the chained ones back to back
    (docs/planner-check-accelerator.md, "Which calls follow compute, and two streams on one
    link": runs s and t)."""
    if a.profile_kind == "auto":
        if "profile_gap" not in config:
            return "back-to-back"
        return "split" if config.get("cpus") == "node" else "gap"
    return a.profile_kind


def profile_args(a, config):
    """amsp-cluster-predict's profile options for profile_kind: back to back (--profile), gapped
    (amsp-profile --gap-us, measured since 2026-12-03's reanalysis; earlier runs have none), or
    split: back to back for the calls chained after other calls and gapped for the calls between
    two compute segments (--profile-after-compute, Cluster::profile_after_compute); with gap or
    split also the paced profile (--profile-paced) when the run measured one."""
    kind = profile_kind(a, config)
    if kind in ("gap", "split") and "profile_gap" not in config:
        print(f"check.py: --profile-kind {kind}: the run of {config['mesh']} {config['rate']} has no gapped "
              "profile (measured before amsp-profile --gap-us, or with --profile-gap-us 0) [rule cli.value]",
              file=sys.stderr)
        sys.exit(2)
    # The AllReduces after compute over whole nodes, from the paced profile when the run has one
    # and --paced-allreduce is on (Cluster::profile_paced); with the profiles of calls after compute only.
    paced = ["--profile-paced", embedded_profile(config, "profile_paced")] \
        if kind in ("gap", "split") and "profile_paced" in config and a.paced_allreduce == "on" else []
    if kind == "gap":
        return ["--profile", embedded_profile(config, "profile_gap")] + paced
    if kind == "split":
        return ["--profile", embedded_profile(config, "profile"),
                "--profile-after-compute", embedded_profile(config, "profile_gap")] + paced
    return ["--profile", embedded_profile(config, "profile")]


def missing_profiles(config):
    """The measurements today's model reads that a saved run lacks, by name, in the order the check
    added them: the gapped profile (calls after compute; since 2026-12-03's reanalysis), the paced
    AllReduce profile (Cluster::profile_paced; since 2026-12-07's thirty-sixth session) and the
    ranks' end spread in the gapped profile (Cluster::arrival_spread; since the thirty-seventh).
    Such a run is priced without the term the measurement feeds. (The check measures no paced
    profile when none of a run's plans has an AllReduce over whole nodes; such a run, which needs
    none, is named too: telling it apart takes the plans' calls, which the saved run does not hold.)"""
    gap = config.get("profile_gap_data", {}).get("entries", [])
    missing = [] if "profile_gap" in config else ["gapped profile"]
    if "profile_paced" not in config:
        missing.append("paced AllReduce profile")
    if not any("end_spread_seconds" in e for e in gap):
        missing.append("end spread")
    return missing


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


def rate_gbit(rate):
    m = re.match(r"([0-9.]+)([kmgt]?)bit$", rate)
    return float(m.group(1)) * {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3}[m.group(2)]


def train_arg(train_args, option):
    """The value of amsp-train's `option` in a run's --train-args (either "--opt X" or "--opt=X";
    the last one counts, as in amsp-train), None when absent."""
    words, value = train_args.split(), None
    for i, w in enumerate(words):
        if w == option and i + 1 < len(words):
            value = words[i + 1]
        elif w.startswith(option + "="):
            value = w.split("=", 1)[1]
    return value


def emulated_device_ms(train_args):
    """amsp-train's --device-ms-per-sequence in a run's --train-args, 0 when absent."""
    return float(train_arg(train_args, "--device-ms-per-sequence") or 0.0)


def queued_device(train_args):
    """Whether a run's emulated device queues its kernels (amsp-train --device-ms-per-sequence X
    --device-timing queued): the host's work between kernels is hidden behind them, as on a GPU."""
    return emulated_device_ms(train_args) > 0 and train_arg(train_args, "--device-timing") == "queued"
