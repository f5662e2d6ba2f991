#!/usr/bin/env python3
"""The planner checked against measured step times on the emulated cluster (docs/cluster.md).

For each mesh R x N and inter-node rate: bring the cluster up, fit a compute model from a
calibration run, measure a bandwidth profile with amsp-profile, run every plan with amsp-train
under MPI (repeats interleaved across plans, so that load drift hits all plans alike), ask the
planner (amsp-cluster-predict) for its prediction, and print one table per configuration plus the
targets: median absolute error, Spearman rank correlation, the planner's pick vs the measured
best, and the bytes the node links carried vs what the engine expects. Run via
scripts/cluster-check.sh, which builds the programs first.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")

PLANS = {  # per mesh: the list; MiCS with a group smaller than a node (k = node is hsdp)
    "4x2": ["ddp", "zero1", "zero2", "zero3", "mics(2)", "hsdp", "amsp-7b", "amsp-13b", "amsp-30b"],
    "2x4": ["ddp", "zero1", "zero2", "zero3", "mics(4)", "hsdp", "amsp-7b", "amsp-13b", "amsp-30b"],
}
STEP_LINE = re.compile(r"^step\s+(\d+)/(\d+)\s.*tokens/s\s+([0-9.]+)")


def sh(cmd, timeout, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True, **kw).stdout


def link_tx_total():
    out = sh([CLUSTER, "counters"], 30)
    return sum(int(line.split()[1]) for line in out.splitlines())


def step_seconds(output, global_batch):
    """Seconds of each step from amsp-train's progress lines, without the first (warm-up) and the
    last (it runs the final validation)."""
    steps = []
    for line in output.splitlines():
        m = STEP_LINE.match(line)
        if m and 1 < int(m.group(1)) < int(m.group(2)):
            steps.append(global_batch / float(m.group(3)))
    return steps


def train_args(a, mesh, plan, steps, backend="mpi", batch=None):
    return [a.train, "--backend", backend, "--mesh", mesh, "--plan", plan, "--steps", str(steps),
            "--eval-every", "0", "--global-batch", str(batch or a.global_batch)] + a.model_args


def calibrate(a, world):
    """world concurrent single-rank runs (no communication, all ranks' compute competing for the
    cores as on the cluster), 12 steps each so that their steps overlap, at two batch sizes (the
    cluster's per-rank batch and 4x): step seconds = a·samples + update of all parameters."""
    points = []
    for batch in (a.global_batch // world, 4 * a.global_batch // world):
        procs = [subprocess.Popen(train_args(a, "1x1", "ddp", 12, "threads", batch), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(world)]
        times = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            times += step_seconds(out, batch)
        points.append((batch, statistics.median(times)))
    (x0, y0), (x1, y1) = points
    slope = (y1 - y0) / (x1 - x0)
    return {"seconds_per_sample": slope, "intercept": y0 - slope * x0, "points": points}  # fitted again by the planner


def profile(a, mesh, world, path):
    sh([CLUSTER, "run", "--", "-np", str(world), a.profile, "--backend", "mpi", "--mesh", mesh, "--ops",
        "all_gather,reduce_scatter,all_reduce", "--sizes", a.profile_sizes, "--out", path], 1800)
    # The analytic figures for the shapes amsp-profile cannot measure (strided groups): bandwidth
    # of the largest node-sized AllGather, and per ring step the time of the smallest AllGather
    # inside a node and over the whole mesh (on an oversubscribed CPU, mostly scheduling delay).
    entries = json.load(open(path))["entries"]
    ranks, nodes = map(int, mesh.split("x"))
    def ag(group):
        return sorted((e for e in entries if e["op"] == "all_gather" and e["group"] == group), key=lambda e: e["bytes"])
    node_ag, world_ag = ag(f"{ranks}x1"), ag(mesh)
    return {"intra_gbytes": node_ag[-1]["busbw_gbps"],
            "intra_latency": node_ag[0]["seconds"] / max(ranks - 1, 1),
            "inter_latency": world_ag[0]["seconds"] / (world - 1) if nodes > 1 else 0.0}


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


def fit_line(points):
    """Least-squares slope of bytes against steps."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else float("nan")


def run_config(a, mesh, rate, work):
    ranks, nodes = map(int, mesh.split("x"))
    world = ranks * nodes
    plans = PLANS[mesh] if not a.plans else a.plans.split(";")
    tag = f"{mesh}-{rate}"
    print(f"=== {tag}: cluster up, calibration, profile", flush=True)
    sh([CLUSTER, "up", str(nodes), str(ranks), rate], 120)
    calibration = calibrate(a, world)
    prof_path = os.path.join(work, f"profile-{tag}.json")
    links = profile(a, mesh, world, prof_path)
    runs = {p: [] for p in plans}
    for rep in range(a.repeats):
        steps = a.steps + 2 * rep  # different lengths: link bytes per step = slope over the repeats
        order = plans[rep % len(plans):] + plans[:rep % len(plans)]
        for plan in order:
            before = link_tx_total()
            t0 = time.time()
            out = sh([CLUSTER, "run", "--", "-np", str(world)] + train_args(a, mesh, plan, steps), 900)
            after = link_tx_total()
            result = json.loads(out.strip().splitlines()[-1])
            runs[plan].append({"steps": steps, "step_seconds": step_seconds(out, a.global_batch),
                               "link_bytes": after - before, "wall": time.time() - t0, "json": result})
            print(f"  {plan:10s} rep {rep}: median step {statistics.median(runs[plan][-1]['step_seconds']):.3f} s",
                  flush=True)
    predict = [a.predict, "--mesh", mesh, "--plans", ";".join(plans), "--profile", prof_path,
               "--node-gbit", str(rate_gbit(rate)), "--intra-gbytes", str(links["intra_gbytes"]),
               "--intra-latency", str(links["intra_latency"]), "--inter-latency", str(links["inter_latency"]),
               "--calibration", ",".join(f"{b}:{t}" for b, t in calibration["points"]),
               "--global-batch", str(a.global_batch), "--hidden", str(a.hidden), "--layers", str(a.layers)]
    predictions = {}
    for line in sh(predict, 60).splitlines():
        p = json.loads(line)
        predictions[p["name"]] = p
    rows = []
    for plan in plans:
        p = predictions[plan]
        medians = [statistics.median(r["step_seconds"]) for r in runs[plan]]
        link_per_step = fit_line([(r["steps"], r["link_bytes"]) for r in runs[plan]]) / nodes
        engine = runs[plan][0]["json"]["expected_bytes_inter_per_step"]
        rows.append({"plan": plan, "shape": p["plan"], "measured": statistics.median(medians),
                     "spread": (max(medians) - min(medians)) / statistics.median(medians),
                     "serial": p["serial"], "overlapped": p["overlapped"],
                     "compute": p["compute"], "communication": p["communication"], "update": p["update"],
                     "link_measured": link_per_step, "link_model": p["link_bytes_per_node"],
                     "engine_inter_x_ranks": engine * ranks})
    sh([CLUSTER, "down"], 60)
    return {"mesh": mesh, "rate": rate, "calibration": calibration, "links": links, "rows": rows,
            "runs": runs}


def rate_gbit(rate):
    m = re.match(r"([0-9.]+)([kmgt]?)bit$", rate)
    scale = {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3}[m.group(2)]
    return float(m.group(1)) * scale


def summarize(config, which):
    rows = config["rows"]
    errors = [abs(r[which] - r["measured"]) / r["measured"] for r in rows]
    pick = min(rows, key=lambda r: r[which])
    best = min(rows, key=lambda r: r["measured"])
    return {"median_abs_error": statistics.median(errors),
            "spearman": spearman([r[which] for r in rows], [r["measured"] for r in rows]),
            "pick": pick["plan"], "best": best["plan"], "pick_over_best": pick["measured"] / best["measured"] - 1}


def print_table(config):
    print(f"\n#### {config['mesh']} (ranks per node x nodes), {config['rate']} per node link\n")
    c = config["calibration"]
    print(f"compute {c['seconds_per_sample'] * 1e3:.3f} ms per sample per rank, update intercept "
          f"{c['intercept'] * 1e3:.1f} ms (calibration); analytic links (strided groups): intra {config['links']['intra_gbytes']:.2f} GB/s, "
          f"{config['links']['intra_latency'] * 1e3:.2f} / {config['links']['inter_latency'] * 1e3:.2f} ms per intra / inter ring step\n")
    print("| plan | p,g,os | measured s/step (spread) | predicted serial | err | predicted overlap | err | "
          "link B/step/node measured | link model | engine inter x R |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in config["rows"]:
        print(f"| {r['plan']} | {r['shape']} | {r['measured']:.3f} ({100 * r['spread']:.0f} %) | {r['serial']:.3f} | "
              f"{100 * (r['serial'] / r['measured'] - 1):+.0f} % | {r['overlapped']:.3f} | "
              f"{100 * (r['overlapped'] / r['measured'] - 1):+.0f} % | {r['link_measured']:.0f} | "
              f"{r['link_model']:.0f} ({100 * (r['link_measured'] / r['link_model'] - 1) if r['link_model'] else 0:+.1f} %) | "
              f"{r['engine_inter_x_ranks']:.0f} |")
    for which in ("serial", "overlapped"):
        s = summarize(config, which)
        print(f"\n{which}: median |error| {100 * s['median_abs_error']:.1f} % (target <= 15 %), Spearman "
              f"{s['spearman']:.2f} (>= 0.9), pick {s['pick']} vs measured best {s['best']}: "
              f"{100 * s['pick_over_best']:+.1f} % (<= 5 %)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "default"))
    ap.add_argument("--meshes", default="4x2,2x4")
    ap.add_argument("--rates", default="1gbit,200mbit")
    ap.add_argument("--plans", default="", help="';'-separated plans (default: the issue's list per mesh)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4, help="steps of the first repeat (+2 per repeat)")
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--profile-sizes", default="16384,131072,655360")
    ap.add_argument("--out", default="cluster-check.json")
    a = ap.parse_args()
    a.train = os.path.join(a.build, "examples", "amsp_train", "amsp-train")
    a.profile = os.path.join(a.build, "examples", "amsp_profile", "amsp-profile")
    a.predict = os.path.join(a.build, "tests", "cluster", "amsp-cluster-predict")
    a.model_args = ["--hidden", str(a.hidden), "--layers", str(a.layers)]
    work = os.path.dirname(os.path.abspath(a.out))
    configs = []
    try:
        for mesh in a.meshes.split(","):
            for rate in a.rates.split(","):
                configs.append(run_config(a, mesh, rate, work))
                json.dump(configs, open(a.out, "w"), indent=1)
    finally:
        subprocess.run([CLUSTER, "down"], capture_output=True)
    for c in configs:
        print_table(c)


if __name__ == "__main__":
    sys.exit(main())
