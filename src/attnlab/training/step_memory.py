"""The peak of live tensor memory of a training run, measured on the steps that set it.

A step's tensors — the parameters, their gradients, the optimizer's state, the batch and the
activations the backward pass keeps — peak inside the step, and how high depends on the
batch: the activations grow with its padded size. So the trainer measures
(:class:`~attnlab.measure.footprint.LivePeak`) its first step, which also creates the
optimizer's state, and every later step whose batches hold more elements than any step
measured before; the others run untouched. In a stream of randomly sized batches a new
largest one comes about ln(steps) times (8 in 2,800 steps); a language model's fixed-shape
windows are measured once. The gradients are cleared before a measured step (the step clears
them first anyway), so the bytes alive before it are all visible to Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from attnlab.measure.footprint import LivePeak

__all__ = ["StepMemory", "batch_elements"]


def batch_elements(batch: Any) -> int:
    """Elements of every tensor in ``batch``: a tensor, a tuple, list or dict of them, or a
    dataclass (a :class:`~attnlab.data.Batch`) holding them."""
    if isinstance(batch, torch.Tensor):
        return batch.numel()
    if isinstance(batch, tuple | list):
        return sum(batch_elements(item) for item in batch)
    if isinstance(batch, Mapping):
        return sum(batch_elements(item) for item in batch.values())
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return sum(batch_elements(getattr(batch, f.name)) for f in dataclasses.fields(batch))
    return 0


class StepMemory:
    """Runs the training steps, measuring the live tensor peak on those that may set it
    (see the module docstring). ``enabled=False`` (a GPU run: its allocator keeps its own
    peak) runs every step untouched; ``peak`` is then ``None``."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, enabled: bool) -> None:
        self.optimizer, self.enabled = optimizer, enabled
        self.live = LivePeak()
        self._largest = -1

    def run(self, step: Callable[[], None], micro: list) -> None:
        """``step()``, the optimizer step over the micro-batches ``micro``."""
        size = batch_elements(micro)
        if not self.enabled or size <= self._largest:
            step()
            return
        self._largest = size
        self.optimizer.zero_grad(set_to_none=True)
        self.live.watch(step)

    @property
    def peak(self) -> int | None:
        return self.live.peak if self.enabled and self.live.probes else None
