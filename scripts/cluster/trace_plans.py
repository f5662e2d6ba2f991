#!/usr/bin/env python3
"""Records `amsp-train --timeline` traces of the plans of a saved cluster-check run, with overlap
(or, --mode serial, the check's step without it) and the run's own settings (model, amsp-train
arguments, global batch), for check.py --reanalyze RUN --phase-traces 'DIR/{mesh}-{rate}-{plan}':
for each configuration of the run (or those --configs names) it brings the emulated cluster up at
its mesh and rate, runs each plan --steps steps with --timeline DIR/MESH-RATE-PLAN, and takes the
cluster down. Needs root (exit 77 otherwise); like the check, on an otherwise idle machine
(docs/planner-check-quiet-host.md).
Usage: trace_plans.py RUN.json[.xz] --out-dir DIR [--configs 2x4/1gbit,4x2/200mbit] [--plans 'ddp;zero1']
       [--steps 20] [--build build/default] [--mode overlap|serial]"""
import argparse
import os
import subprocess
import sys
from types import SimpleNamespace

from check_measure import CLUSTER, MODES, TRAIN, leave_through_finally_on_sigterm, program_failure, sh, train, unbuilt
from phase_compare import trace_prefix


def chosen(configs, names):
    """The configurations `names` ("mesh/rate,...") picks, all when empty; a name no configuration
    has exits 2."""
    if not names:
        return configs
    out = []
    for name in names.split(","):
        found = [c for c in configs if f"{c['mesh']}/{c['rate']}" == name]
        if not found:
            have = ", ".join(f"{c['mesh']}/{c['rate']}" for c in configs)
            print(f"trace_plans.py: --configs {name}: the run has {have} [rule cli.value]", file=sys.stderr)
            sys.exit(2)
        out += found
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--configs", default="", help="mesh/rate,... (default: every configuration of the run)")
    ap.add_argument("--plans", default="", help="plans separated by ';' (default: each configuration's own)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--build", default="build/default")
    ap.add_argument("--mode", choices=list(MODES), default="overlap",
                    help="the schedule traced: overlap (amsp-train's default, what --phase-traces reads) or serial "
                         "(the check's step without overlap)")
    a = ap.parse_args()
    if a.steps < 4:
        print(f"trace_plans.py: --steps must be at least 4 (trace_phases skips 2 and needs a next step), "
              f"got {a.steps} [rule cli.value]", file=sys.stderr)
        sys.exit(2)
    from check import load_run  # the saved run's reader (plain or .xz)
    configs = chosen(load_run(a.run, "trace_plans.py",
                              keys=("mesh", "rate", "plans", "global_batch", "model_args", "train_args")), a.configs)
    missing = unbuilt(a.build, [TRAIN])
    if missing:
        print(f"trace_plans.py: {missing}", file=sys.stderr)
        sys.exit(2)
    if os.geteuid() != 0:
        print("trace_plans.py: SKIP: needs root (network namespaces)", file=sys.stderr)
        sys.exit(77)
    os.makedirs(a.out_dir, exist_ok=True)
    pattern = os.path.join(a.out_dir, "{mesh}-{rate}-{plan}")
    leave_through_finally_on_sigterm()
    try:
        for c in configs:
            ranks, nodes = map(int, c["mesh"].split("x"))
            sh([CLUSTER, "up", str(nodes), str(ranks), c["rate"]], 120)
            settings = SimpleNamespace(train=os.path.join(a.build, TRAIN),
                                       global_batch=c["global_batch"], mpi_check_calls="off",
                                       model_args=c["model_args"].split(), train_args=c["train_args"].split())
            launcher = [CLUSTER, "run", "--", "-np", str(ranks * nodes)]
            for plan in (a.plans.split(";") if a.plans else c["plans"]):
                prefix = trace_prefix(pattern, c["mesh"], c["rate"], plan)
                train(settings, c["mesh"], plan, a.steps, ["--backend", "mpi", *MODES[a.mode], "--timeline", prefix],
                      launcher)
                print(f"{c['mesh']} {c['rate']} {plan}: {prefix}.rank*.json", flush=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        report, code = program_failure(e)
        print(f"trace_plans.py: {report}", file=sys.stderr)
        return code
    finally:
        subprocess.run([CLUSTER, "down"], capture_output=True)
    print(f"check.py --reanalyze {a.run} --phase-traces '{pattern}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
