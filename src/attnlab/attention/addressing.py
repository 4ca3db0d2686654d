"""Memory addressing of the Neural Turing Machine: attention over the rows of a memory matrix.

Graves, Wayne & Danihelka (2014), "Neural Turing Machines", §3 (Ba (CSC413 Lecture 8),
"Neural Turing Machines"). A head holds a weighting ``w`` over the ``N`` locations of a
memory ``M`` of ``N`` rows of width ``M``. Each step it emits a key ``k``, a key strength
``β > 0``, an interpolation gate ``g ∈ [0, 1]``, a distribution ``s`` over the shifts
``−k … k`` and a sharpening exponent ``γ ≥ 1``; the new weighting comes out of four small
steps, one function each::

    w^c_i = softmax_i(β K(k, M_i))                 content addressing     (eq. 5, K = cosine)
    w^g   = g w^c + (1 − g) w_{t−1}                 interpolation          (eq. 7)
    w̃_i  = Σ_j w^g_j s_{(i − j) mod N}              circular shift         (eq. 8)
    w_i   = w̃_i^γ / Σ_j w̃_j^γ                      sharpening             (eq. 9)

Reading and writing use the weighting as attention weights over the rows::

    r   = Σ_i w_i M_i                               read                   (eq. 2)
    M̃_i = M_i ⊙ Π_h (1 − w^h_i e^h)                 erase                  (eq. 3)
    M_i = M̃_i + Σ_h w^h_i a^h                       add                    (eq. 4)

Shapes: memory ``(B, N, M)``; per-head tensors carry a head axis, ``(B, H, …)``: weightings
``(B, H, N)``, keys / erase / add vectors ``(B, H, M)``, scalars ``β, g, γ`` as ``(B, H)``,
shift distributions ``(B, H, 2k + 1)`` over the offsets ``−k … k``.

Every function checks its arguments' shapes for a user; a model that made them itself, every
step (:class:`~attnlab.models.NTM`), passes ``check=False``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.attention.scoring import cosine_score
from attnlab.validation import check_rank, shape_str

__all__ = [
    "address",
    "content_addressing",
    "erase_and_add",
    "interpolate",
    "read_memory",
    "sharpen",
    "shift_weighting",
]


def _check_heads(name: str, x: Tensor, leading: tuple[int, ...], width: int | None) -> None:
    """``x`` is ``(B, H)`` (``width=None``) or ``(B, H, width)`` matching ``leading = (B, H)``."""
    want = leading if width is None else (*leading, width)
    if tuple(x.shape) != want:
        raise ValueError(f"{name} has shape {shape_str(x.shape)}, expected {shape_str(want)}")


def content_addressing(memory: Tensor, key: Tensor, strength: Tensor, *, check: bool = True) -> Tensor:
    """Focus by content (eqs. 5-6): ``w^c_i = softmax_i(β cos(k, M_i))``.

    ``memory (B, N, M)``, ``key (B, H, M)``, ``strength β (B, H)`` → ``(B, H, N)``. A larger
    ``β`` sharpens the focus; ``β = 0`` gives the uniform weighting.
    """
    if check:
        check_rank("memory", memory, 3, "(B, N, M)")
        check_rank("key", key, 3, "(B, H, M)")
        _check_heads("strength", strength, tuple(key.shape[:2]), None)
    similarity = cosine_score(key, memory, check=check)  # (B, H, N)
    return torch.softmax(strength.unsqueeze(-1) * similarity, dim=-1)


def interpolate(content: Tensor, previous: Tensor, gate: Tensor, *, check: bool = True) -> Tensor:
    """Interpolation gate (eq. 7): ``w^g = g w^c + (1 − g) w_{t−1}``.

    ``content``, ``previous (B, H, N)``, ``gate (B, H)`` in ``[0, 1]`` → ``(B, H, N)``. ``g = 0``
    keeps the previous weighting (location-based addressing continues from it).
    """
    if check:
        _check_heads("previous", previous, tuple(content.shape[:2]), content.shape[-1])
        _check_heads("gate", gate, tuple(content.shape[:2]), None)
    g = gate.unsqueeze(-1)
    return g * content + (1 - g) * previous


def shift_weighting(weights: Tensor, shift: Tensor, *, check: bool = True) -> Tensor:
    """Circular convolution with the shift distribution (eq. 8): ``w̃_i = Σ_j w_j s_{(i−j) mod N}``.

    ``weights (B, H, N)``, ``shift (B, H, 2k+1)`` over the offsets ``−k … k`` → ``(B, H, N)``.
    All the mass on offset ``+1`` moves every weight one location forward, the last wrapping
    round to the first. The shift window must not be wider than the memory.
    """
    n, width = weights.shape[-1], shift.shape[-1]
    if check:
        _check_heads("shift", shift, tuple(weights.shape[:2]), width)
        if width % 2 == 0 or width > n:
            raise ValueError(
                f"shift has {width} offsets; expected an odd number 2k+1 no larger than the "
                f"memory's {n} locations"
            )
    reach = width // 2
    moved = [torch.roll(weights, offset, dims=-1) for offset in range(-reach, reach + 1)]
    return (torch.stack(moved, dim=-1) * shift.unsqueeze(-2)).sum(-1)  # (B, H, N)


def sharpen(weights: Tensor, gamma: Tensor, eps: float = 1e-12, *, check: bool = True) -> Tensor:
    """Sharpening (eq. 9): ``w_i = w̃_i^γ / Σ_j w̃_j^γ`` with ``γ ≥ 1``.

    ``weights (B, H, N)``, ``gamma (B, H)`` → ``(B, H, N)``. Computed as
    ``softmax_i(γ log(w̃_i + eps))``, the same quotient in log space: a weight of exactly 0 has
    finite gradients (``0^γ log 0`` would be NaN), and a large γ on a flat weighting cannot
    underflow every power to 0 (``(1/128)^21`` is below float32's range, and ``0 / 0`` is NaN);
    ``γ = 1`` returns the weights (to within ``eps``).
    """
    if check:
        _check_heads("gamma", gamma, tuple(weights.shape[:2]), None)
    return torch.softmax(gamma.unsqueeze(-1) * torch.log(weights + eps), dim=-1)


def address(
    memory: Tensor,
    previous: Tensor,
    key: Tensor,
    strength: Tensor,
    gate: Tensor,
    shift: Tensor,
    gamma: Tensor,
    *,
    check: bool = True,
) -> Tensor:
    """The whole addressing chain (eqs. 5-9): content → interpolation → shift → sharpening.

    ``memory (B, N, M)``, ``previous (B, H, N)``, the head's outputs as in the module
    docstring → the new weighting ``(B, H, N)``, a distribution over locations. Each step
    checks its own arguments once (``check``).
    """
    content = content_addressing(memory, key, strength, check=check)
    interpolated = interpolate(content, previous, gate, check=check)
    return sharpen(shift_weighting(interpolated, shift, check=check), gamma, check=check)


def read_memory(memory: Tensor, weights: Tensor, *, check: bool = True) -> Tensor:
    """Read (eq. 2): ``r = Σ_i w_i M_i``. ``memory (B, N, M)``, ``weights (B, H, N)`` → ``(B, H, M)``."""
    if check:
        check_rank("memory", memory, 3, "(B, N, M)")
        _check_heads("weights", weights, tuple(weights.shape[:2]), memory.shape[1])
    return weights @ memory


def erase_and_add(
    memory: Tensor, weights: Tensor, erase: Tensor, add: Tensor, *, check: bool = True
) -> Tensor:
    """Write (eqs. 3-4): every head erases, then every head adds.

    ``memory (B, N, M)``, ``weights (B, H, N)``, ``erase (B, H, M)`` in ``[0, 1]``,
    ``add (B, H, M)`` → the new memory ``(B, N, M)``. ``M̃ = M ⊙ Π_h (1 − w^h e^hᵀ)``, then
    ``M̃ + Σ_h w^h a^hᵀ``: the erasures multiply, so their order does not matter, nor does the
    order of the additions. ``e = 1`` with a one-hot ``w`` clears that one row exactly.
    """
    if check:
        check_rank("memory", memory, 3, "(B, N, M)")
        leading = tuple(weights.shape[:2])
        _check_heads("weights", weights, leading, memory.shape[1])
        _check_heads("erase", erase, leading, memory.shape[2])
        _check_heads("add", add, leading, memory.shape[2])
    keep = torch.prod(1 - weights.unsqueeze(-1) * erase.unsqueeze(-2), dim=1)  # (B, N, M)
    return memory * keep + weights.transpose(1, 2) @ add
