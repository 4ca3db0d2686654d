"""What machine a benchmark ran on: CPU model and the flags that decide its speed, torch, threads,
and the matmul ceilings measured here and now.

Machines of one kind differ: an Intel CPU with AMX reaches about 2,200 GFLOP/s in bf16 matmul
and an AMD EPYC with avx512_bf16 but no AMX about 400-420 on two threads, so an absolute tokens/s says little
without the machine. Every benchmark prints :func:`header` first; docs/benchmarks.md quotes
ratios measured in one run first and absolute figures with their machine.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import torch

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_model() -> str:
    """``model name`` from ``/proc/cpuinfo`` (else what the platform module says)."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The speed-relevant flags of :data:`FLAGS` this CPU has (AVX-512, bf16, AMX)."""
    info = Path("/proc/cpuinfo")
    if not info.is_file():
        return []
    for line in info.read_text().splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [flag for flag in FLAGS if flag in have]
    return []


def matmul_gflops(dtype: torch.dtype, n: int = 2048, seconds: float = 0.5) -> float:
    """Best sustained ``n × n`` matmul rate in GFLOP/s (``2 n³`` a product) in ``dtype``."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(2):
        torch.mm(a, b)  # warm-up: kernel choice, first-touch page faults
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e9)
    return best


def header() -> str:
    """Three lines: CPU and flags; torch, threads, capability; the measured matmul ceilings."""
    flags = ", ".join(cpu_flags()) or "none of " + ", ".join(FLAGS)
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    threads = torch.get_num_threads()
    return (
        f"CPU: {cpu_model()} ({platform.machine()}); flags: {flags}\n"
        f"torch {torch.__version__}, {threads} thread{'' if threads == 1 else 's'}, "
        f"{torch.backends.cpu.get_cpu_capability()}\n"
        f"matmul ceiling measured now (2048²): fp32 {fp32:,.0f} GFLOP/s, bf16 {bf16:,.0f} GFLOP/s"
    )


if __name__ == "__main__":
    print(header())
