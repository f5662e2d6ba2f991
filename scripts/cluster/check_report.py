"""The cluster check's printed report (scripts/cluster/check.py): per configuration the compute
model and the links the planner priced with, then per schedule the table of measured against
predicted steps, compute and node-link bytes of every plan, the targets (median |error|,
Spearman, the planner's pick against the measured best), and the readings that say what misses:
the missed time against the calls per step, the paper's claim, the separable pairs, the bootstrap
noise floor and, under --diagnose, the best fit of the overheads."""
import statistics

import check_stats
from check_measure import MODES
from check_stats import best_fit, bootstrap_floor, distinct_plans, paper_claim, separable_pairs, summarize, \
    targets_met


def verdict(s):
    """Which of the three targets a summary (check_stats.summarize) meets (check_stats.targets_met)."""
    met = targets_met(s)
    hit = [k for k, ok in met.items() if ok]
    miss = [k for k, ok in met.items() if not ok]
    return "met: " + (", ".join(hit) or "none") + ("; missed: " + ", ".join(miss) if miss else "")


def host_line(config):
    """The host's load and the profiles' passes as the run saved them (check_measure.host_busy);
    runs saved before 2026-12-05's eighteenth session have neither."""
    host = config.get("host")
    passes = len(config.get("profile_passes", [])) or 1
    if not host:
        return f" Profiles: {passes} pass."
    return (f" Host ({host['cpu']}, {host['cpus']} CPUs): {100 * host['busy_before']:.0f} % busy before the "
            f"configuration, {100 * host['busy_after']:.0f} % after (nothing of the check running); "
            f"profiles: the median of {passes} passes.")


