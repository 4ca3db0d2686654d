"""A process's memory footprint: what the operating system holds for it against what its
tensors need.

* :func:`resident_peak` — the peak resident set size of this process so far (``VmHWM`` on
  Linux; ``getrusage`` elsewhere): every byte the operating system held for it at its peak,
  the interpreter, the libraries and the allocator's kept free blocks included.
* :func:`live_tensor_bytes` — the bytes of CPU tensor storage alive now, each storage counted
  once however many views share it, found through Python's garbage collector: parameters,
  optimizer state, batches, buffers. A tensor held only inside C++ (an autograd graph's saved
  activations, a ``.grad`` never read from Python) is not seen, so call it between steps,
  when no graph is alive and the gradients are cleared.
* :class:`LivePeak` — the peak of live tensor bytes over the calls it watches: the bytes alive
  before a call plus the highest point the call's own allocations reach above them (every
  allocation and free of tensor storage the profiler records:
  :func:`~attnlab.measure.timing.peak_tensor_memory`). That is the CPU analogue of
  ``torch.cuda.max_memory_allocated``: the memory the computation itself needs, against which
  the resident peak shows the allocator's and the process's overhead.
"""

from __future__ import annotations

import atexit
import gc
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from attnlab.measure.timing import peak_tensor_memory

__all__ = [
    "LivePeak", "format_bytes", "live_tensor_bytes", "memory_report", "report_at_exit", "resident_now",
    "resident_peak",
]

_STATUS = Path("/proc/self/status")


def _status_bytes(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def resident_peak() -> int | None:
    """Peak resident set size of this process so far, in bytes (``None`` on Windows)."""
    if (peak := _status_bytes("VmHWM")) is not None:
        return peak
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def resident_now() -> int | None:
    """Resident set size of this process now, in bytes (``None`` where Linux's ``/proc`` is not)."""
    return _status_bytes("VmRSS")


def live_tensor_bytes() -> int:
    """Bytes of CPU tensor storage that Python objects hold now, each storage once."""
    gc.collect()
    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor) and obj.device.type == "cpu" and not obj.is_meta:
            for tensor in (obj, obj.grad) if obj.requires_grad and obj.is_leaf else (obj,):
                if tensor is not None and tensor.layout == torch.strided:
                    try:
                        storage = tensor.untyped_storage()
                        seen[storage.data_ptr()] = storage.nbytes()
                    except RuntimeError:  # a fake tensor of torch.compile's tracing: no storage
                        continue
    return sum(seen.values())


class LivePeak:
    """The peak of live tensor bytes over the calls :meth:`watch` measures (see the module
    docstring); ``probes`` counts them."""

    def __init__(self) -> None:
        self.peak = 0
        self.probes = 0

    def watch(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` once, measuring the live tensor bytes before it and its peak above them."""
        before = live_tensor_bytes()
        self.peak = max(self.peak, before + peak_tensor_memory(fn))
        self.probes += 1


def format_bytes(n: int | float) -> str:
    """``1.84 GB``, ``612 MB``, ``4.1 kB`` (powers of 1000, as ``/usr/bin/time`` users read them)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}" if unit == "GB" else f"{n / size:.0f} {unit}"
    return f"{int(n)} B"


def memory_report(live_peak: int | None, base: int | None = None) -> tuple[dict[str, float | None], str]:
    """The resident peak so far against ``live_peak`` (bytes, or ``None`` when not measured),
    and above ``base``, the resident size before any tensor (the interpreter, torch and its
    libraries: about 0.25 GB, which no allocator can give back):
    ``({"resident_peak_bytes", "live_tensor_peak_bytes", "overhead", "base_bytes",
    "overhead_above_base"}, one printable line)``."""
    resident = resident_peak()  # None on Windows: then only the live peak is known
    above = resident - base if resident is not None and base is not None else None
    figures: dict[str, float | None] = {
        "resident_peak_bytes": resident, "live_tensor_peak_bytes": live_peak,
        "overhead": round(resident / live_peak, 2) if live_peak and resident else None, "base_bytes": base,
        "overhead_above_base": round(above / live_peak, 2) if live_peak and above is not None else None,
    }
    line = "memory: peak resident " + (format_bytes(resident) if resident is not None else "unknown here")
    if live_peak and resident is not None:
        line += f", {resident / live_peak:.1f}x the live tensors' peak of {format_bytes(live_peak)}"
    if live_peak and above is not None:
        line += f" ({above / live_peak:.1f}x above the {format_bytes(base)} of the process before any tensor)"
    return figures, line


def report_at_exit() -> None:
    """Print this process's peak resident memory when it exits (every benchmark ends with it;
    those that measure tensor memory print their tensors' peaks in their tables)."""
    def report() -> None:
        if (peak := resident_peak()) is not None:
            print(f"peak resident memory of this process: {format_bytes(peak)}", flush=True)

    atexit.register(report)
