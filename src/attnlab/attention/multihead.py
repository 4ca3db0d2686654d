"""Multi-head attention (Li (Transformer Part I) "Multi-head Attention", López et al. (Attention
Mechanisms), Vaswani et al. eq. 5).

``MultiHead(Q, K, V) = [H_1, …, H_H] W_o`` with ``H_h = Attention(X W_h^q, M W_h^k, M W_h^v)``,
where ``M = X`` for self-attention and the encoder output for cross-attention, and
``H · d_h = d_model``. All heads are computed at once by one projection reshaped to
``(B, H, n, d_h)``.

Incremental decoding keeps the projected keys and values of earlier steps in a
:class:`KVCache`, so each new token costs O(n·d) instead of recomputing the whole prefix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.core import scaled_dot_product_attention
from attnlab.attention.linear import Linear
from attnlab.attention.masks import as_attention_mask
from attnlab.validation import (
    check_floating,
    check_heads,
    check_kv_heads,
    check_positive,
    check_probability,
    check_rank,
    shape_str,
)

_CACHED: Tensor = torch.empty(0)  # sentinel: the cross-attention keys/values come from the cache


class KVCache:
    """Projected keys and values ``(B, H, n, d_h)`` of one attention layer.

    Self-attention appends each step's keys/values into buffers ``(B, H, capacity, d_h)``
    written in place (no ``torch.cat`` per step): the capacity at least doubles when it runs
    out, so ``n`` decoding steps copy O(n) positions in all. :attr:`k` and :attr:`v` are views of
    the ``n`` filled positions. Under autograd (keys that require grad) it concatenates instead,
    so that earlier steps' saved keys are never written over. Cross-attention (``static=True``)
    fills the cache once from the encoder memory (:meth:`fill`) and reuses it for every step.
    """

    MIN_CAPACITY = 32  # positions allocated at the first append (or more, if it brings more)

    def __init__(self, k: Tensor | None = None, v: Tensor | None = None, static: bool = False) -> None:
        self._k, self._v, self.static = k, v, static  # buffers (B, H, capacity, d_h)
        self._n = 0 if k is None else k.shape[-2]

    @property
    def k(self) -> Tensor | None:
        """Cached keys ``(B, H, n, d_h)`` (``None`` before the first step)."""
        return self._filled(self._k)

    @property
    def v(self) -> Tensor | None:
        """Cached values ``(B, H, n, d_h)`` (``None`` before the first step)."""
        return self._filled(self._v)

    def _filled(self, buffer: Tensor | None) -> Tensor | None:
        if buffer is None or buffer.shape[-2] == self._n:
            return buffer
        return buffer.narrow(-2, 0, self._n)  # a view; cheaper than indexing with [..., :n, :]

    @property
    def batch_size(self) -> int | None:
        """Rows ``B`` held (``None`` before the first step)."""
        return None if self._k is None else self._k.shape[0]

    def __len__(self) -> int:
        return self._n

    def fill(self, k: Tensor, v: Tensor) -> None:
        """Hold ``k``, ``v`` ``(B, H, n, d_h)`` as the static keys/values (cross-attention)."""
        self._k, self._v, self._n, self.static = k, v, k.shape[-2], True

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add this step's ``(B, H, n_new, d_h)`` keys/values; return all of them."""
        n, n_new = self._n, k.shape[-2]
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
            if self._k is not None:
                k = torch.cat([self.k, k], dim=-2)  # (B, H, n + n_new, d_h)
                v = torch.cat([self.v, v], dim=-2)
            self._k, self._v, self._n = k, v, n + n_new
            return k, v
        if self._k is None or self._k.shape[-2] < n + n_new:
            self._grow(k, v, max(n + n_new, 2 * n, self.MIN_CAPACITY))
        self._k.narrow(-2, n, n_new).copy_(k)  # in place: positions n .. n + n_new - 1
        self._v.narrow(-2, n, n_new).copy_(v)
        self._n = n = n + n_new
        return self._k.narrow(-2, 0, n), self._v.narrow(-2, 0, n)  # (B, H, n + n_new, d_h)

    def _grow(self, k: Tensor, v: Tensor, capacity: int) -> None:
        """New buffers of ``capacity`` positions holding the ``n`` cached ones."""
        old = (self._k, self._v)
        self._k = k.new_empty((*k.shape[:-2], capacity, k.shape[-1]))
        self._v = v.new_empty((*v.shape[:-2], capacity, v.shape[-1]))
        if old[0] is not None and self._n:
            self._k.narrow(-2, 0, self._n).copy_(old[0].narrow(-2, 0, self._n))
            self._v.narrow(-2, 0, self._n).copy_(old[1].narrow(-2, 0, self._n))

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search reorders hypotheses every step)."""
        if index.dim() != 1 or index.is_floating_point() or index.dtype == torch.bool:
            raise ValueError(
                f"index must be a 1-D integer tensor of batch rows, got shape "
                f"{shape_str(index.shape)} and dtype {index.dtype}"
            )
        if self._k is not None:
            self._k, self._v = self._select_rows(self._k, index), self._select_rows(self._v, index)

    def _select_rows(self, buffer: Tensor, index: Tensor) -> Tensor:
        """Rows ``index`` of ``buffer``, copying only the ``n`` filled positions (a buffer may
        hold up to twice as many)."""
        if buffer.shape[-2] == self._n:
            return buffer.index_select(0, index)
        out = buffer.new_empty((index.shape[0], *buffer.shape[1:]))  # (B', H, capacity, d_h)
        torch.index_select(buffer.narrow(-2, 0, self._n), 0, index, out=out.narrow(-2, 0, self._n))
        return out


def check_cache(name: str, cache: object, batch: int) -> None:
    """``cache`` is ``None`` or a :class:`KVCache` empty or holding ``batch`` rows."""
    if cache is None:
        return
    if not isinstance(cache, KVCache):
        raise TypeError(f"{name} must be a KVCache, got {type(cache).__name__}")
    if cache.batch_size not in (None, batch):
        raise ValueError(f"{name} holds batch size {cache.batch_size} but x has batch size {batch}")


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate heads for self- and cross-attention.

    Args:
        d_model: width ``d`` of the queries' tokens and of the output.
        num_heads: ``H``; must divide ``d_model`` (each head has ``d_h = d_model / H``).
        kdim, vdim: widths of the key and value tokens (default ``d_model``); they may differ
            for cross-attention over a memory of another width.
        bias: add biases to the projections.
        dropout: dropout on the attention weights during training (default 0: on CPU any
            attention dropout disables PyTorch's fused kernel; see docs).
        rotary: optional rotary position embedding applied to the per-head queries and keys,
            called as ``rotary(q, k, offset)``.
        num_kv_heads: ``H_kv`` key/value heads shared by groups of ``H / H_kv`` query heads
            (grouped-query attention, Ainslie et al. 2023; 1 = multi-query, Shazeer 2019;
            default ``H``: every head its own). A cache holds only the ``H_kv`` shared heads.

    Call ``mha(x)`` for self-attention or ``mha(x, memory)`` for cross-attention, with
    ``x`` ``(B, n_q, d_model)`` and ``memory`` ``(B, n_k, kdim)``. Returns ``(B, n_q, d_model)``,
    or ``(output, weights)`` with weights ``(B, H, n_q, n_k)`` when ``return_weights=True``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        rotary: nn.Module | None = None,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        check_heads(d_model, num_heads)
        check_probability("dropout", dropout)
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.num_kv_heads = check_kv_heads(num_heads, num_kv_heads)
        self.kv_dim = self.num_kv_heads * self.head_dim  # the width of the shared keys and values
        for name, dim in (("kdim", kdim), ("vdim", vdim)):
            if dim is not None:
                check_positive(name, dim)
        self.kdim = d_model if kdim is None else kdim
        self.vdim = d_model if vdim is None else vdim
        self.dropout = dropout
        self.rotary = rotary
        self.packed = self.kdim == d_model and self.vdim == d_model
        if self.packed:  # one (d + 2 d_kv, d) matrix: a single matmul for self-attention
            self.in_proj = Linear(d_model, d_model + 2 * self.kv_dim, bias=bias)
        else:
            self.q_proj = Linear(d_model, d_model, bias=bias)
            self.k_proj = Linear(self.kdim, self.kv_dim, bias=bias)
            self.v_proj = Linear(self.vdim, self.kv_dim, bias=bias)
        self.out_proj = Linear(d_model, d_model, bias=bias)

    def _split_heads(self, t: Tensor, heads: int | None = None) -> Tensor:
        b, n, _ = t.shape
        return t.view(b, n, heads or self.num_heads, self.head_dim).transpose(1, 2)  # (B, heads, n, d_h)

    def _kv_heads(self, t: Tensor) -> Tensor:
        return self._split_heads(t, self.num_kv_heads)  # (B, H_kv, n, d_h)

    def _linear(self, which: str, t: Tensor) -> Tensor:
        """Apply the ``which`` ∈ {q, k, v} projection (a slice of ``in_proj`` when packed)."""
        if not self.packed:
            return getattr(self, f"{which}_proj")(t)
        start = {"q": 0, "k": self.d_model, "v": self.d_model + self.kv_dim}[which]
        rows = slice(start, start + (self.d_model if which == "q" else self.kv_dim))
        b = self.in_proj.bias
        return F.linear(t, self.in_proj.weight[rows], None if b is None else b[rows])

    def _self_heads(self, x: Tensor, offset: int) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's queries ``(B, H, n, d_h)``, keys and values ``(B, H_kv, n, d_h)``: one
        matmul, one view; queries and keys rotated (positions ``offset..``) by a rotary embedding."""
        h, h_kv = self.num_heads, self.num_kv_heads
        b, n, _ = x.shape
        heads = self.in_proj(x).view(b, n, h + 2 * h_kv, self.head_dim).transpose(1, 2)  # (B, H+2Hkv, n, d_h)
        q, k, v = heads.split([h, h_kv, h_kv], dim=1)
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset)
        return q, k, v

    def _project(
        self, x: Tensor, memory: Tensor, value: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Cross-attention: queries from ``x``; keys from ``memory``; values from ``value`` (or
        ``memory``); no keys/values when ``memory`` is ``_CACHED``. Each ``(B, n, d)``."""
        d = self.d_model
        q = self._linear("q", x)  # (B, n_q, d)
        if memory is _CACHED:
            return q, None, None
        if self.packed and value is None:  # k and v from the same memory: one matmul
            b = self.in_proj.bias
            kv = F.linear(memory, self.in_proj.weight[d:], None if b is None else b[d:])  # (B, n_k, 2 d_kv)
            k, v = kv.split(self.kv_dim, dim=-1)
            return q, k, v
        return q, self._linear("k", memory), self._linear("v", memory if value is None else value)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        *,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        is_causal: bool = False,
        return_weights: bool = False,
        cache: KVCache | None = None,
        check: bool = True,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``x`` ``(B, n_q, d_model)`` to itself or to ``memory`` ``(B, n_k, kdim)``.

        ``mask`` follows docs/design.md's mask contract (bool ``True`` = allowed, or additive
        float): ``(B, n_k)`` key padding (``True`` = real token), ``(B, n_q, n_k)``, or
        broadcastable to ``(B, H, n_q, n_k)`` with 4 dimensions; with a ``cache`` the keys are
        the cached ones plus the new. ``is_causal`` blocks future keys (bottom-right aligned,
        correct with a cache). ``value`` ``(B, n_k, vdim)`` gives values distinct from the keys'
        tokens ``memory`` (PyTorch's ``mha(query, key, value)``); by default values come from
        ``memory``. ``check=False``: the caller (a layer) has checked the arguments and gives
        ``mask`` in the contract's 4-D form.
        """
        if check:
            self._check_inputs(x, memory, value, cache)
            mask = as_attention_mask(mask, self._scores_shape(x, memory, cache))
        cross = memory is not None
        if cross and cache is not None and cache.static and len(cache) > 0:
            memory = _CACHED  # cross-attention keys/values were computed at the first step
        if memory is None:  # self-attention: one matmul, one view
            q, k, v = self._self_heads(x, 0 if cache is None else len(cache))
        else:
            q, k, v = self._project(x, memory, value)
            q = self._split_heads(q)  # (B, H, n_q, d_h)
            if k is not None:
                k, v = self._kv_heads(k), self._kv_heads(v)  # (B, H_kv, n_new, d_h)
        if cache is not None:
            if cross:
                if k is not None:
                    cache.fill(k, v)
                k, v = cache.k, cache.v
            else:
                k, v = cache.append(k, v)  # (B, H_kv, n_k, d_h)
        # k, v (B, H_kv, n_k, d_h): each shared head serves its group of H / H_kv queries (attention.groups)
        out = scaled_dot_product_attention(
            q, k, v, mask,
            is_causal=is_causal and q.shape[-2] > 1,  # one query, the last: it sees every key
            dropout=self.dropout if self.training else 0.0,
            return_weights=return_weights,
            check=False,
        )
        out, weights = out if return_weights else (out, None)
        b, _, n_q, _ = out.shape
        out = self.out_proj(out.transpose(1, 2).reshape(b, n_q, self.d_model))  # (B, n_q, d)
        return (out, weights) if return_weights else out

    def _scores_shape(self, x: Tensor, memory: Tensor | None, cache: KVCache | None) -> tuple[int, ...]:
        """``(B, H, n_q, n_k)``: the keys are the cached and the new ones (self-attention), the
        memory's, or those a static cache already holds (cross-attention)."""
        b, n_q, _ = x.shape
        if memory is None:
            n_k = n_q + (len(cache) if cache is not None else 0)
        else:
            n_k = len(cache) if cache is not None and cache.static and len(cache) else memory.shape[1]
        return b, self.num_heads, n_q, n_k

    def _check_inputs(
        self, x: Tensor, memory: Tensor | None, value: Tensor | None, cache: KVCache | None
    ) -> None:
        check_rank("x", x, 3, "(B, n, d_model)")
        self._check_dtype("x", x)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but d_model is {self.d_model}")
        check_cache("cache", cache, x.shape[0])
        if memory is None:
            if value is not None:
                raise ValueError("value was given without memory; pass memory (the keys' tokens) too")
            if not self.packed:
                raise ValueError(
                    f"self-attention needs kdim = vdim = d_model={self.d_model}, got "
                    f"kdim={self.kdim}, vdim={self.vdim}; pass memory for cross-attention"
                )
            return
        check_rank("memory", memory, 3, "(B, n_k, kdim)")
        self._check_dtype("memory", memory)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"memory has batch size {memory.shape[0]} but x has batch size {x.shape[0]}")
        if memory.shape[-1] != self.kdim:
            raise ValueError(f"memory has width {memory.shape[-1]} but kdim is {self.kdim}")
        if value is None:
            if self.vdim != self.kdim:
                raise ValueError(
                    f"kdim={self.kdim} differs from vdim={self.vdim}, so value (B, n_k, vdim) must be given"
                )
            return
        check_rank("value", value, 3, "(B, n_k, vdim)")
        self._check_dtype("value", value)
        if value.shape[:2] != memory.shape[:2]:
            raise ValueError(
                f"value has shape {shape_str(value.shape)} but memory has shape "
                f"{shape_str(memory.shape)} (one value per key, same batch)"
            )
        if value.shape[-1] != self.vdim:
            raise ValueError(f"value has width {value.shape[-1]} but vdim is {self.vdim}")

    def _check_dtype(self, name: str, t: Tensor) -> None:
        """Floating, and the parameters' dtype (autocast mixes dtypes on purpose: allowed)."""
        check_floating(name, t)
        dtype = self.out_proj.weight.dtype
        if t.dtype != dtype and not torch.is_autocast_enabled(t.device.type):
            raise ValueError(
                f"{name} has dtype {t.dtype} but the module's parameters have dtype {dtype}"
            )