def print_tables(config):
    m, links = config["model"], config["links"]
    train_args = f"; amsp-train {config['train_args']}" if config.get("train_args") else ""
    print(f"\n#### {config['mesh']} (ranks per node x nodes), {config['rate']} per node link{train_args}\n")
    print(f"Compute model (calibration points {[(b, round(t, 4)) for b, t in config['calibration']['points']]}): "
          f"{m['seconds_per_sample'] * 1e3:.2f} ms per sequence per rank, {m['update_seconds_per_param'] * 1e9:.2f} ns "
          f"per updated parameter ({m.get('update_from', 'not measured: 0')}), taking turns {m.get('update_turns', 1)} "
          f"ranks a core ({m.get('update_turns_from', 'not priced: 1')}); {m['call_overhead'] * 1e3:.2f} ms per collective {m['overhead_unit']} (from {m['call_overhead_from']}), "
          f"{m['sync_overhead'] * 1e3:.2f} ms per call between compute segments (from {m['sync_overhead_from']}); "
          f"overlap slowdown κ {m['overlap_slowdown']:.3f} (from {m['overlap_slowdown_from']}), "
          f"{m['overlap_call'] * 1e3:.3f} ms per collective call with overlap (from {m['overlap_call_from']}); "
          f"{m['gather_stall'] * 1e3:.2f} ms stall after a gather inside a node (from {m['gather_stall_from']}); "
          f"the last rank enters a step {m['entry_skew'] * 1e3:.2f} ms after the first (from {m['entry_skew_from']}); "
          f"CPU contention, computing ranks:seconds per sequence: {m['contention'][0]}. Analytic links where the profile has no entry: {links['intra_gbytes']:.2f} GB/s "
          f"inside a node, {links['intra_latency'] * 1e3:.2f} / {links['inter_latency'] * 1e3:.2f} ms per intra / "
          f"inter ring step.{host_line(config)}\n")
    for mode, rows in config["tables"].items():
        args = config.get("serial_args", "--no-overlap") if mode == "serial" else " ".join(MODES[mode])
        print(f"{mode} (amsp-train {args or 'default'}; planner's "
              f"{'step with overlap' if mode == 'overlap' else 'step without overlap'}):\n")
        print(f"| plan | p, g, os | measured s/step ({check_stats.STEP_ESTIMATOR} of runs; spread) | predicted | error | compute measured / predicted | "
              "link B/step/node measured | link model | engine inter-node B x R |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            lm = r["link_model"]
            link_err = f" ({100 * (r['link_measured'] / lm - 1):+.1f} %)" if lm else ""
            print(f"| {r['plan']} | {r['shape']} | {r['measured']:.3f} ({100 * r['spread']:.0f} %) | "
                  f"{r['predicted']:.3f} | {100 * (r['predicted'] / r['measured'] - 1):+.0f} % | "
                  f"{r['measured_compute']:.3f} / {r['predicted_compute']:.3f} | {r['link_measured']:.0f} | "
                  f"{lm:.0f}{link_err} | {r['engine_inter_x_ranks']:.0f} |")
        if any(r["computing_predicted"] > 0 or r["computing_measured"] == r["computing_measured"] for r in rows):
            print("\ncomputing ranks beside one rank (CPU contention), predicted / from every rank's waits: " + ", ".join(
                f"{r['plan']} {r['computing_predicted']:.1f} / {r['computing_measured']:.1f}" for r in rows))
        s, distinct = summarize(rows), distinct_plans(rows)
        # Which term is wrong: the part of the step the model misses, against the number of
        # collective calls per step (a per-call cost the back-to-back profile does not see).
        excess = [r["measured"] - r["predicted"] for r in rows]
        calls = [r["calls"] for r in rows]
        per_call = sum(e * c for e, c in zip(excess, calls)) / sum(c * c for c in calls)
        corr = statistics.correlation(calls, excess) if len(set(calls)) > 1 else float("nan")
        print(f"\nmissed time per step vs collective calls per step: {per_call * 1e3:+.1f} ms per call "
              f"(least squares through 0), correlation {corr:+.2f}")
        if "diagnose" in rows[0]:
            # The same for the model without its overheads, against the counts each overhead prices.
            bare = [r["measured"] - r["diagnose"][0] for r in rows]
            print("missed time per step of the model without overheads, correlation with: " + ", ".join(
                f"{name} {statistics.correlation([r['diagnose'][k] for r in rows], bare):+.2f}"
                if len({r['diagnose'][k] for r in rows}) > 1 else f"{name} n/a"
                for name, k in ((f"{config['model']['overhead_unit']}s", 1), ("calls between compute segments", 2))))
        claim = paper_claim(distinct)
        if claim:
            best, peers = claim
            print("paper's claim (the best AMSP preset vs ZeRO-3 and MiCS), measured (predicted): " + ", ".join(
                f"{best['plan']} {best['measured']:.3f} s ({best['predicted']:.3f}) vs {r['plan']} {r['measured']:.3f} s "
                f"({r['predicted']:.3f}): {measured:.2f}x ({predicted:.2f}x)" for r, measured, predicted in peers))
        print(f"median |error| {100 * s['median_abs_error']:.1f} % (target <= 15 %), Spearman {s['spearman']:.3f} "
              f"(>= 0.9), planner's pick {s['pick']} vs measured best {s['best']}: {100 * s['pick_over_best']:+.1f} % "
              f"(<= 5 %); {verdict(s)}")
        if len(distinct) < len(rows):
            merged = ", ".join(r["plan"] for r in distinct if "=" in r["plan"])
            labelled = summarize(rows, merge_identical=False)
            print(f"(one plan under two labels: {merged}, counted once above; counted per label: median |error| "
                  f"{100 * labelled['median_abs_error']:.1f} %, Spearman {labelled['spearman']:.2f}, pick "
                  f"{labelled['pick']} vs measured best {labelled['best']}: {100 * labelled['pick_over_best']:+.1f} %)")
        pairs, right = separable_pairs(distinct)
        floor_error, floor_rho, rho_share, pick_share = bootstrap_floor(distinct)
        print(f"separable pairs (repeats do not overlap): {pairs} of {len(distinct) * (len(distinct) - 1) // 2}, "
              f"ordered right by the planner: {right}; a model exact in expectation, measured again (bootstrap "
              f"of the runs): median |error| {100 * floor_error:.1f} %, Spearman {floor_rho:.2f} (>= 0.9 in "
              f"{100 * rho_share:.0f} % of draws), pick within 5 % in {100 * pick_share:.0f} % of draws")
        if "diagnose" in rows[0]:
            step_s, sync_s, f = best_fit(rows, with_sync=config["model"]["sync_overhead_from"] != "--sync-overhead")
            print(f"diagnosis (overheads fitted to these plans' own steps, not a prediction): {step_s * 1e3:.2f} ms per "
                  f"{config['model']['overhead_unit']}, {sync_s * 1e3:.2f} ms between compute segments: median |error| "
                  f"{100 * f['median_abs_error']:.1f} %, Spearman {f['spearman']:.2f}, pick {100 * f['pick_over_best']:+.1f} %")
        print()
