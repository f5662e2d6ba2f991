#!/usr/bin/env python3
"""What the overlap slowdown κ carries, in other forms: saved runs of scripts/cluster/check.py
(--out files, plain or .xz) priced again (check.py --reanalyze, each run with its own
calibration), then every case with overlap scored with κ × (the seconds of communication beside
compute), the model's form, replaced by the same calibration on another base:

  beside   κ × the seconds a stream was busy inside compute (step_pipeline.hpp; the model
           before 2026-12-07's thirty-eighth session, check.py --overlap-form beside)
  constant the same seconds for every plan (ranks as κ = 0)
  calls    per collective call of the plan's step
  bytes    per byte the plan's step sends over a node link
  compute  κ from the calibration plan's measured compute (the compute lost beside
           communication, over the seconds beside), the rest of its excess per call (the model
           since: Cluster::overlap_call_s)

Each form takes the calibration plan (check.py's CALL_PLAN, not scored): its measured step with
overlap over the schedule at κ = 0 (its excess), divided by its own base; every scored plan gets
that times its own base on top of its schedule at κ = 0. The stall after a gather inside a node
and the entry skew stay as check.py calibrates them. Per case (mesh, rate, overlap): Spearman per
form, a missed target marked *; last, per mesh and rate and over all cases, how many meet all
three targets in each form (docs/planner-check-overlap-slowdown.md). check.py's own options go
as --option=value. Exit 2 on a bad argument or an unreadable run.

  python3 scripts/cluster/overlap_forms.py bench/data/cluster-check-2026-12-07-b[e-i].json.xz
"""
import argparse
import json
import sys

import check
import check_args
import check_predict
from check_programs import sh
from check_stats import run_medians, summarize, targets_met, typical_step

PROGRAM = "overlap_forms.py"
FORMS = ("beside", "constant", "calls", "bytes", "compute")


def form_steps(plans, at0, at1, calibration, excess, kappa):
    """{form: {plan: predicted step with overlap}} from the predictions at κ = 0 (`at0`) and κ = 1
    (`at1`) (amsp-cluster-predict's lines by name; the step is linear in κ, so at1 − at0 is a
    plan's seconds beside compute), the calibration plan's name, its measured step over its
    schedule at κ = 0 (`excess`, seconds) and the model's κ (check.overlap_slowdown: from its
    measured compute)."""
    def beside(p):
        return at1[p]["overlapped"] - at0[p]["overlapped"]

    bases = {"beside": beside, "constant": lambda p: 1.0, "calls": lambda p: at0[p]["collective_calls"],
             "bytes": lambda p: at0[p]["link_bytes_per_node"]}
    out = {}
    for form, base in bases.items():
        rate = excess / base(calibration) if base(calibration) else 0.0
        out[form] = {p: at0[p]["overlapped"] + rate * base(p) for p in plans}
    per_call = max(0.0, excess - kappa * beside(calibration)) / at0[calibration]["collective_calls"]
    out["compute"] = {p: at0[p]["overlapped"] + kappa * beside(p) + per_call * at0[p]["collective_calls"]
                      for p in plans}
    return out


def case_rows(config, at0, steps):
    """check.analyze-like rows (plan, shape, measured, repeats, predicted) of the overlapped case."""
    runs = config["runs"]["overlap"]
    return [{"plan": p, "shape": at0[p]["plan"], "measured": typical_step(run_medians(runs[p])),
             "repeats": run_medians(runs[p]), "predicted": steps[p]} for p in config["plans"]]


def priced(a, config):
    """The predictions at κ = 0 and 1, nothing per call, of the scored plans and the calibration
    plan, the stall and the rest as check.py calibrates them, and the calibration plan's name, excess
    and the model's κ."""
    compute_args = check_predict.compute_model_args(a, config)
    overhead, sync = check.overheads(a, config, compute_args)
    skew, _ = check.entry_skew(a, config)
    kappa, _ = check.overlap_slowdown(a, config, compute_args, overhead, sync, skew)
    per_call, _ = check.overlap_call(a, config, compute_args, overhead, sync, kappa, skew)
    stall, _ = check.gather_stall(a, config, compute_args, overhead, sync, kappa, skew, per_call)
    cal = config["calibration"]
    plans = config["plans"] + [cal["call_plan"]]

    def at(k):
        command = check_predict.predict_command(a, config, plans, compute_args, overhead, sync, k, stall, skew)
        return {p["name"]: p for p in map(json.loads, sh(command, 60).splitlines())}
    at0, at1 = at(0.0), at(1.0)
    excess = typical_step(cal["call_plan_overlap_runs"]) - at0[cal["call_plan"]]["overlapped"]
    return at0, at1, cal["call_plan"], excess, kappa


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="saved runs (check.py --out) with the calibration plans' records")
    own, a = check_args.parse_for_saved_runs(ap, check.__doc__)
    met = {}  # (mesh, rate) -> {form: cases meeting all three}
    print("run mesh rate: Spearman per form (* a target missed): " + ", ".join(FORMS))
    for path in own.runs:
        for config in check.load_run(path, PROGRAM):
            cal = config["calibration"]
            if not cal.get("call_plan_overlap_runs") or f"{cal.get('call_plan')} overlap" not in cal.get("plan_records", {}):
                print(f"{PROGRAM}: {path}, {config['mesh']} {config['rate']}: no records of the calibration plan "
                      "with overlap (runs before 2026-12-06's run ao) [rule cli.value]", file=sys.stderr)
                sys.exit(2)
            at0, at1, name, excess, kappa = priced(a, config)
            steps = form_steps(config["plans"], at0, at1, name, excess, kappa)
            cells = []
            counts = met.setdefault((config["mesh"], config["rate"]), {f: 0 for f in FORMS + ("cases",)})
            counts["cases"] += 1
            for form in FORMS:
                s = summarize(case_rows(config, at0, steps[form]))
                ok = all(targets_met(s).values())
                counts[form] += ok
                cells.append(f"{form} {s['spearman']:.2f}{'' if ok else '*'}")
            print(f"{path} {config['mesh']} {config['rate']}: " + ", ".join(cells))
    print("\nmesh rate | cases | meeting all three targets: " + " | ".join(FORMS))
    total = {f: 0 for f in FORMS + ("cases",)}
    for (mesh, rate), counts in met.items():
        print(f"{mesh} {rate} | {counts['cases']} | " + " | ".join(str(counts[f]) for f in FORMS))
        for f in total:
            total[f] += counts[f]
    print(f"all | {total['cases']} | " + " | ".join(str(total[f]) for f in FORMS))


if __name__ == "__main__":
    main()
