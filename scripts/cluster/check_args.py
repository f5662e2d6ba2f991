"""check.py's command line: its options, the rule for each value and the settings derived from them
(the programs' paths under --build, the lists split). A bad value exits 2 naming it and its rule,
before anything is measured: the values only a live check reads (meshes, rates, modes, the
global batch, the profile's counts, the plans, the --out folder) only without --reanalyze."""
import argparse
import os
import subprocess

import check_measure
import check_stats
from check_measure import CLUSTER, MODES, ROOT, SYNC_PLAN
from check_predict import PROFILE_KINDS


def parse(description, argv=None):
    """check.py's settings from `argv` (the process's arguments by default)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    ap.add_argument("--overlap-form", choices=["call", "beside"], default="call",
                    help="what CALL_PLAN's step with overlap calibrates: kappa from its compute and the rest "
                         "per collective call (call, the default), or kappa alone from its step (beside, the "
                         "model before 2026-12-07's thirty-eighth session; docs/planner-check-overlap-slowdown.md)")
    ap.add_argument("--overlap-call", type=float, default=None,
                    help="seconds the step with overlap adds per collective call (Cluster::overlap_call_s; "
                         "default: calibrated with --overlap-form call, else 0)")
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
                         "runs in the serial engine; runs saved before it: ddp's serial runs; 0 for runs saved "
                         "before any update was measured)")
    ap.add_argument("--update-turns", type=int, default=None,
                    help="ranks whose updates run one after another on a shared core, the update priced that many "
                         "times over (ComputeModel::update_turns; default: the ranks per host CPU; 1 reproduces "
                         "the model before 2026-12-08, docs/planner-check-update-turns.md)")
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
    ap.add_argument("--paced-allreduce", choices=["on", "off"], default="on",
                    help="measure a paced profile (amsp-profile --gap-timing paced) of the plans' AllReduces over "
                         "every rank of two or more nodes, and price those calls after compute from it "
                         "(Cluster::profile_paced, with the gapped profile; runs saved without it price as off); "
                         "off: the model before 2026-12-07 (docs/planner-check-paced-allreduce.md)")
    ap.add_argument("--arrival-spread", choices=["on", "off"], default="on",
                    help="price each paced AllReduce as far apart as its ranks reach it, from the end spread the "
                         "gapped profile measured (Cluster::arrival_spread; runs saved before 2026-12-07's "
                         "thirty-seventh session have none and price as off); off: the paced price alone "
                         "(docs/planner-check-arrival-spread.md)")
    ap.add_argument("--chain-wait", choices=["on", "off"], default="on",
                    help="the first of each unit's last-micro-batch reductions, issued right after its backward, "
                         "waits for its group to come out of compute as the every-micro-batch calls do "
                         "(Cluster::chain_head_waits); off: only the every-micro-batch calls, the model before "
                         "2026-12-07's thirty-ninth session (docs/planner-check-chain-wait.md)")
    ap.add_argument("--out", default="cluster-check.json")
    ap.add_argument("--reanalyze", default="", help="a saved --out file (or its .xz, as bench/data keeps them): predict "
                                                    "and print again, measure nothing")
    ap.add_argument("--phase-traces", default="",
                    help="with --reanalyze: amsp-train --timeline prefixes with {mesh}, {rate} and {plan} "
                         "(scripts/cluster/trace_plans.py records them); each configuration with a DDP trace also "
                         "prints the model's phases of the overlapped step next to the traced ones, each minus "
                         "DDP's (phase_compare.py)")
    a = ap.parse_args(argv)
    require_at_least(ap, 0, " seconds", (("--update-seconds", a.update_seconds), ("--gather-stall", a.gather_stall),
                                          ("--entry-skew", a.entry_skew), ("--overlap-call", a.overlap_call)))
    require_at_least(ap, 1, "", (("--repeats", a.repeats), ("--steps", a.steps),
                                 ("--profile-passes", a.profile_passes), ("--update-turns", a.update_turns)))
    if a.update_seconds is not None and a.compute == "line":
        ap.error("--update-seconds prices the update of --compute origin and step; --compute line fits its own "
                 "(rule cli.value)")
    if not a.reanalyze:  # the values only a measurement reads, checked before a cluster comes up
        for mesh in a.meshes.split(","):
            if mesh not in SYNC_PLAN:
                ap.error(f"--meshes {mesh}: the check calibrates on {' and '.join(SYNC_PLAN)} only "
                         "(check_measure.SYNC_PLAN) (rule cli.value)")
        for rate in a.rates.split(","):  # cluster.sh holds the rule for a rate
            known = subprocess.run([CLUSTER, "burst", rate], capture_output=True, text=True)
            if known.returncode != 0:
                ap.error(f"--rates {rate}: {known.stderr.strip()} (rule cli.value)")
        for mode in a.modes.split(","):
            if mode not in MODES:
                ap.error(f"--modes {mode}: each mode must be one of {', '.join(MODES)} (rule cli.value)")
        require_at_least(ap, 1, "", (("--global-batch", a.global_batch), ("--profile-iterations", a.profile_iterations),
                                     ("--profile-gap-iterations", a.profile_gap_iterations)))
        require_at_least(ap, 0, "", (("--profile-gap-us", a.profile_gap_us),))
    a.train = os.path.join(a.build, check_measure.TRAIN)
    a.profile = os.path.join(a.build, check_measure.PROFILE)
    a.predict = os.path.join(a.build, check_measure.PREDICT)
    a.model_args = a.model.split()
    a.train_args = a.train_args.split()
    a.modes = a.modes.split(",")
    a.work = os.path.dirname(os.path.abspath(a.out))
    if not a.reanalyze and not (os.path.isdir(a.work) and os.access(a.work, os.W_OK)):
        # found before the first configuration is measured, not when its results are written
        ap.error(f"--out {a.out}: the folder {a.work} must exist and be writable (rule cli.value)")
    if a.phase_traces and not a.reanalyze:
        ap.error("--phase-traces reads traces next to a saved run: give --reanalyze too (rule cli.value)")
    missing = check_measure.unbuilt(a.build, [check_measure.PREDICT] if a.reanalyze else
                                    [check_measure.TRAIN, check_measure.PROFILE, check_measure.PREDICT])
    if missing:
        ap.error(missing)
    if a.plans and not a.reanalyze:  # the planner's rule for a plan (plan.parse, its validity on the mesh)
        for mesh in a.meshes.split(","):
            known = subprocess.run([a.predict, "--mesh", mesh, "--plans", a.plans, "--seconds-per-sample", "1",
                                    "--node-gbit", "1"], capture_output=True, text=True)
            if known.returncode != 0:
                ap.error(f"--plans on {mesh}: {known.stderr.strip()}")
    return a


def parse_for_saved_runs(ap, description, argv=None):
    """For the scripts that price saved runs again (plan_errors.py, scorecard.py,
    overlap_forms.py): their own arguments from `ap` (a `runs` list among them) and check.py's
    settings (`description`: check.py's) from the rest, each given as --option=value so that none
    of their values is taken for a saved run (argparse's error, exit 2, otherwise); the step
    estimator set where check_stats.typical_step reads it. Returns (own arguments, settings)."""
    own, options = ap.parse_known_args(argv)
    if any(not o.startswith("--") or "=" not in o for o in options):
        ap.error(f"check.py's options go as --option=value, got {' '.join(options)} [rule cli.value]")
    a = parse(description, ["--reanalyze", own.runs[0], *options])
    check_stats.STEP_ESTIMATOR = a.estimator
    return own, a


def require_at_least(ap, minimum, unit, named_values):
    """Exit 2 (argparse's error) naming the first option whose value is below `minimum`; an option
    not given (None) passes."""
    for name, value in named_values:
        if value is not None and value < minimum:
            ap.error(f"{name} must be at least {minimum}{unit}, got {value} (rule cli.value)")
