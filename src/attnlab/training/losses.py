"""Label-smoothed cross-entropy, the translator's training loss, and a model's mean loss.

Vaswani et al. (2017), "Attention Is All You Need", §5.4 *Label Smoothing*: "we employed
label smoothing of value ε_ls = 0.1. This hurts perplexity ... but improves accuracy and
BLEU score." The target distribution puts ``1 − ε`` on the gold token and spreads ``ε``
uniformly over the whole vocabulary (the convention of
``torch.nn.functional.cross_entropy(label_smoothing=ε)``), so for one position

    loss = (1 − ε) · (−log p_y) + ε · mean_v(−log p_v)

The loss is returned as a **sum** by default, together with the number of target tokens,
so that the trainer can normalise by the token count of a whole optimizer step (gradient
accumulation and data parallelism then give exactly the large-batch gradient).
:func:`mean_loss` averages such a loss over a whole dataset the same way (validation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.devices import autocast, model_device, to_device
from attnlab.validation import check_floating, check_rank, check_tensor, shape_str

_REDUCTIONS = ("sum", "mean")


def _check_inputs(logits: Tensor, target: Tensor, epsilon: float, reduction: str) -> None:
    check_tensor("logits", logits)
    check_tensor("target", target)
    check_floating("logits", logits)
    check_rank("logits", logits, (2, 3), "(B, T, V) or (N, V)")
    if tuple(target.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"target has shape {shape_str(target.shape)} but logits of shape "
            f"{shape_str(logits.shape)} need a target of shape {shape_str(logits.shape[:-1])}"
        )
    if target.is_floating_point() or target.dtype == torch.bool:
        raise ValueError(f"target must hold integer token ids, got dtype {target.dtype}")
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"epsilon must be in [0, 1), got {epsilon}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def label_smoothed_cross_entropy(
    logits: Tensor,
    target: Tensor,
    *,
    epsilon: float = 0.1,
    ignore_index: int = -100,
    reduction: str = "sum",
) -> tuple[Tensor, Tensor]:
    """Cross-entropy against the ε-smoothed target distribution (paper §5.4).

    Args:
        logits: ``(B, T, V)`` (or ``(N, V)``) unnormalised scores; float16 / bfloat16
            logits (autocast) are reduced in float32, float64 stays float64.
        target: ``(B, T)`` (or ``(N,)``) gold token ids; positions equal to
            ``ignore_index`` (the padding id) contribute nothing and are not counted.
        epsilon: smoothing mass ε spread uniformly over all ``V`` classes; 0 gives plain
            cross-entropy.
        reduction: ``"sum"`` over the counted positions, or ``"mean"`` per counted token
            (0 when no position is counted, never NaN).

    Returns:
        ``(loss, num_tokens)``: a scalar loss tensor and the scalar int64 number of
        counted target tokens.
    """
    _check_inputs(logits, target, epsilon, reduction)
    vocab = logits.shape[-1]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # reduce low-precision logits in float32
    logp = F.log_softmax(logits, dim=-1).reshape(-1, vocab)  # (N, V)
    flat = target.reshape(-1)  # (N,)
    keep = flat != ignore_index  # (N,)
    safe = torch.where(keep, flat, torch.zeros_like(flat))  # (N,) ignored rows read class 0
    if int(safe.min()) < 0 or int(safe.max()) >= vocab:
        raise ValueError(
            f"target must be token ids in [0, {vocab}) or ignore_index={ignore_index}, "
            f"got values from {int(flat.min())} to {int(flat.max())}"
        )
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (N,)
    uniform = -logp.mean(dim=-1)  # (N,) cross-entropy against the uniform distribution
    per_token = (1.0 - epsilon) * nll + epsilon * uniform  # (N,)
    per_token = torch.where(keep, per_token, torch.zeros_like(per_token))  # (N,)
    num_tokens = keep.sum()
    loss = per_token.sum()
    if reduction == "mean":
        loss = loss / num_tokens.clamp(min=1)
    return loss, num_tokens


@torch.no_grad()
def mean_loss(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], tuple[Tensor, Tensor | int]],
    batches: Iterable[Any],
    *,
    bf16: bool = False,
) -> float:
    """``Σ loss_sum / Σ num_tokens`` of ``loss_fn(model, batch)`` over ``batches`` (each moved to
    the model's device; bf16 autocast on that device when ``bf16``), in eval mode, no grad."""
    device, was_training = model_device(model), model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with autocast(device, bf16):
            for batch in batches:
                loss, n = loss_fn(model, to_device(batch, device))
                total, count = total + float(loss), count + int(n)
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("mean_loss got no target tokens: the batches are empty")
    return total / count
