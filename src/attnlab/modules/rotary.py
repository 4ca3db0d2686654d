"""Rotary position embedding (RoPE; Su et al. 2021), one of the positional families of
:mod:`attnlab.modules.positional` (Steinert-Threlkeld (Transformers I), "Fancier ways of
representing positional info").

Queries and keys are rotated, not the token embeddings, so ``q·k`` depends on the relative
position only. The cos/sin tables are computed once per device and dtype and sliced for each
call (a training step, a decoding step).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.validation import check_positive


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE; Su et al. 2021, eq. 34).

    Each pair ``(x_{2i}, x_{2i+1})`` of a head's query or key at position ``m`` is rotated by
    the angle ``m θ_i`` with ``θ_i = base^{-2i/d_h}``. Rotations compose, so
    ``⟨R_m q, R_n k⟩ = ⟨q, R_{n-m} k⟩``: scores depend only on the relative position.
    Called as ``q, k = rope(q, k, offset)`` on ``(B, H, n, d_h)`` tensors; ``k`` may be
    ``None`` (cross-attention reuses cached keys) and ``offset`` is the number of cached
    positions, so queries and new keys sit at ``offset .. offset+n-1``.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        check_positive("head_dim", head_dim)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {head_dim}")
        self.head_dim, self.base = head_dim, base
        self._tables: dict[tuple[torch.device, torch.dtype], Tensor] = {}

    def rotations(self, n: int, offset: int, like: Tensor) -> Tensor:
        """``e^{i m θ_i}`` for positions ``m = offset .. offset+n-1``: ``(n, d_h/2)`` complex
        (complex128 for a float64 ``like``, else complex64), on ``like``'s device.

        Rows of a table computed once per device and precision (angles in float64, float32 on
        MPS) and doubled when a longer sequence comes, so a training or decoding step only
        slices it (cos/sin cached per length and device). The table never
        joins autograd, even when first built while decoding.
        """
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        key = (like.device, torch.complex128 if like.dtype == torch.float64 else torch.complex64)
        table = self._tables.get(key)
        if table is None or table.shape[0] < offset + n:
            length = max(offset + n, 2 * (0 if table is None else table.shape[0]), 64)
            table = self._tables[key] = self._build(length, *key)
        return table[offset : offset + n]

    def _build(self, length: int, device: torch.device, dtype: torch.dtype) -> Tensor:
        exact = torch.float32 if device.type == "mps" else torch.float64
        with torch.inference_mode(False), torch.no_grad():
            pos = torch.arange(length, device=device, dtype=exact)  # (L,)
            two_i = torch.arange(0, self.head_dim, 2, device=device, dtype=exact)  # (d_h/2,)
            angle = pos[:, None] * self.base ** (-two_i / self.head_dim)  # (L, d_h/2): m θ_i
            return torch.polar(torch.ones_like(angle), angle).to(dtype)  # e^{i m θ_i}

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate ``x`` ``(..., n, d_h)`` whose rows sit at positions ``offset .. offset+n-1``.

        Each pair is the complex number ``x_{2i} + i x_{2i+1}`` (Su et al. eq. 34's form) and is
        multiplied by ``e^{i m θ_i}``: ``(x_{2i} cos − x_{2i+1} sin, x_{2i} sin + x_{2i+1} cos)``
        in one complex product, in float32 (float64 for float64 ``x``), cast back to ``x``'s dtype.
        """
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x has head width {x.shape[-1]} but head_dim is {self.head_dim}")
        return self._turn(x, self.rotations(x.shape[-2], offset, x))  # (n, d_h/2) complex

    def shift(self, x: Tensor, by: int) -> Tensor:
        """Move rows of ``x`` ``(..., n, d_h)`` that were rotated at positions ``m`` to ``m + by``
        (``by`` may be negative): one more rotation by ``by θ_i``, since rotations compose
        (``R_{m+by} = R_by R_m``). A KV cache that evicts positions moves its later keys back so
        (:func:`attnlab.generation.streaming.evict`)."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x has head width {x.shape[-1]} but head_dim is {self.head_dim}")
        rotation = self.rotations(1, abs(by), x)  # (1, d_h/2): e^{i |by| θ_i}
        return self._turn(x, rotation if by >= 0 else rotation.conj())

    def _turn(self, x: Tensor, rotation: Tensor) -> Tensor:
        """``x`` ``(..., n, d_h)`` times ``rotation`` ``(n or 1, d_h/2)`` complex, pair by pair."""
        pairs = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        if pairs.stride(-1) != 1 or pairs.storage_offset() % 2 or any(s % 2 for s in pairs.stride()[:-1]):
            pairs = pairs.clone(memory_format=torch.contiguous_format)  # complex view: (re, im) adjacent
        rotated = torch.view_as_complex(pairs.unflatten(-1, (-1, 2))) * rotation  # (..., n, d_h/2)
        return torch.view_as_real(rotated).flatten(-2).to(x.dtype)  # (..., n, d_h)

    def forward(self, q: Tensor, k: Tensor | None, offset: int = 0) -> tuple[Tensor, Tensor | None]:
        return self.rotate(q, offset), None if k is None else self.rotate(k, offset)

    def __getstate__(self) -> dict:  # the tables are a cache: not pickled (nor deep-copied)
        return {**super().__getstate__(), "_tables": {}}
