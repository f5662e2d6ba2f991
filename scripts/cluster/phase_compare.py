#!/usr/bin/env python3
"""The model's phases of the overlapped step next to the traced ones, plan by plan, each as a
difference from a reference plan (DDP): when the first forward starts, when the forward and the
backward end, and the step's end. The model's phases are the schedule's (amsp-cluster-predict's
"phases", StepPhases in step_pipeline.hpp), the traced ones trace_phases.py's (the last rank's,
medians over steps) of `amsp-train --timeline` runs. Both clocks start somewhere else (the model's
at the update, the trace's when the first rank enters the step) and the model's compute carries
the host's work, so the absolute phases differ; the differences from the reference plan are
what a term of the model moves, so a row whose model and traced differences part says which phase
of that plan the model prices wrong (docs/planner-check-phases.md). Used by
check.py --reanalyze RUN --phase-traces PATTERN; scripts/cluster/trace_plans.py records the traces."""
import os
import sys

from trace_calls import load
from trace_phases import phases

PHASES = ("first forward starts", "forward ends", "backward ends", "step ends")
REFERENCE = "ddp"  # the plan every row is a difference from


def trace_prefix(pattern, mesh, rate, plan):
    """The trace prefix of one plan: `pattern` with {mesh}, {rate} and {plan} filled in."""
    return pattern.format(mesh=mesh, rate=rate, plan=plan)


def traced_phases(prefix, skip=2):
    """The four phases of a traced run, ms: the last rank's first forward start, forward end and
    backward end, and the next step's start (trace_phases.phases)."""
    (first, forward, backward, step, _device), _n = phases(load(prefix), skip)
    return [first, forward, backward, step]


def model_phases(prediction):
    """The four phases of amsp-cluster-predict's line for one plan, ms."""
    if len(prediction.get("phases", [])) != 4:
        print(f"phase_compare.py: the prediction of {prediction.get('name')} has no \"phases\" (an "
              "amsp-cluster-predict before StepPhases?) [rule cli.value]", file=sys.stderr)
        sys.exit(2)
    return [s * 1e3 for s in prediction["phases"]]


def phase_rows(model, traced, reference=REFERENCE):
    """Per plan of both `model` and `traced` ({plan: four phases, ms}): the model's differences from
    `reference`, the traced ones and model minus traced, each four phases."""
    if reference not in model or reference not in traced:
        print(f"phase_compare.py: the reference plan {reference} needs a prediction and a trace "
              "[rule cli.value]", file=sys.stderr)
        sys.exit(2)
    rows = []
    for plan in model:
        if plan not in traced:
            continue
        m = [x - r for x, r in zip(model[plan], model[reference])]
        t = [x - r for x, r in zip(traced[plan], traced[reference])]
        rows.append((plan, m, t, [a - b for a, b in zip(m, t)]))
    return rows


def print_phase_table(title, rows, reference=REFERENCE):
    print(f"\n{title}: the overlapped step's phases, each minus {reference}'s (ms): model / traced (model - traced)\n")
    print("| plan | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|" * len(PHASES))
    for plan, m, t, d in rows:
        print(f"| {plan} | " + " | ".join(f"{a:+.2f} / {b:+.2f} ({c:+.2f})" for a, b, c in zip(m, t, d)) + " |")


def compare(config, predictions, pattern, skip=2):
    """The table of one configuration of a check run: the plans whose traces `pattern` names
    (PREFIX.rank0.json present); nothing when the reference plan has none."""
    traced = {}
    for plan in config["plans"]:
        prefix = trace_prefix(pattern, config["mesh"], config["rate"], plan)
        if os.path.exists(prefix + ".rank0.json"):
            traced[plan] = traced_phases(prefix, skip)
    if REFERENCE not in traced:
        return
    model = {plan: model_phases(predictions[plan]) for plan in config["plans"]}
    print_phase_table(f"{config['mesh']} {config['rate']}", phase_rows(model, traced))
