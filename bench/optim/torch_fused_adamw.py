#!/usr/bin/env python3
"""PyTorch's fused CUDA AdamW (torch._fused_adamw_) on the sizes of bench_optim_cuda, for the ratio
amsp BM_AdamW / torch. Timed with CUDA events; bytes as in bench_optim_cuda: 28 per parameter
(read p, g, m, v; write p, m, v). Usage on a GPU machine with PyTorch:
    python3 bench/optim/torch_fused_adamw.py [--repetitions 5]
"""
import argparse
import statistics

import torch


def time_fused_adamw(n: int, iterations: int) -> float:
    p = torch.rand(n, device="cuda") + 0.5
    g = torch.rand(n, device="cuda") - 0.5
    m = torch.zeros(n, device="cuda")
    v = torch.zeros(n, device="cuda")
    steps = torch.zeros((), device="cuda")  # a device step tensor, as the fused optimizer keeps it
    args = dict(lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)
    torch._fused_adamw_([p], [g], [m], [v], [], [steps], **args)  # warm-up
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        torch._fused_adamw_([p], [g], [m], [v], [], [steps], **args)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / 1e3 / iterations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    options = parser.parse_args()
    for n in (1 << 24, 1 << 26, 1 << 28):
        seconds = [time_fused_adamw(n, options.iterations) for _ in range(options.repetitions)]
        median = statistics.median(seconds)
        print(f"torch_fused_adamw/{n}: median {median * 1e3:.3f} ms, bytes_per_second={28 * n / median / 1e9:.1f}G/s")


if __name__ == "__main__":
    main()
