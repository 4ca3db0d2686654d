"""Gradient-based explanations: gradient × attention and integrated gradients.

**Gradient × attention** of an output ``f`` over the attention maps ``A`` it was computed with
is ``A ⊙ ∂f/∂A``: the first-order change of ``f`` when each weight is scaled, since
``d f((1 + ε) A_ij) / dε = A_ij ∂f/∂A_ij`` at ``ε = 0``. Summed per key (:func:`per_key`)
over the row that wrote the output (every head and layer; a recurrent decoder: its step), it
weighs what that output read by what the output gained from it; summed over every row (and
step), it is the first-order effect of any query reading that key at all.
The maps are the tensors the model computed with (:mod:`attnlab.explain.recording`), so
``torch.autograd.grad`` reaches them.

**Integrated gradients** (Sundararajan, Taly & Yan 2017, "Axiomatic Attribution for Deep
Networks", eq. 1 and §6) of ``f`` at input ``x`` from a ``baseline`` ``x'``::

    IG_i(x) = (x_i − x'_i) ∫_0^1 ∂f(x' + κ (x − x')) / ∂x_i dκ

computed with the midpoint rule over ``steps`` points ``κ = (k + ½) / steps``. It is
*complete* (the paper's Proposition 1): ``Σ_i IG_i = f(x) − f(x')``, up to the rule's error,
which :class:`Attribution` reports as ``gap`` so that a caller can see the steps suffice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.validation import check_positive, shape_str

__all__ = ["Attribution", "gradient_x_attention", "integrated_gradients", "per_key"]


def gradient_x_attention(
    output: Tensor, maps: Sequence[Tensor], *, retain_graph: bool = False
) -> list[Tensor]:
    """``A ⊙ ∂output/∂A`` for each map ``A`` of ``maps`` (same shapes), ``output`` a scalar
    computed from them; a map ``output`` does not depend on gets zeros. ``retain_graph``: keep
    the graph for another output's gradients."""
    if output.numel() != 1:
        raise ValueError(f"output must be a scalar, got shape {shape_str(output.shape)}")
    grads = torch.autograd.grad(output.reshape(()), list(maps), retain_graph=retain_graph, allow_unused=True)
    return [(a * g).detach() if g is not None else torch.zeros_like(a).detach()
            for a, g in zip(maps, grads, strict=True)]


def per_key(terms: Sequence[Tensor]) -> Tensor:
    """Gradient × attention terms summed per key: over the maps (each ``(B, ..., n_k)``:
    ``(B, H, n_q, n_k)`` layers, ``(B, n_k)`` steps) and all their axes but the batch and the
    key → ``(B, n_k)``. Pass the maps (or rows) to count: all of them, or those of one output."""
    return sum(t.flatten(1, -2).sum(1) if t.ndim > 2 else t for t in terms)


class Attribution(NamedTuple):
    """Integrated gradients: ``attributions`` ``(m, *x.shape)`` for each of ``m`` outputs, ``ends``
    ``(m, 2)`` the outputs at the baseline and at ``x``, and ``gap`` ``(m,)``:
    ``Σ attributions − (f(x) − f(x'))`` (zero for an exact integral)."""

    attributions: Tensor
    ends: Tensor
    gap: Tensor


def _outputs(f: Callable[[Tensor], Tensor], inputs: Tensor) -> Tensor:
    """``f`` on a batch ``(k, *x.shape)`` as ``(k, m)``: ``f`` may give ``(k,)`` (one output)."""
    out = f(inputs)
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or out.shape[0] != inputs.shape[0]:
        raise ValueError(f"f must map a batch of {inputs.shape[0]} inputs to ({inputs.shape[0]},) or "
                         f"({inputs.shape[0]}, m) outputs, got {shape_str(out.shape)}")
    return out


def integrated_gradients(
    f: Callable[[Tensor], Tensor], x: Tensor, baseline: Tensor | None = None, *, steps: int = 32,
    batch: int | None = None,
) -> Attribution:
    """Integrated gradients of each output of ``f`` at ``x`` from ``baseline`` (default zeros).

    ``f`` takes a batch of inputs ``(k, *x.shape)`` and returns ``(k,)`` or ``(k, m)``: ``m``
    outputs, each attributed (one backward pass each over the same forward). ``steps`` points
    of the midpoint rule, ``batch`` of them a forward pass (default all)."""
    check_positive("steps", steps)
    baseline = torch.zeros_like(x) if baseline is None else baseline
    if baseline.shape != x.shape:
        raise ValueError(f"baseline has shape {shape_str(baseline.shape)} but x has {shape_str(x.shape)}")
    x, baseline = x.detach(), baseline.detach()
    kappas = (torch.arange(steps, dtype=x.dtype, device=x.device) + 0.5) / steps
    total: Tensor | None = None
    for chunk in kappas.split(batch or steps):
        shape = (-1,) + (1,) * x.ndim
        points = (baseline + chunk.view(shape) * (x - baseline)).requires_grad_(True)  # (k, *x.shape)
        with torch.enable_grad():
            out = _outputs(f, points)
            grads = [torch.autograd.grad(out[:, j].sum(), points, retain_graph=j + 1 < out.shape[1])[0].sum(0)
                     for j in range(out.shape[1])]
        summed = torch.stack(grads)  # (m, *x.shape)
        total = summed if total is None else total + summed
    assert total is not None
    attributions = (x - baseline) * total / steps  # (m, *x.shape)
    with torch.no_grad():
        ends = _outputs(f, torch.stack([baseline, x])).T  # (m, 2)
    gap = attributions.flatten(1).sum(1) - (ends[:, 1] - ends[:, 0])
    return Attribution(attributions.detach(), ends.detach(), gap.detach())
