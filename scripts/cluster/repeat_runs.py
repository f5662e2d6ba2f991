#!/usr/bin/env python3
"""One plan run again and again on the emulated cluster (docs/cluster.md, "Two schedules of ranks
that share a core"): each run's median step, rank 0's median compute and the host's steal time
(/proc/stat), then how steady an estimate of the plan's step from k of these runs is, the mean of
k against the median of k (drawn from the runs without replacement). Needs root (exit 77 if not).
Brings up a cluster of its own (AMSP_CLUSTER_NAME, default amspnrep, so that it never takes down
another one) and removes it at the end.

  sudo scripts/cluster/repeat_runs.py --mesh 4x2 --rate 200mbit --plan hsdp --seconds 420
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

os.environ.setdefault("AMSP_CLUSTER_NAME", "amspnrep")
import check_measure  # noqa: E402  (reads no environment at import; cluster.sh does, per call)
from check_measure import CLUSTER, ROOT, sh, train  # noqa: E402


def cpu_jiffies():
    """The host's CPU times (user .. steal) from the first line of /proc/stat."""
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:9]]


def estimate_spread(values, k, estimator, draws=20000, seed=1):
    """Relative standard deviation of `estimator` over k values drawn without replacement."""
    rng = random.Random(seed)
    est = [estimator(rng.sample(values, k)) for _ in range(draws)]
    return statistics.pstdev(est) / statistics.mean(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "default"))
    ap.add_argument("--mesh", default="4x2", help="ranks per node x nodes")
    ap.add_argument("--rate", default="200mbit", help="each node link's rate (tc syntax)")
    ap.add_argument("--plan", default="hsdp")
    ap.add_argument("--seconds", type=float, default=420, help="keep launching runs this long")
    ap.add_argument("--steps", type=int, default=12, help="steps per run (2 .. n-1 timed)")
    ap.add_argument("--no-overlap", action="store_true", help="amsp-train --no-overlap")
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--model", default=check_measure.DEFAULT_MODEL)
    ap.add_argument("--train-args", default="", help="more amsp-train options for every run (as check.py's)")
    a = ap.parse_args()
    mesh = re.fullmatch(r"([1-9][0-9]?)x([1-9][0-9]?)", a.mesh)
    if not mesh:
        print(f"repeat_runs.py: --mesh must be RxN (ranks per node x nodes), got '{a.mesh}'", file=sys.stderr)
        return 2
    if a.steps < 4 or a.seconds <= 0:
        print(f"repeat_runs.py: --steps must be >= 4 and --seconds > 0, got {a.steps}, {a.seconds}", file=sys.stderr)
        return 2
    missing = check_measure.unbuilt(a.build, [check_measure.TRAIN])
    if missing:
        print(f"repeat_runs.py: {missing}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("repeat_runs.py: SKIP: needs root (network namespaces)", file=sys.stderr)
        return 77
    ranks, nodes = map(int, mesh.groups())
    a.train = os.path.join(a.build, check_measure.TRAIN)
    a.model_args, a.train_args, a.mpi_check_calls = a.model.split(), a.train_args.split(), "off"
    check_measure.leave_through_finally_on_sigterm()
    steps = []
    try:
        sh([CLUSTER, "up", str(nodes), str(ranks), a.rate], 120)
        launcher = [CLUSTER, "run", "--", "-np", str(ranks * nodes)]
        extra = ["--backend", "mpi"] + (["--no-overlap"] if a.no_overlap else [])
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            before = cpu_jiffies()
            records, _ = train(a, a.mesh, a.plan, a.steps, extra, launcher)
            spent = [y - x for x, y in zip(before, cpu_jiffies())]
            steps.append(statistics.median(r["step_ms"] for r in records))
            print(f"{len(steps) - 1:4d} step {steps[-1]:7.1f} ms  rank 0 compute "
                  f"{statistics.median(r['compute_ms'] for r in records):6.1f} ms  steal "
                  f"{100 * spent[7] / max(1, sum(spent)):5.2f} %", flush=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        report, code = check_measure.program_failure(e)
        print(f"repeat_runs.py: {report}", file=sys.stderr)
        return code
    finally:
        sh([CLUSTER, "down"], 60)
    print(f"\n{a.plan} on {a.mesh} at {a.rate}: {len(steps)} runs, step mean {statistics.mean(steps):.1f} ms, "
          f"median {statistics.median(steps):.1f}, min {min(steps):.1f}, max {max(steps):.1f}")
    for k in (3, 5):
        if len(steps) > 2 * k:
            print(f"estimate from {k} runs, relative spread: median {100 * estimate_spread(steps, k, statistics.median):.1f} %,"
                  f" mean {100 * estimate_spread(steps, k, statistics.mean):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
