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
thread, SmolLM2-135M's 121 matrices took 56 ms with ``F.linear`` (MKL) and 30 ms prepacked at
one row in float32, 103 against 41 ms at 8 rows, and 31 against 17 ms at one row in bfloat16.
The cost: the packed copy holds as many bytes as the weights while it is kept (it is dropped
at the next call with gradients), and packing a 135 M model takes about half a second on one
thread, once.

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


@functools.cache
def packing_available(dtype: torch.dtype) -> bool:
    """Whether this torch build has oneDNN's prepacked inner product for ``dtype`` on the CPU."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return dtype == torch.float32


class Linear(nn.Linear):
    """``torch.nn.Linear`` whose products under ``torch.inference_mode`` on the CPU read a
    prepacked copy of the weight (module docstring). ``x`` ``(..., in_features)`` →
    ``(..., out_features)``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._packed: tuple[Tensor, int, int, Tensor] | None = None  # (weight, storage, version, packed)

    def forward(self, x: Tensor) -> Tensor:
        if torch.compiler.is_compiling() or not torch.is_inference_mode_enabled():
            if self._packed is not None:  # training or evaluation: no second copy held
                self._packed = None
            return F.linear(x, self.weight, self.bias)
        packed = self.packed_weight(x)
        if packed is None:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, "none", [], "")

    def packed_weight(self, x: Tensor) -> Tensor | None:
        """oneDNN's blocked copy of the weight for input ``x``, packed at the first call and again
        whenever the weight changes; ``None`` where the plain product is the one to take."""
        w = self.weight
        if x.device.type != "cpu" or x.dtype != w.dtype or w.is_inference():
            return None
        if not packing_available(w.dtype):
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
