#!/usr/bin/python3
"""Plots amsp-train runs from their --log-json files (JSON Lines: one record per step, then the
final record): the training and validation loss curves of every run in one PNG, and each run's
median step time split into compute and exposed communication in another.

    plot_runs.py --out docs/img/example run1.jsonl run2.jsonl ...
    -> docs/img/example_loss.png, docs/img/example_step_time.png

Needs python3-matplotlib (Debian; hence /usr/bin/python3, not a python3 of pyenv or a venv). A run is labelled by its plan, plus "no overlap",
"keep gathered" or "bf16" where set.
"""
import argparse
import json
import statistics
import sys


def load(path):
    steps, final = [], None
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "final_loss" in record:
                final = record
            else:
                steps.append(record)
    if final is None or not steps:
        sys.exit(f"plot_runs: {path} holds no complete run (no final record)")
    return steps, final


def label(final):
    text = final["plan"]
    if not final.get("overlap", True):
        text += ", no overlap"
    if final.get("keep_gathered"):
        text += ", keep gathered"
    if final.get("dtype") == "bf16":
        text += ", bf16"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output prefix: PREFIX_loss.png, PREFIX_step_time.png")
    parser.add_argument("logs", nargs="+", help="--log-json files of amsp-train")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [load(p) for p in args.logs]

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for steps, final in runs:
        line, = ax.plot([r["step"] for r in steps], [r["loss"] for r in steps], lw=1, label=label(final))
        val = [(r["step"], r["validation_loss"]) for r in steps if "validation_loss" in r]
        if val:
            ax.plot(*zip(*val), "o", ms=3, color=line.get_color())
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per byte; dots: validation)")
    ax.set_title("amsp-train: loss curves")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out + "_loss.png")

    fig, ax = plt.subplots(figsize=(6.4, 0.5 + 0.4 * len(runs)), dpi=100)
    names = [label(final) for _, final in runs]
    compute = [statistics.median(r["compute_ms"] for r in steps) for steps, _ in runs]
    comm = [statistics.median(r["comm_ms"] for r in steps) for steps, _ in runs]
    ax.barh(names, compute, label="compute")
    ax.barh(names, comm, left=compute, label="exposed communication")
    ax.set_xlabel("median ms per step (rank 0)")
    ax.invert_yaxis()
    ax.legend(fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(args.out + "_step_time.png")


if __name__ == "__main__":
    main()
