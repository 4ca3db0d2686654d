"""Timing and peak-memory helpers shared by the benchmark scripts.

Timing. Every candidate gets ``warmup`` untimed calls (first-call costs: kernel selection,
oneDNN primitive creation, page faults on fresh buffers), then the candidates are measured
*interleaved*, round after round (A B, B A, A B, ...), so a burst of background load hits
all of them alike. Each sample is the mean of enough back-to-back calls to last at least
``min_sample_s``; the reported figure is the median over rounds, and a ratio between two
candidates is the median of the per-round ratios (paired, so slow drift cancels).

Peak memory. ``tracemalloc`` only sees Python's own allocator, not tensor storage, so it is
useless for torch. Two honest measures, which agree to within 1-2 % on the attention
benchmark (checked by its table (d)):

* :func:`peak_tensor_memory` (the default): ``torch.profiler`` with ``profile_memory=True``
  records every allocation and free of tensor storage made by PyTorch's CPU allocator; the
  running sum's maximum is the peak number of bytes held above what was live before the call
  — the CPU analogue of ``torch.cuda.max_memory_allocated``. Exact and deterministic, blind
  to background load; it does not see memory that oneDNN/MKL allocate on their own (small).
* :func:`peak_rss_delta`: how far the process's peak resident set size (``VmHWM``) rose above
  its resident size just before the call, the high-water mark being reset through
  ``/proc/self/clear_refs`` (Linux). It counts everything the operating system sees, but only
  in a process started with :data:`PINNED_MALLOC` in its environment (:func:`run_pinned`):
  glibc's default *dynamic* mmap threshold grows up to 32 MiB and then keeps freed blocks in
  its heap, where later tensors reuse them without raising the RSS, so the figure would
  depend on what ran before. Pinned, every block of 64 KiB or more is its own mapping,
  returned to the OS on free. Pinning also makes each new tensor page-fault afresh, which
  slows allocation-heavy code: never take timings in a pinned process.

Both exclude the inputs (allocated before the call) and include the outputs and, for a
backward pass, the saved activations and the gradients.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536"}  # glibc: fixed mmap threshold, 64 KiB
MiB = 1024**2


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 5,
    warmup: int = 1,
    min_sample_s: float = 0.05,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per call of each candidate, ``rounds`` samples each, measured interleaved.

    Returns ``{name: [seconds per call in round 0, round 1, ...]}``. Odd rounds run the
    candidates in reverse order so neither always goes first. With ``budget_s``, slow
    candidates get fewer rounds (never fewer than 3) so that all rounds fit in about that time.
    ``clock``: wall time by default; ``time.thread_time`` counts only this thread's CPU time,
    which other jobs on shared cores disturb far less (right for one-thread runs).
    """
    names = list(fns)
    calls, once_s = {}, {}
    for name in names:
        once = 0.0
        for _ in range(max(1, warmup)):  # the last warm-up call sizes the samples
            start = clock()
            fns[name]()
            once = clock() - start
        calls[name] = max(1, math.ceil(min_sample_s / max(once, 1e-9)))
        once_s[name] = once
    if budget_s is not None:
        round_s = sum(calls[name] * max(once_s[name], 1e-9) for name in names)
        rounds = max(min(rounds, 3), min(rounds, int(budget_s / round_s)))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            fn, number = fns[name], calls[name]
            start = clock()
            for _ in range(number):
                fn()
            samples[name].append((clock() - start) / number)
    return samples


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of ``a[i] / b[i]`` (``< 1`` means ``a`` is faster)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def rss_available() -> bool:
    """Whether :func:`peak_rss_delta` is meaningful here (Linux, started by :func:`run_pinned`)."""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") != PINNED_MALLOC["MALLOC_MMAP_THRESHOLD_"]:
        return False
    try:
        _CLEAR_REFS.write_text("5")
        _read_status_kib("VmHWM")
    except OSError:
        return False
    return True


def run_pinned(argv: list[str]) -> int:
    """Run ``python argv...`` in a child process whose malloc is pinned; returns its exit code."""
    sys.stdout.flush()
    env = {**os.environ, **PINNED_MALLOC}
    return subprocess.run([sys.executable, *argv], env=env, check=False).returncode


def _read_status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{field} not in {_STATUS}")


def peak_rss_delta(fn: Callable[[], object]) -> int:
    """Bytes by which the peak RSS during ``fn()`` exceeds the RSS just before it."""
    gc.collect()
    before = _read_status_kib("VmRSS")
    _CLEAR_REFS.write_text("5")  # reset the high-water mark VmHWM to the current RSS
    result = fn()
    peak = _read_status_kib("VmHWM")
    del result
    return max(0, peak - before) * 1024


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the profiler's C++ log lines (file descriptor 2) for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_tensor_memory(fn: Callable[[], object]) -> int:
    """Peak bytes of tensor storage allocated during ``fn()`` above what was live before it."""
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
        del result
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def peak_memory(fn: Callable[[], object], *, warm: bool = True) -> int:
    """Peak tensor bytes above the inputs during ``fn()`` (:func:`peak_tensor_memory`).

    ``warm`` calls ``fn`` once first, so one-time caches are not counted."""
    if warm:
        fn()
    return peak_tensor_memory(fn)


def peak_memory_both(fn: Callable[[], object]) -> tuple[int, int | None]:
    """``(peak tensor bytes, peak RSS increase)`` from one call of ``fn`` (RSS ``None`` if
    :func:`rss_available` is false; the profiler's own few buffers are counted in it)."""
    if not rss_available():
        return peak_tensor_memory(fn), None
    peak_tensor_memory(lambda: None)  # the profiler's first start maps ~70 MiB of its own
    gc.collect()
    before = _read_status_kib("VmRSS")
    _CLEAR_REFS.write_text("5")
    tensor_peak = peak_tensor_memory(fn)
    return tensor_peak, max(0, _read_status_kib("VmHWM") - before) * 1024
