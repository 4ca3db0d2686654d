"""A Neural Turing Machine's memory in a notebook: where its heads wrote and read, step by step.

Graves, Wayne & Danihelka 2014, "Neural Turing Machines", Figure 6 (Ba (CSC413 Lecture 8),
"Neural Turing Machines"): time across, memory locations down, each head's weighting ``w_t(i)``
as a grey level (white 0, black 1, as attnlab's own NTM figures) — the copy task's write head
walking down the memory while the input comes in, the read head walking the same locations while
it is written out — above them,
when given, the inputs, targets, outputs and the write head's add vectors. A panel travels as
uint8 levels between its bounds (:func:`attnlab.views.encode.levels_between`).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from attnlab.views.encode import as_tensor, levels_between
from attnlab.views.html import View


def _heads(values: Any, name: str) -> Tensor:
    """``(T, N)`` or ``(T, heads, N)`` as ``(T, heads, N)``."""
    tensor = as_tensor(values, name)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(1)
    if tensor.dim() != 3 or 0 in tensor.shape:
        raise ValueError(f"{name} must be (T, N) or (T, heads, N), got shape {tuple(tensor.shape)}")
    return tensor


class MemoryView(View):
    """Panels ``(name, image (rows, T), row label, first row's index)``, time across."""

    kind = "memory"

    def __init__(self, panels: list[tuple[str, Tensor, str, int]], title: str | None) -> None:
        self.panels, self.title = panels, title

    def data(self) -> dict[str, Any]:
        out = []
        for name, image, label, first in self.panels:
            signed = float(image.min()) < 0
            top = max(float(image.abs().max()), 1.0)
            low, high = (-top, top) if signed else (0.0, top)
            out.append({"name": name, "rows": image.shape[0], "first": first, "label": label,
                        "signed": signed, "lo": low, "hi": high, "data": levels_between(image, low, high)})
        return {"steps": self.panels[0][1].shape[1], "panels": out}

    def figure(self) -> Any:
        from attnlab.visualize.memory import memory_figure

        panels = [(name, image.numpy(), label, first) for name, image, label, first in self.panels]
        return memory_figure(panels, title=self.title or "")


def ntm_memory(reads: Any, writes: Any, *, inputs: Any = None, targets: Any = None, outputs: Any = None,
               adds: Any = None, locations: tuple[int, int] | None = None,
               title: str | None = None) -> MemoryView:
    """An NTM's read and write weightings over time: ``reads`` ``(T, N)`` or ``(T, R, N)``,
    ``writes`` ``(T, N)`` or ``(T, W, N)`` (an :class:`~attnlab.models.ntm.NTMTrace`'s, one
    sequence), and, when given, ``inputs`` ``(T, in)``, ``targets`` and ``outputs`` ``(T, out)``
    (probabilities), ``adds`` ``(T, M)`` or ``(T, W, M)``. ``locations`` ``(start, stop)``: the
    span of memory drawn (default all of it)."""
    read, write = _heads(reads, "reads"), _heads(writes, "writes")
    steps, memory = read.shape[0], read.shape[-1]
    if write.shape[0] != steps or write.shape[-1] != memory:
        raise ValueError(f"writes must cover the reads' {steps} steps × {memory} locations, got shape "
                         f"{tuple(write.shape)}")
    start, stop = locations if locations is not None else (0, memory)
    if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start < stop <= memory):
        raise ValueError(f"locations must be (start, stop) with 0 <= start < stop <= {memory}, "
                         f"got {locations!r}")
    panels: list[tuple[str, Tensor, str, int]] = []
    for name, values, label in (("inputs", inputs, "channel"), ("targets", targets, "bit"),
                                ("outputs", outputs, "bit")):
        if values is not None:
            tensor = as_tensor(values, name)
            if tensor.dim() != 2 or tensor.shape[0] != steps:
                raise ValueError(f"{name} must be (T, width) over the reads' {steps} steps, got shape "
                                 f"{tuple(tensor.shape)}")
            panels.append((name, tensor.T, label, 0))
    if adds is not None:
        added = _heads(adds, "adds")
        if added.shape[0] != steps:
            raise ValueError(f"adds must cover the reads' {steps} steps, got shape {tuple(added.shape)}")
        panels += [(_named("add vectors", h, added.shape[1]), added[:, h].T, "memory width", 0)
                   for h in range(added.shape[1])]
    for what, heads in (("write weightings", write), ("read weightings", read)):
        panels += [(_named(what, h, heads.shape[1]), heads[:, h, start:stop].T, "location", start)
                   for h in range(heads.shape[1])]
    return MemoryView(panels, title)


def _named(what: str, head: int, heads: int) -> str:
    return what if heads == 1 else f"{what}, head {head + 1}"
