"""Optimizers: the paper's Adam for translation and AdamW with decay / no-decay groups.

- Translation (Vaswani et al. 2017, §5.3): Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9, no
  weight decay, learning rate from the warmup schedule (:mod:`attnlab.training.schedules`).
- Language modelling (GPT recipes, nanoGPT ``configure_optimizers``): AdamW where weight
  decay applies only to the weight matrices of linear maps; biases, normalisation gains and
  embeddings (token and positional) are not decayed.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from attnlab.validation import check_positive

TRANSLATION_BETAS = (0.9, 0.98)
TRANSLATION_EPS = 1e-9


def _is_norm(module: nn.Module) -> bool:
    norms = (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm)
    return isinstance(module, norms) or "Norm" in type(module).__name__


def _is_embedding(module: nn.Module) -> bool:
    return isinstance(module, nn.Embedding | nn.EmbeddingBag) or type(module).__name__.endswith(
        ("Embedding", "Embeddings")
    )


def no_decay_names(model: nn.Module, *, decay_embeddings: bool = False) -> set[str]:
    """Names (as in ``model.named_parameters()``) of the parameters that get no weight decay.

    A parameter is exempt when it is a bias or any tensor of fewer than 2 dimensions, or
    belongs to a normalisation layer (``nn.LayerNorm``, ``nn.RMSNorm``, any class whose name
    contains ``Norm``) or an embedding (``nn.Embedding``, any class whose name ends in
    ``Embedding``). A weight shared between an embedding and a linear layer (tied input /
    output embeddings) is exempt. ``decay_embeddings=True`` decays embedding tables like
    any other matrix — nanoGPT's rule ("every 2-D parameter decays").
    """
    exempt_ids: set[int] = set()
    for module in model.modules():
        whole = _is_norm(module) or (_is_embedding(module) and not decay_embeddings)
        for name, p in module.named_parameters(recurse=False):
            if whole or name.endswith("bias") or p.dim() < 2:
                exempt_ids.add(id(p))
    return {name for name, p in model.named_parameters() if id(p) in exempt_ids}


def param_groups(model: nn.Module, weight_decay: float, *, decay_embeddings: bool = False) -> list[dict]:
    """Two parameter groups, ``[{"params": decay, "weight_decay": weight_decay},
    {"params": no_decay, "weight_decay": 0.0}]``, in ``model.parameters()`` order, each
    trainable parameter exactly once; an empty group is left out."""
    check_positive("weight_decay", weight_decay, allow_zero=True)
    exempt = no_decay_names(model, decay_embeddings=decay_embeddings)
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # shared parameters are listed once
        if p.requires_grad:
            (no_decay if name in exempt else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


def translation_adam(
    params: nn.Module | Iterable[nn.Parameter], lr: float = 1.0
) -> torch.optim.Adam:
    """Adam(β = (0.9, 0.98), ε = 1e-9) of the paper, §5.3. With the noam schedule and
    :func:`~attnlab.training.schedules.lambda_lr` the initial ``lr`` is irrelevant (the
    schedule sets it)."""
    if isinstance(params, nn.Module):
        params = [p for p in params.parameters() if p.requires_grad]
    check_positive("lr", lr)
    return torch.optim.Adam(params, lr=lr, betas=TRANSLATION_BETAS, eps=TRANSLATION_EPS)


def adamw(
    model: nn.Module,
    lr: float,
    *,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    decay_embeddings: bool = False,
) -> torch.optim.AdamW:
    """AdamW with decay / no-decay groups (:func:`param_groups`); GPT defaults
    β = (0.9, 0.95), weight decay 0.1."""
    check_positive("lr", lr)
    groups = param_groups(model, weight_decay, decay_embeddings=decay_embeddings)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def make_optimizer(
    model: nn.Module,
    name: str,
    *,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] | None = None,
    eps: float | None = None,
) -> torch.optim.Optimizer:
    """Build an optimizer by name for recipes: ``"adam"`` (defaults to the paper's β and ε,
    no decay) or ``"adamw"`` (decay / no-decay groups, GPT's β and ε by default)."""
    if name == "adam":
        if weight_decay:
            raise ValueError(f"weight_decay must be 0 for 'adam' (use 'adamw'), got {weight_decay}")
        params = [p for p in model.parameters() if p.requires_grad]
        check_positive("lr", lr)
        return torch.optim.Adam(
            params,
            lr=lr,
            betas=betas or TRANSLATION_BETAS,
            eps=TRANSLATION_EPS if eps is None else eps,
        )
    if name == "adamw":
        return adamw(
            model,
            lr,
            weight_decay=weight_decay,
            betas=betas or (0.9, 0.95),
            eps=1e-8 if eps is None else eps,
        )
    raise ValueError(f"optimizer name must be 'adam' or 'adamw', got {name!r}")
