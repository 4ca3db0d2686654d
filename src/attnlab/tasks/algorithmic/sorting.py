"""How a Neural Turing Machine sorts: Graves, Wayne & Danihelka (2014), "Neural Turing
Machines", §4.5 and Figure 17 (Ba (CSC413 Lecture 8), "Neural Turing Machines").

The paper's reading of its priority-sort machine: each vector is *written at a location set by
its priority*, and the reads then *walk the memory in order*. Both are measured on a trace
(:class:`attnlab.models.ntm.NTMTrace`) of sequences in the layout of
:func:`attnlab.data.algorithmic.priority_sort` (``length`` inputs, a delimiter, ``keep``
answers; the priority in channel ``bits``):

* the **write location** of input ``i`` is the location of largest weight in one write
  head's weighting at step ``i`` ``(B, length)``; its Spearman rank correlation with the
  priorities, per sequence, averaged, is ``write_rank_correlation`` (±1: the location is a
  monotone function of the priority). Heads share the work (one may store the vectors in
  input order, another by priority), so the head is ``head``, the one (for all sequences)
  with the largest mean ``|ρ|``. The memory is a ring (the shifts of eq. 8 wrap around), so
  locations are counted from ``cut``: the location at which cutting the ring gives that head
  the largest mean ``|ρ|`` (location ``N − 1`` next to 0 is one step, not ``N − 1``);
* the **read location** of answer step ``k`` is the location of largest weight in the sum of
  the read heads' weightings; ``reads_find_writes`` is the share of answer steps whose read
  location is that head's write location of the vector the answer must return (the k-th
  highest priority), and ``read_rank_correlation`` the Spearman correlation of the read
  locations with the answer steps (±1: the reads walk the memory in
  one direction);
* where locations are few, vectors of close priority **share** one: ``shared_location`` is
  the share of answer steps whose vector's write location holds another input's too, and,
  given the bit errors of each answer step, ``errors_at_shared`` the share of all bit errors
  made at those steps (near 1: the sort fails where vectors collide).

:func:`sort_mechanism` returns the numbers and the arrays the picture
(:func:`attnlab.visualize.plot_sort_mechanism`) draws.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["SortMechanism", "ranks", "sort_mechanism", "spearman"]


def ranks(values: Tensor) -> Tensor:
    """Ranks ``1 … n`` along the last dimension, ties given their average rank (float64)."""
    values = values.double()
    below = (values.unsqueeze(-1) > values.unsqueeze(-2)).sum(-1).double()  # how many are smaller
    equal = (values.unsqueeze(-1) == values.unsqueeze(-2)).sum(-1).double()
    return below + (equal + 1) / 2


def spearman(a: Tensor, b: Tensor) -> Tensor:
    """Spearman's rank correlation of ``a`` and ``b`` along the last dimension (the Pearson
    correlation of their ranks); 0 where either is constant."""
    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(-1, keepdim=True), rb - rb.mean(-1, keepdim=True)
    norm = (ra.square().sum(-1) * rb.square().sum(-1)).sqrt()
    return torch.where(norm > 0, (ra * rb).sum(-1) / norm.clamp_min(1e-300), torch.zeros_like(norm))


class SortMechanism(NamedTuple):
    """``priority``, ``write_location (B, length)``; ``read_location``, ``wanted_location
    (B, keep)`` (where the answer's vector was written), all counted from ``cut``, for the
    write head ``head``; the averages of the module docstring (``errors_at_shared`` is NaN
    without the errors)."""

    head: int
    cut: int
    priority: Tensor
    write_location: Tensor
    read_location: Tensor
    wanted_location: Tensor
    write_rank_correlation: float
    reads_find_writes: float
    read_rank_correlation: float
    shared_location: float
    errors_at_shared: float


def sort_mechanism(
    inputs: Tensor, write_weights: Tensor, read_weights: Tensor, bits: int, errors: Tensor | None = None
) -> SortMechanism:
    """Measure the paper's two claims on ``inputs (B, T, bits + 2)`` of one length and the
    trace's ``write_weights (B, T, W, N)``, ``read_weights (B, T, R, N)``; ``errors (B, keep)``
    (bit errors of each answer step), when given, are split by shared locations."""
    length = int(torch.nonzero(inputs[0, :, bits + 1] == 1)[0])
    keep = inputs.shape[1] - length - 1
    priority = inputs[:, :length, bits]
    heads, size = write_weights.shape[2], write_weights.shape[-1]
    written = write_weights[:, :length].argmax(-1)  # (B, length, W)
    head, cut = max(((h, c) for h in range(heads) for c in range(size)), key=lambda hc: float(
        spearman(priority, (written[..., hc[0]] - hc[1]) % size).abs().mean()))
    write_location = (written[..., head] - cut) % size
    read_location = (read_weights[:, length + 1:].sum(2).argmax(-1) - cut) % size  # (B, keep)
    order = priority.argsort(dim=1, descending=True)[:, :keep]
    wanted = write_location.gather(1, order)
    steps = torch.arange(keep).expand_as(read_location)
    shared = (wanted.unsqueeze(-1) == write_location.unsqueeze(1)).sum(-1) > 1  # (B, keep)
    at_shared = float("nan")
    if errors is not None and errors.sum() > 0:
        at_shared = float(errors[shared].sum() / errors.sum())
    return SortMechanism(
        head, cut, priority, write_location, read_location, wanted,
        write_rank_correlation=float(spearman(priority, write_location).mean()),
        reads_find_writes=float((read_location == wanted).double().mean()),
        read_rank_correlation=float(spearman(steps, read_location).mean()),
        shared_location=float(shared.double().mean()), errors_at_shared=at_shared,
    )
