"""The fastest way to the value of :func:`~attnlab.attention.scaled_dot_product_attention`:
PyTorch's fused kernel, or the lecture formula written out where that is faster.

:mod:`attnlab.attention.core` holds the formula and calls :func:`dispatch` once; everything
about speed is here: which path runs, the CPU thresholds, the fused call with its handling of
fully blocked rows, and the probe that tells whether PyTorch's kernel already handles them.

**Kernel choice.** ``torch.nn.functional.scaled_dot_product_attention`` (flash /
memory-efficient kernels, memory linear in ``n``) by default. On CPU with bfloat16 / float16
inputs (bf16 autocast training) and short sequences, PyTorch's flash kernel is several times
slower than the formula — its backward most of all (B·n = 4,500 tokens, 4 heads of 64, 2
cores: n = 18 forward + backward 46 ms fused vs 6 ms explicit; n = 256 29 vs 21 ms; n = 512
48 vs 58 ms). :func:`dispatch` therefore runs the formula there (``n_k ≤ 256`` with
gradients, ``n_k ≤ 128`` without, and a single query — a cached decoding step — from 2,048
scores, rows × heads × keys, or on one thread from scores × d_h = 32,768), its softmax in
float32. ``benchmarks/attention_threshold.py`` re-measures the crossover on the CPU it runs on
(docs/benchmarks.md: on the AMD EPYC without AMX, forward-only explicit wins up to 128 keys; a
single query wins 1.5-5× above 1,000-4,000 scores and loses below; in training, the whole GPT
step at 256 keys ran 1.12-1.15× the reference with the explicit path against 0.99-1.02× with
the fused one).

**Fully blocked rows.** docs/design.md asks zeros (and finite gradients) for a query whose
every key is blocked. Where PyTorch's kernel already gives them (torch 2.13's CPU kernels do:
:func:`kernel_zeroes_blocked_rows` probes once per dtype, on each CPU backend) the mask goes to
it as is; elsewhere such rows are opened and their output zeroed afterwards.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import _disable_current_modes  # the probe stays unseen

from attnlab.attention import groups
from attnlab.attention.masks import allowed_keys, causal_mask, combine_masks

# Longest key sequence for which the explicit path beats PyTorch's CPU flash kernel in half
# precision (see the module docstring for the measurements; benchmarks/attention_threshold.py
# re-measures them on another CPU).
EXPLICIT_MAX_KEYS_TRAIN = 256
EXPLICIT_MAX_KEYS_INFER = 128
# A single query (a cached decoding step): the kernel's cost grows with rows × heads × keys, the
# explicit path's is nearly flat (~60 µs of bf16 bmm set-up); they crossed near 512 scores on
# one thread and near 4,096 on two.
EXPLICIT_MIN_STEP_SCORES = 2048
# On one thread, measured again once grouped-query heads were no longer copied (SmolLM2's 9 query
# heads over 3 shared, d_h 64, and 6 or 4 heads of 64 or 32): the explicit path 33-52 µs at 1-8
# rows and 16-512 keys, the kernel about 0.08 µs a score at d_h 64 and 0.04 at d_h 32 — crossing
# near scores × d_h = 32,768 (512 scores at d_h 64).
EXPLICIT_MIN_STEP_WORK_ONE_THREAD = 32_768

Formula = Callable[..., tuple[Tensor, Tensor]]


def dispatch(
    formula: Formula, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *,
    is_causal: bool, dropout: float, scale: float,
) -> Tensor:
    """Attention ``(..., n_q, d_v)`` by the faster path: PyTorch's fused kernel, or
    ``formula(q, k, v, mask, is_causal=, dropout=, scale=)`` (the lecture formula, returning
    ``(output, weights)``) where :func:`explicit_is_faster`. ``mask`` is already at the
    scores' rank (:func:`~attnlab.attention.masks.as_attention_mask`)."""
    if explicit_is_faster(q, k):
        if is_causal and mask is None:
            return _causal_in_place(q, k, v, dropout, scale)
        return formula(q, k, v, mask, is_causal=is_causal, dropout=dropout, scale=scale)[0]
    return fused_attention(q, k, v, mask, is_causal, dropout, scale)


def explicit_is_faster(q: Tensor, k: Tensor) -> bool:
    """Whether the written-out formula beats PyTorch's kernel here (module docstring)."""
    if q.device.type != "cpu" or q.dtype not in (torch.bfloat16, torch.float16):
        return False
    training = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)
    if not training and q.shape[-2] == 1:  # a decoding step: rows × heads × keys scores
        scores = q.numel() // q.shape[-1] * k.shape[-2]
        if torch.get_num_threads() == 1:
            return scores * q.shape[-1] >= EXPLICIT_MIN_STEP_WORK_ONE_THREAD
        return scores >= EXPLICIT_MIN_STEP_SCORES
    return k.shape[-2] <= (EXPLICIT_MAX_KEYS_TRAIN if training else EXPLICIT_MAX_KEYS_INFER)


