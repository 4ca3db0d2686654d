"""The Neural Turing Machine's algorithmic tasks as seeded generators, in the formats of
Graves, Wayne & Danihelka (2014), "Neural Turing Machines", §4.

Every task returns an :class:`Episode` batch: ``inputs (B, T, input_dim)`` of 0/1 (plus
scalar channels where the task has them), ``targets (B, T, output_dim)`` and ``mask (B, T)``,
True where the output is scored (the answer phase). Bits are Bernoulli(½); one generator
draws every sequence of a batch at the same length, so a batch is one tensor.

* **copy** — ``length`` random vectors of ``bits``, then a step with the delimiter channel
  on; then ``length`` blank steps during which the sequence must come back (§4.1).
* **repeat copy** — the sequence, then a delimiter step carrying the number of repeats
  (divided by ``max_repeats``) in its own channel; the output is the sequence that many times
  and then an end marker in an extra output channel (§4.2).
* **associative recall** — ``items`` items of ``item_length`` vectors, each opened by an
  item-delimiter step; then a query item between two query-delimiter steps; the answer is the
  item that followed the query in the list (§4.3).
* **priority sort** — ``length`` vectors, each with a priority drawn uniformly from
  ``[−1, 1]`` in its own channel; after the delimiter the ``keep`` highest-priority vectors
  come out sorted from highest to lowest priority (§4.5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.validation import check_positive

__all__ = [
    "TASKS", "Episode", "associative_recall", "copy_sequence", "priority_sort", "repeat_copy", "task_dims",
]


class Episode(NamedTuple):
    """A batch of one task: ``inputs (B, T, input_dim)``, ``targets (B, T, output_dim)``,
    ``mask (B, T)`` (True where the output is scored)."""

    inputs: Tensor
    targets: Tensor
    mask: Tensor


def _bits(generator: torch.Generator, *shape: int) -> Tensor:
    return torch.randint(0, 2, shape, generator=generator).float()


def _check(**values: int) -> None:
    for name, value in values.items():
        check_positive(name, value)


def copy_sequence(batch: int, length: int, *, bits: int = 8, generator: torch.Generator) -> Episode:
    """Copy (§4.1): ``T = 2 · length + 1``; input width ``bits + 1``, output width ``bits``."""
    _check(batch=batch, length=length, bits=bits)
    seq = _bits(generator, batch, length, bits)
    steps = 2 * length + 1
    inputs = torch.zeros(batch, steps, bits + 1)
    inputs[:, :length, :bits] = seq
    inputs[:, length, bits] = 1.0
    targets = torch.zeros(batch, steps, bits)
    targets[:, length + 1:] = seq
    mask = torch.zeros(batch, steps, dtype=torch.bool)
    mask[:, length + 1:] = True
    return Episode(inputs, targets, mask)


def repeat_copy(
    batch: int, length: int, repeats: int, *, bits: int = 8, max_repeats: int = 10,
    generator: torch.Generator,
) -> Episode:
    """Repeat copy (§4.2): ``T = length + 1 + length · repeats + 1``; input width ``bits + 2``
    (delimiter, repeat count / ``max_repeats``), output width ``bits + 1`` (end marker)."""
    _check(batch=batch, length=length, repeats=repeats, bits=bits, max_repeats=max_repeats)
    seq = _bits(generator, batch, length, bits)
    answer = length * repeats
    steps = length + 1 + answer + 1
    inputs = torch.zeros(batch, steps, bits + 2)
    inputs[:, :length, :bits] = seq
    inputs[:, length, bits] = 1.0
    inputs[:, length, bits + 1] = repeats / max_repeats
    targets = torch.zeros(batch, steps, bits + 1)
    targets[:, length + 1:length + 1 + answer, :bits] = seq.repeat(1, repeats, 1)
    targets[:, -1, bits] = 1.0
    mask = torch.zeros(batch, steps, dtype=torch.bool)
    mask[:, length + 1:] = True
    return Episode(inputs, targets, mask)


def associative_recall(
    batch: int, items: int, *, item_length: int = 3, bits: int = 6, generator: torch.Generator
) -> Episode:
    """Associative recall (§4.3): ``T = (item_length + 1) · items + item_length + 2 +
    item_length``; input width ``bits + 2`` (item and query delimiters), output width ``bits``.
    The query is any item but the last, drawn uniformly."""
    _check(batch=batch, bits=bits, item_length=item_length)
    if items < 2:
        raise ValueError(f"items must be at least 2 (a query and the item after it), got {items}")
    seq = _bits(generator, batch, items, item_length, bits)
    query = torch.randint(0, items - 1, (batch,), generator=generator)
    rows = torch.arange(batch)
    step = item_length + 1
    listed = items * step
    steps = listed + item_length + 2 + item_length
    inputs = torch.zeros(batch, steps, bits + 2)
    for i in range(items):
        inputs[:, i * step, bits] = 1.0
        inputs[:, i * step + 1:(i + 1) * step, :bits] = seq[:, i]
    inputs[:, listed, bits + 1] = 1.0
    inputs[:, listed + 1:listed + 1 + item_length, :bits] = seq[rows, query]
    inputs[:, listed + 1 + item_length, bits + 1] = 1.0
    targets = torch.zeros(batch, steps, bits)
    targets[:, -item_length:] = seq[rows, query + 1]
    mask = torch.zeros(batch, steps, dtype=torch.bool)
    mask[:, -item_length:] = True
    return Episode(inputs, targets, mask)


def priority_sort(
    batch: int, length: int, *, keep: int | None = None, bits: int = 8, generator: torch.Generator
) -> Episode:
    """Priority sort (§4.5; the paper sorts 20 vectors and keeps 16): ``T = length + 1 + keep``;
    input width ``bits + 2`` (priority, delimiter), output width ``bits``."""
    keep = length if keep is None else keep
    _check(batch=batch, length=length, keep=keep, bits=bits)
    if keep > length:
        raise ValueError(f"keep must be at most length ({length}), got {keep}")
    seq = _bits(generator, batch, length, bits)
    priority = torch.rand(batch, length, generator=generator) * 2 - 1
    order = priority.argsort(dim=1, descending=True)[:, :keep]
    steps = length + 1 + keep
    inputs = torch.zeros(batch, steps, bits + 2)
    inputs[:, :length, :bits] = seq
    inputs[:, :length, bits] = priority
    inputs[:, length, bits + 1] = 1.0
    targets = torch.zeros(batch, steps, bits)
    targets[:, length + 1:] = seq[torch.arange(batch)[:, None], order]
    mask = torch.zeros(batch, steps, dtype=torch.bool)
    mask[:, length + 1:] = True
    return Episode(inputs, targets, mask)


TASKS: dict[str, Callable[..., Episode]] = {
    "copy": copy_sequence,
    "repeat_copy": repeat_copy,
    "associative_recall": associative_recall,
    "priority_sort": priority_sort,
}
"""Every task by the name a recipe gives it."""


def task_dims(name: str, bits: int) -> tuple[int, int]:
    """``(input_dim, output_dim)`` of task ``name`` with ``bits``-wide vectors."""
    widths = {"copy": (1, 0), "repeat_copy": (2, 1), "associative_recall": (2, 0), "priority_sort": (2, 0)}
    if name not in widths:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {name!r}")
    extra_in, extra_out = widths[name]
    return bits + extra_in, bits + extra_out
