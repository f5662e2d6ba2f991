"""The bandwidth profiles of one configuration of the cluster check (scripts/cluster/check.py),
measured with amsp-profile on the emulated cluster: back to back (chained calls), after an idle gap
(calls after compute) and paced (the AllReduce of groups of whole nodes, Cluster::profile_paced),
each the median of interleaved passes; and the analytic link figures for what they lack."""
import json

from check_programs import CLUSTER, sh
from check_stats import median_profile

# amsp-profile --calls: every collective issued as the engine issues it (gathers asynchronous,
# reductions blocking). Open MPI runs the two forms in different components (libnbc, tuned), which
# on the emulated cluster pace large gathers differently (docs/cluster.md, "Blocking and
# nonblocking calls"); runs before 2026-12-04 timed every call blocking.
PROFILE_CALLS = "engine"


def call_sizes(calls):
    """The buffer sizes of the plans' own collective calls (plan_calls, groups
    of more than one rank), so that the profile times them instead of interpolating between its
    sizes: on 4x2 at 200 Mbit/s the 64 KiB -> 256 KiB segment of the AllGather rose with slope 1.46
    in log-log (docs/planner-check-terms.md, "The waits for peers overlap the transfer"). The
    gradient norm's 8-byte AllReduce too (since 2026-12-05; amsp-profile times it for all_reduce
    only): Open MPI runs it by recursive doubling, 0.07-0.17 ms traced, where the profile's
    smallest ring AllReduce (4 KB) priced it at 0.23-0.34 ms at 1 Gbit/s
    (docs/planner-check-queued-and-norm.md)."""
    return sorted({int(c[4]) for c in calls if c[2] * c[3] > 1 and c[4] > 0})


def plan_calls(a, mesh, plans):
    """Every collective call of the plans, as amsp-cluster-predict lists them (term, op, p0, p1,
    bytes, count, seconds, paced: 1 when Cluster::paced_allreduce holds for it)."""
    out = sh([a.predict, "--mesh", mesh, "--plans", ";".join(plans), "--seconds-per-sample", "1e-3",
              "--global-batch", str(a.global_batch)] + a.model_args, 60)
    return [c for p in map(json.loads, out.splitlines()) for c in p["calls"]]


def paced_allreduces(calls):
    """The groups and sizes of the plans' calls (plan_calls) the planner prices from the paced profile (the
    AllReduces after compute over every rank of two or more nodes; the planner's rule,
    Cluster::paced_allreduce, marks them): (["RxN", ...], [bytes, ...]); none when no plan has one."""
    calls = [c for c in calls if c[7] and c[4] > 0]
    return sorted({f"{c[2]}x{c[3]}" for c in calls}), sorted({int(c[4]) for c in calls})


def with_profile_sizes(a, sizes):
    """`sizes` and --profile-sizes together, as amsp-profile --sizes takes them."""
    return ",".join(str(b) for b in sorted({int(x) for x in a.profile_sizes.split(",")} | set(sizes)))


def profile_pass(a, mesh, plans, sizes, path, gap_us=0):
    """One pass of amsp-profile on the cluster into `path` at `sizes` (amsp-profile --sizes): back
    to back (gap_us = 0, the planner's profile for chained calls), or every call after an idle gap
    (--gap-us; fewer calls: --profile-gap-iterations)."""
    ranks, nodes = map(int, mesh.split("x"))
    iterations = a.profile_gap_iterations if gap_us else a.profile_iterations
    sh([CLUSTER, "run", "--", "-np", str(ranks * nodes), a.profile, "--backend", "mpi", "--mesh", mesh,
        "--ops", "all_gather,reduce_scatter,all_reduce", "--plans", ";".join(plans), "--sizes", sizes,
        "--max-iterations", str(iterations), "--gap-us", str(gap_us), "--mpi-check-calls", a.mpi_check_calls,
        "--calls", PROFILE_CALLS, "--out", path], 1800)
    return json.load(open(path))


def paced_pass(a, mesh, groups, sizes, path):
    """One pass of amsp-profile --gap-timing paced into `path`: AllReduce alone, over `groups`, at
    the sizes `sizes` and --profile-sizes, each rank starting its next call when its own last one
    ended after the gap (Cluster::profile_paced; docs/planner-check-paced-allreduce.md)."""
    ranks, nodes = map(int, mesh.split("x"))
    sh([CLUSTER, "run", "--", "-np", str(ranks * nodes), a.profile, "--backend", "mpi", "--mesh", mesh,
        "--ops", "all_reduce", "--groups", ",".join(groups), "--sizes", with_profile_sizes(a, sizes),
        "--max-iterations", str(a.profile_gap_iterations), "--gap-us", str(a.profile_gap_us), "--gap-timing", "paced",
        "--mpi-check-calls", a.mpi_check_calls, "--calls", PROFILE_CALLS, "--out", path], 1800)
    return json.load(open(path))


def profiles(a, mesh, plans, path, gap_path, paced_path):
    """The configuration's profiles, each written to its path as the median of --profile-passes
    passes (check_stats.median_profile), the passes taken in turn (back to back, gapped, paced,
    back to back, ...) so that a disturbance of the host meets few passes of any. Returns the
    passes ([back to back], [gapped], [paced]; the gapped list empty without --profile-gap-us, the
    paced one also with --paced-allreduce off or when no plan has an AllReduce over whole nodes)."""
    passes, gap_passes, paced_passes = [], [], []
    calls = plan_calls(a, mesh, plans)
    sizes = with_profile_sizes(a, call_sizes(calls) if a.profile_call_sizes == "on" else [])
    groups, paced_sizes = paced_allreduces(calls) if a.profile_gap_us and a.paced_allreduce == "on" else ([], [])
    for _ in range(a.profile_passes):
        passes.append(profile_pass(a, mesh, plans, sizes, path))
        if a.profile_gap_us:
            gap_passes.append(profile_pass(a, mesh, plans, sizes, gap_path, a.profile_gap_us))
        if groups:
            paced_passes.append(paced_pass(a, mesh, groups, paced_sizes, paced_path))
    for out, done in ((path, passes), (gap_path, gap_passes), (paced_path, paced_passes)):
        if done:
            with open(out, "w") as f:
                json.dump(median_profile(done), f)
    return passes, gap_passes, paced_passes


def analytic_links(entries, nodes):
    """Analytic figures for what the profile still lacks: bandwidth of the largest node-sized
    AllGather, and per ring step the time of the smallest AllGather inside a node and over the
    most nodes (on an oversubscribed CPU, mostly scheduling delay)."""

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
