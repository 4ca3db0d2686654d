"""The learned projections ``y = x Wᵀ + b`` of attention (``W_q``, ``W_k``, ``W_v``, ``W_o``), of
the feed-forward network and of a language model's output layer (Vaswani et al. §3.2.2, eq. 2),
and the fastest way to their value while decoding.

:class:`Linear` is ``torch.nn.Linear`` — same parameters, same state dict, same values — with one
difference in speed. Under ``torch.inference_mode`` on the CPU (attnlab's decoding loops:
greedy, beam search, sampling), it multiplies by a copy of ``W`` that oneDNN has reordered once
into its blocked layout (a *prepacked* weight, as ``torch.compile``'s freezing makes), kept with
the layer and packed again only when ``W`` changes; everywhere else — training, ``no_grad``
evaluation, other devices, dtypes other than float32 and bfloat16 — it is ``F.linear``.

Why: a decoding step multiplies one row per sequence by every weight matrix, so it is bound by
reading the weights. On the AMD EPYC of docs/benchmarks.md ("SmolLM2-135M generation"), one
thread, SmolLM2-135M's 121 matrices took 32.7 ms with ``F.linear`` (MKL) and 17.2 ms prepacked
at one row in float32, 58.7 against 24.2 ms at 8 rows, and 18.5 against 9.5 ms at one row in
bfloat16. A small float32 weight that stays in the cache is still faster by ``F.linear`` at one
row (:func:`worth_packing`). The cost: the packed copy holds as many bytes as the weight while it
is kept (it is dropped at the next call with gradients), and packing a 135 M model takes about
half a second on one thread, once.

A weight changed in place is seen through its version counter (optimizer steps,
``load_state_dict``, ``copy_`` under ``no_grad``) or a new storage (``.to``, assignment); a
write through ``.data``, which bypasses the version counter, is not: assign or copy instead.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PACK_ROWS = 8  # the rows oneDNN lays the weight out for: 8 measured best or equal at 1-64 rows
# float32 (one thread, module docstring): read from memory, the packed product won at every size
# (1.3-2.9x, 49 K to 1.8 M weights, 1 and 8 rows); a weight the cache still holds was faster by
# F.linear at one row up to 590 K weights (its ~2 us a call against oneDNN's ~9) and by the packed
# product from 65 K weights at 8 rows. So: packed from 2^18 weights (1 MiB), or 2^16 at 8 rows.
PACK_MIN, PACK_MIN_ROWS = 2**18, 2**16
# bfloat16: F.linear paid ~30 us a call from 128 x 128 up (the packed product ~20-25), but ~4 us for
# a 36 x 36 weight at one row (packed ~23): packed from 2^14 weights, or at 8 rows.
PACK_MIN_BF16 = 2**14


@functools.cache
def packing_available(dtype: torch.dtype) -> bool:
    """Whether this torch build has oneDNN's prepacked inner product for ``dtype`` on the CPU."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return dtype == torch.float32


def worth_packing(x: Tensor, weights: int) -> bool:
    """Whether the packed product beats ``F.linear`` for input ``x`` ``(..., in)`` and a weight of
    ``weights`` numbers (module docstring): in float32 from :data:`PACK_MIN` weights, or from
    :data:`PACK_MIN_ROWS` for 8 rows or more; in bfloat16 from :data:`PACK_MIN_BF16` or 8 rows."""
    many = x.numel() >= 8 * x.shape[-1]
    if x.dtype == torch.bfloat16:
        return many or weights >= PACK_MIN_BF16
    return weights >= (PACK_MIN_ROWS if many else PACK_MIN)


def prepack(weight: Tensor, x: Tensor) -> Tensor | None:
    """oneDNN's blocked copy of ``weight`` ``(out, in)`` for many products with inputs like ``x``
    ``(rows, in)`` — a recurrence that multiplies by the same matrix at every step (the LSTMN's
    window, :mod:`attnlab.models.lstmn_window`), in training too — where the packed product is
    available and worth it (:func:`worth_packing`); else ``None`` (:func:`product` takes
    ``F.linear``). Packing costs about one product per megabyte of weight."""
    if x.device.type != "cpu" or x.dtype != weight.dtype or not packing_available(weight.dtype):
        return None
    if not worth_packing(x, weight.numel()):
        return None
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS)


def product(x: Tensor, weight: Tensor, packed: Tensor | None) -> Tensor:
    """``x Wᵀ`` ``(rows, out)`` without autograd: through ``packed`` (:func:`prepack` of
    ``weight``) where there is one, else ``F.linear``."""
    if packed is None:
        return F.linear(x, weight)
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def gemm(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` ``(m, k) @ (k, n)`` without autograd, through oneDNN's inner product with ``b``
    packed where :func:`prepack` finds that worth it (a recurrence's whole-window products and
    weight gradients), else ``torch.mm``."""
    weight = b.t()  # (n, k): the layout of a Linear's weight
    packed = prepack(weight, a)
    return torch.mm(a, b) if packed is None else product(a.contiguous(), weight, packed)


class Linear(nn.Linear):
    """``torch.nn.Linear`` whose products under ``torch.inference_mode`` on the CPU read a
    prepacked copy of the weight (module docstring). ``x`` ``(..., in_features)`` →
    ``(..., out_features)``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._packed: tuple[Tensor, int, int, Tensor] | None = None  # (weight, storage, version, packed)
        self._may_pack = self.in_features * self.out_features >= PACK_MIN_ROWS  # in float32

    def forward(self, x: Tensor) -> Tensor:
        if not torch.compiler.is_compiling() and torch.is_inference_mode_enabled():  # small float32: F.linear
            packed = self._packed_for(x) if self._may_pack or x.dtype == torch.bfloat16 else None
            if packed is not None:
                return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, "none", [], "")
        elif self._packed is not None:  # training or evaluation: no second copy held
            self._packed = None
        return F.linear(x, self.weight, self.bias)

    def _packed_for(self, x: Tensor) -> Tensor | None:
        """oneDNN's blocked copy of the weight for input ``x``, packed at the first call and again
        whenever the weight changes; ``None`` where the plain product is the one to take."""
        if not worth_packing(x, self.in_features * self.out_features):
            return None
        w = self.weight
        if x.device.type != "cpu" or x.dtype != w.dtype or w.is_inference() or not packing_available(w.dtype):
            return None
        cached = self._packed
        if cached is not None and cached[0] is w and cached[1] == w.data_ptr() and cached[2] == w._version:
            return cached[3]
        self._packed = None  # the stale copy goes before the new one is made
        packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_ROWS)
        self._packed = (w, w.data_ptr(), w._version, packed)
        return packed

    def _apply(self, fn, recurse: bool = True):  # .to(), .bfloat16(), ...: the packed copy is stale
        self._packed = None
        return super()._apply(fn, recurse)

    def __getstate__(self) -> dict:  # the packed copy is a cache: not pickled (nor deep-copied)
        return {**super().__getstate__(), "_packed": None}
