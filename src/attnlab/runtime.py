"""Process settings for fast CPU training: how many threads, and glibc's memory reuse.

:func:`set_threads` gives torch its intra- and inter-op thread counts once, at the start of a
command (``attnlab --threads N``). Without ``--threads`` it takes ``$OMP_NUM_THREADS`` when that
is set (so ``OMP_NUM_THREADS=1 attnlab train ...`` keeps working on a busy machine) and
otherwise every core this process may run on; ``--threads`` wins over ``$OMP_NUM_THREADS``.

glibc's ``malloc`` hands every block above 128 KiB straight back to the kernel when it is
freed, so each training step maps its large activations afresh and pays a page fault per
4 KiB page on first touch. On the 2-core machine of docs/benchmarks.md that doubled the cost
of a translation training step (bf16, 4,500 tokens: 1,371 ms → 672 ms per step once freed
memory is kept). :func:`keep_freed_memory` raises glibc's mmap and trim thresholds so freed
blocks stay in the heap and are reused. The cost is memory: as the batch shapes vary the kept
heap fragments and grows (the Bahdanau recipe's first 150 steps peaked at 3.06 GB resident
against 603 MB of live tensors). So the ``attnlab`` command calls it only when it runs on
glibc: where TCMalloc is installed it runs on that instead (:mod:`attnlab.allocator`: 2.04 GB
in the same time). Library users who run their own loops on glibc can call it themselves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["KERNEL_CACHE_CAPACITY", "bound_kernel_caches", "keep_freed_memory", "set_threads"]

# mallopt parameter numbers from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(mmap_threshold: int = 1 << 30, top_pad: int = 256 << 20) -> bool:
    """Ask glibc to keep freed memory for reuse; returns False where that is not possible.

    Args:
        mmap_threshold: blocks at least this large are still mapped separately (bytes).
        top_pad: extra bytes obtained from the kernel with each heap extension.

    Returns:
        True when every setting was accepted (Linux with glibc), False elsewhere — on macOS,
        Windows or musl it does nothing.
    """
    if mmap_threshold <= 0 or top_pad < 0:
        raise ValueError(
            f"mmap_threshold must be > 0 and top_pad >= 0, got {mmap_threshold} and {top_pad}"
        )
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = [(_M_MMAP_THRESHOLD, mmap_threshold), (_M_TRIM_THRESHOLD, 2**31 - 1), (_M_TOP_PAD, top_pad)]
    return all(mallopt(param, min(value, 2**31 - 1)) == 1 for param, value in settings)


KERNEL_CACHE_CAPACITY = 32  # oneDNN kernels kept for reuse, per cache (each ~0.2 MB and more)


def bound_kernel_caches(capacity: int = KERNEL_CACHE_CAPACITY) -> dict[str, str]:
    """Keep at most ``capacity`` compiled oneDNN matrix-product kernels in each of the two caches
    that hold them (oneDNN's own and ideep's, torch's bf16 CPU matmuls), unless the environment
    already says (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, ``LRU_CACHE_CAPACITY``); returns what it set.

    Both default to 1,024 kernels, and a bf16 matmul of each new shape compiles one of about
    0.2 MB that stays. Batches of varying shapes fill them: on the Bahdanau recipe's first 150
    steps they held about 0.6 GB (a heap profile by allocation site), and bounding both at 32
    took its resident peak from 2.01 to 1.38 GB in the same time (docs/benchmarks.md, "Memory").
    Both are read when torch compiles its first such kernel, so call this before any runs.
    """
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    chosen = {name: str(capacity) for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
              if name not in os.environ}
    os.environ.update(chosen)
    return chosen


def set_threads(threads: int | None = None) -> int:
    """Give torch ``threads`` intra-op and inter-op threads (see the module docstring for the
    default) and return the number set."""
    import torch

    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    n = threads or _env_threads() or _available_cores()
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # torch sets it once, before any parallel work; keep the first value
        pass
    return n


def _available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _env_threads() -> int | None:
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None
