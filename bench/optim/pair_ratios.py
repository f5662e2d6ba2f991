#!/usr/bin/env python3
"""Pairs each optimizer benchmark with its stream reference in a Google Benchmark JSON file and
prints the ratio of median bytes_per_second (run with --benchmark_repetitions=N so medians exist).
Host results also get the ratio of bytes per second of CPU time (the host benchmarks measure the
process's CPU time, all threads), which moves less than wall-clock time when other processes
compete for the cores (see bench/README.md). With --torch, the output of torch_fused_adamw.py from
the same GPU run: each amsp AdamW benchmark is also divided by torch._fused_adamw_ on the same size
(both count 28 bytes per parameter).
    python3 bench/optim/pair_ratios.py result.json [--torch torch_fused_adamw.txt]
"""
import argparse
import json
import re

SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
PARTNER = {
    "BM_AdamW": "BM_Stream", "BM_AdamW_checked": "BM_Stream", "BM_AdamW_device": "BM_Stream", "BM_Adam": "BM_Stream",
    "BM_AdamW_bf16": "BM_Stream_bf16", "BM_SgdMomentum": "BM_Stream1", "BM_Lion": "BM_Stream1",
    "BM_Accumulate": "BM_Copy", "BM_Accumulate_bf16": "BM_Copy",
}
# amsp benchmarks with torch._fused_adamw_'s byte pattern (fp32 p, g, m, v; no bf16 copy).
TORCH_COMPARABLE = ("BM_AdamW", "BM_AdamW_device")
TORCH_LINE = re.compile(r"torch_fused_adamw/(\d+): median [0-9.]+ ms, bytes_per_second=([0-9.]+)G/s")


def torch_rates(path: str) -> dict:
    """{size: bytes per second} from torch_fused_adamw.py's output."""
    rates = {}
    with open(path) as f:
        for line in f:
            m = TORCH_LINE.search(line)
            if m:
                rates[m.group(1)] = float(m.group(2)) * 1e9
    return rates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("json")
    parser.add_argument("--torch", help="output of bench/optim/torch_fused_adamw.py from the same machine")
    options = parser.parse_args()
    medians = {}
    for b in json.load(open(options.json))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            name, size = b["run_name"].split("/")[:2]
            bytes_per_iteration = b["bytes_per_second"] * b["real_time"] * SECONDS[b["time_unit"]]
            medians[(name, size)] = (b["bytes_per_second"], bytes_per_iteration / (b["cpu_time"] * SECONDS[b["time_unit"]]))
    for (name, size), rate in sorted(medians.items(), key=lambda item: (int(item[0][1]), item[0][0])):
        partner = PARTNER.get(name)
        if partner and (partner, size) in medians:
            ref = medians[(partner, size)]
            print(f"{name}/{size}: {rate[0] / 1e9:6.2f} GB/s  {partner}: {ref[0] / 1e9:6.2f} GB/s  "
                  f"ratio {rate[0] / ref[0]:.3f}  (per CPU second: ratio {rate[1] / ref[1]:.3f})")
    if options.torch:
        torch = torch_rates(options.torch)
        for (name, size), rate in sorted(medians.items(), key=lambda item: (int(item[0][1]), item[0][0])):
            if name in TORCH_COMPARABLE and size in torch:
                print(f"{name}/{size}: {rate[0] / 1e9:6.2f} GB/s  torch._fused_adamw_: {torch[size] / 1e9:6.2f} GB/s  "
                      f"ratio {rate[0] / torch[size]:.3f}")


if __name__ == "__main__":
    main()