def _causal_in_place(q: Tensor, k: Tensor, v: Tensor, dropout: float, scale: float) -> Tensor:
    """The formula for a causal mask alone (GPT training in bf16): every query keeps at least
    its own key, so no row needs the all-blocked fix of ``masked_softmax``; future keys are set
    to ``-inf`` in place and the softmax runs in float32 in one call."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = groups.scores(q * scale, k)  # (..., n_q, n_k)
    future = ~causal_mask(n_q, n_k, device=q.device)  # (n_q, n_k) True = blocked
    weights = torch.softmax(scores.masked_fill_(future, float("-inf")), dim=-1, dtype=torch.float32)
    weights = weights.to(q.dtype)
    dropped = F.dropout(weights, dropout) if dropout > 0 else weights
    return groups.mix(dropped, v)  # (..., n_q, d_v)


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, dropout: float, scale: float
) -> Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` with attnlab's conventions: the
    causal triangle bottom-right aligned (a KV cache's queries are the last ones) and zeros for
    a query whose every key is blocked."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    if groups.grouped(q, k):  # PyTorch's kernel reads the shared heads itself
        attend = functools.partial(F.scaled_dot_product_attention, enable_gqa=True)
    else:
        attend = F.scaled_dot_product_attention
    if is_causal and (mask is not None or n_q != n_k):
        # PyTorch's is_causal aligns the triangle top-left; ours is bottom-right (KV cache).
        mask = combine_masks(mask, causal_mask(n_q, n_k, device=q.device))
        is_causal = False
    if mask is None:
        return attend(q, k, v, dropout_p=dropout, is_causal=is_causal, scale=scale)
    if mask.is_floating_point():
        mask = mask.to(q.dtype)
    compiling = torch.compiler.is_compiling()
    if dropout == 0.0 and not compiling and kernel_zeroes_blocked_rows(q.device, q.dtype):
        return attend(q, k, v, attn_mask=mask, scale=scale)
    # Rows with every key blocked would give NaN inside the kernel: open them, then zero them.
    has_key = allowed_keys(mask).any(dim=-1, keepdim=True)  # (..., n_q, 1)
    # Nothing to fix? Answering needs a host sync: only in eager mode on the CPU.
    if not compiling and mask.device.type == "cpu" and bool(has_key.all()):
        return attend(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scale)
    safe_mask = mask.masked_fill(~has_key, True if mask.dtype == torch.bool else 0.0)
    out = attend(q, k, v, attn_mask=safe_mask, dropout_p=dropout, scale=scale)
    return out.masked_fill(~has_key, 0.0)  # (..., n_q, d_v)


_ZEROES_BLOCKED_ROWS: dict[tuple[str, torch.dtype], bool] = {}


def kernel_zeroes_blocked_rows(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether PyTorch's own kernel already gives what docs/design.md asks for a query whose
    every key is blocked — an output row of zeros and finite gradients — so the fix in
    :func:`fused_attention` (and its host sync) can be skipped. Probed once per dtype on the
    CPU (PyTorch 2.13's CPU kernels do; a kernel that does not gives NaN); ``False`` on other devices,
    whose kernel depends on the shapes."""
    key = (device.type, dtype)
    if key not in _ZEROES_BLOCKED_ROWS:
        _ZEROES_BLOCKED_ROWS[key] = device.type == "cpu" and _probe_blocked_rows(dtype)
    return _ZEROES_BLOCKED_ROWS[key]


def _probe_blocked_rows(dtype: torch.dtype) -> bool:
    """Two queries over two keys, the second query's keys all blocked, by a boolean and by an
    additive mask, on each CPU backend PyTorch may pick (math and flash; one that cannot take
    ``dtype`` is skipped): zeros in that output row and its query's gradient, all gradients
    finite. Hidden from the caller's dispatch modes (a FLOP counter, say) and contexts."""
    results = []
    # decoding may run under inference mode, training under autocast: neither applies here
    with _disable_current_modes(), torch.inference_mode(False), torch.enable_grad(), \
            torch.autocast("cpu", enabled=False):
        for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):
            with sdpa_kernel(backend):
                try:
                    results.append(_blocked_row_is_zero(dtype))
                except RuntimeError:  # no kernel of this backend for this dtype: never picked
                    continue
    return bool(results) and all(results)


def _blocked_row_is_zero(dtype: torch.dtype) -> bool:
    blocked = torch.tensor([[True, True], [False, False]])  # (n_q, n_k), True = allowed
    additive = torch.zeros(2, 2).masked_fill(~blocked, float("-inf")).to(dtype)
    ok = True
    for mask in (blocked, additive):
        q, k, v = (torch.ones(1, 1, 2, 2, dtype=dtype, requires_grad=True) for _ in range(3))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (1, 1, 2, 2)
        out.sum().backward()
        grads = torch.cat([t.grad.flatten() for t in (q, k, v)])
        zero_row = bool((out[..., 1, :] == 0).all()) and bool((q.grad[..., 1, :] == 0).all())
        ok = ok and zero_row and bool(grads.isfinite().all())
    return ok
