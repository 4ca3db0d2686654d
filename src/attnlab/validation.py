"""Argument checking shared by every module.

Every error names the argument, what was expected and what was given, e.g.
``mask has shape (2, 7) but keys have length 9``. Checks raise ``ValueError`` (or
``TypeError`` for a wrong type), never a bare assertion.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def shape_str(shape: Sequence[int]) -> str:
    """Format a shape as ``(2, 7)``."""
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def check_tensor(name: str, x: object) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def check_rank(name: str, x: Tensor, ranks: int | Sequence[int], what: str = "") -> None:
    """Raise unless ``x.dim()`` is one of ``ranks``; ``what`` describes the layout."""
    check_tensor(name, x)
    allowed = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if x.dim() not in allowed:
        want = " or ".join(str(r) for r in allowed)
        layout = f" {what}" if what else ""
        raise ValueError(
            f"{name} must have {want} dimensions{layout}, got shape {shape_str(x.shape)} "
            f"({x.dim()} dimensions)"
        )


def check_floating(name: str, x: Tensor) -> None:
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_positive(name: str, value: float | int, *, allow_zero: bool = False) -> None:
    ok = value >= 0 if allow_zero else value > 0
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value}")


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")


def check_token_ids(name: str, ids: Tensor, vocab_size: int) -> None:
    """Token ids must be integers in ``[0, vocab_size)``."""
    check_tensor(name, ids)
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.numel() == 0 or torch.compiler.is_compiling():
        return  # the range check reads values: under torch.compile it would break the graph
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        raise ValueError(f"{name} must be token ids >= 0, got a minimum of {lo}")
    if hi >= vocab_size:
        raise ValueError(f"{name} must be token ids < vocab_size={vocab_size}, got a maximum of {hi}")
