#!/usr/bin/env python3
"""The cluster check's paced AllReduce profile (Cluster::profile_paced): which of the plans' calls
check_profiles.py measures paced, and the planner options check_predict.py then passes, against
hand-written call lists (no cluster, no planner: amsp-cluster-predict's output is replaced).
Exit 0 on success, 1 with the failed checks listed."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster"))
import check_predict  # noqa: E402
import check_profiles  # noqa: E402

failures = []


def expect(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got}, want {want}")


# amsp-cluster-predict's "calls" (term, op, p0, p1, bytes, count, seconds, paced) on a 2x4 mesh, the
# last field the planner's rule (Cluster::paced_allreduce, tested in tests/planner/test_costs.cpp):
# the world AllReduce and one over two whole nodes are paced; the norm's world AllReduce (chained),
# a strided group, a group inside a node, a ReduceScatter and an empty call are not.
CALLS = {"ddp": [["grad_replicas", "all_reduce", 2, 4, 199936, 2, 0.0, 1], ["norm", "all_reduce", 2, 4, 8, 1, 0.0, 0]],
         "hsdp": [["grad_replicas", "all_reduce", 1, 4, 99968, 2, 0.0, 0],
                  ["gather", "all_gather", 2, 1, 4096, 4, 0.0, 0]],
         "zero2": [["grad", "reduce_scatter", 2, 4, 66048, 4, 0.0, 0], ["grad", "all_reduce", 2, 2, 33024, 1, 0.0, 1],
                   ["norm", "all_reduce", 2, 1, 8, 1, 0.0, 0], ["none", "all_reduce", 2, 4, 0, 1, 0.0, 1]]}


def fake_sh(cmd, timeout):
    value = dict(zip(cmd[1::2], cmd[2::2]))
    return "\n".join(json.dumps({"name": p, "calls": CALLS[p]}) for p in value["--plans"].split(";"))


check_profiles.sh = fake_sh
a = argparse.Namespace(predict="predict", global_batch=8, model_args=[])


def calls(plans):
    return check_profiles.plan_calls(a, "2x4", plans)


expect("paced groups and sizes", check_profiles.paced_allreduces(calls(["ddp", "hsdp", "zero2"])),
       (["2x2", "2x4"], [33024, 199936]))
expect("no whole-node AllReduce", check_profiles.paced_allreduces(calls(["hsdp"])), ([], []))
expect("every call size of a group of two or more", check_profiles.call_sizes(calls(["hsdp", "zero2"])),
       [8, 4096, 33024, 66048, 99968])

# The planner's options for a run with a paced profile: its AllReduces over whole nodes priced from
# it with the profiles of calls after compute (gap, split) only, unless --paced-allreduce off
# reproduces the model before it.
saved = {"cpus": "node", "profile": "b2b.json", "profile_gap": "gap.json"}
paced_run = dict(saved, profile_paced="paced.json")


def kind(profile_kind, paced="on"):
    return argparse.Namespace(profile_kind=profile_kind, paced_allreduce=paced)


expect("split, paced", check_predict.profile_args(kind("split"), paced_run),
       ["--profile", "b2b.json", "--profile-after-compute", "gap.json", "--profile-paced", "paced.json"])
expect("gap, paced", check_predict.profile_args(kind("gap"), paced_run),
       ["--profile", "gap.json", "--profile-paced", "paced.json"])
expect("back to back, paced measured", check_predict.profile_args(kind("back-to-back"), paced_run),
       ["--profile", "b2b.json"])
expect("split, paced off", check_predict.profile_args(kind("split", "off"), paced_run),
       ["--profile", "b2b.json", "--profile-after-compute", "gap.json"])
expect("split, no paced profile", check_predict.profile_args(kind("split"), saved),
       ["--profile", "b2b.json", "--profile-after-compute", "gap.json"])

# What a saved run lacks of the profiles today's model reads: a run before the gapped profile lacks
# all three; one with it but no paced profile and no end spread in its entries lacks two; one with
# the end spread in any gapped entry and a paced profile lacks none.
def gap_entries(*spreads):
    return {"entries": [dict({"op": "all_reduce", "group": "2x4", "bytes": 8, "seconds": 1e-3},
                             **({"end_spread_seconds": x} if x else {})) for x in spreads]}


expect("nothing but back to back", check_predict.missing_profiles({"profile": "b2b.json"}),
       ["gapped profile", "paced AllReduce profile", "end spread"])
expect("gapped without spread", check_predict.missing_profiles(dict(saved, profile_gap_data=gap_entries(0))),
       ["paced AllReduce profile", "end spread"])
expect("every profile", check_predict.missing_profiles(dict(paced_run, profile_gap_data=gap_entries(0, 2e-4))), [])

for f in failures:
    print("FAIL", f)
print(f"test_check_profiles: {len(failures)} failures")
sys.exit(1 if failures else 0)
