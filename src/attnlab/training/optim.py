"""Optimizers: the paper's Adam for translation and AdamW with decay / no-decay groups, and
the ``[optim]`` table every recipe shares (:class:`OptimConfig`, :func:`build_optimizer`).

- Translation (Vaswani et al. 2017, §5.3): Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9, no
  weight decay, learning rate from the warmup schedule (:mod:`attnlab.training.schedules`).
- Language modelling (GPT recipes, nanoGPT ``configure_optimizers``): AdamW where weight
  decay applies only to the weight matrices of linear maps; biases, normalisation gains and
  embeddings (token and positional) are not decayed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from attnlab.config import Config
from attnlab.training.schedules import constant, lambda_lr, noam, warmup_cosine
from attnlab.validation import check_choice, check_positive, counted

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("noam", "warmup_cosine", "constant")

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


def fused_kernel(params: Iterable[nn.Parameter]) -> bool:
    """Whether PyTorch's fused Adam/AdamW kernel can update ``params`` (floating tensors on the
    CPU, CUDA or MPS): one kernel per tensor instead of a dozen elementwise ops, the same
    update rule (the fused AdamW)."""
    params = list(params)
    return bool(params) and all(
        p.is_floating_point() and not p.is_sparse and p.device.type in ("cpu", "cuda", "mps")
        for p in params
    )


def translation_adam(
    params: nn.Module | Iterable[nn.Parameter], lr: float = 1.0
) -> torch.optim.Adam:
    """Adam(β = (0.9, 0.98), ε = 1e-9) of the paper, §5.3. With the noam schedule and
    :func:`~attnlab.training.schedules.lambda_lr` the initial ``lr`` is irrelevant (the
    schedule sets it)."""
    if isinstance(params, nn.Module):
        params = [p for p in params.parameters() if p.requires_grad]
    check_positive("lr", lr)
    params = list(params)
    return torch.optim.Adam(
        params, lr=lr, betas=TRANSLATION_BETAS, eps=TRANSLATION_EPS, fused=fused_kernel(params)
    )


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
    fused = fused_kernel(p for g in groups for p in g["params"])
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)


def make_optimizer(
    model: nn.Module,
    name: str,
    *,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] | None = None,
    eps: float | None = None,
    decay_embeddings: bool = False,
) -> torch.optim.Optimizer:
    """Build an optimizer by name for recipes: ``"adam"`` (defaults to the paper's β and ε,
    no decay) or ``"adamw"`` (decay / no-decay groups, GPT's β and ε by default;
    ``decay_embeddings`` as in :func:`no_decay_names`)."""
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
            fused=fused_kernel(params),
        )
    if name == "adamw":
        return adamw(
            model,
            lr,
            weight_decay=weight_decay,
            betas=betas or (0.9, 0.95),
            eps=1e-8 if eps is None else eps,
            decay_embeddings=decay_embeddings,
        )
    raise ValueError(f"optimizer name must be 'adam' or 'adamw', got {name!r}")


@dataclass
class OptimConfig(Config):
    """The ``[optim]`` table of every recipe: optimizer and learning-rate schedule.

    ``optimizer``: "adam" (the paper's β = (0.9, 0.98), ε = 1e-9, no weight decay) or "adamw"
    (decay / no-decay groups). ``schedule``: "noam" (``lr`` is the paper's scale, eq. 3),
    "warmup_cosine" (``lr`` is the peak, reached after ``warmup`` steps, then a cosine down to
    ``min_lr`` at ``decay_steps``, default ``train.max_steps``) or "constant" (after
    ``warmup``). ``betas`` ``None``: the optimizer's default. ``decay_embeddings``: decay the
    embedding tables too (nanoGPT's rule).
    """

    optimizer: str = "adamw"
    lr: float = 1e-3
    schedule: str = "warmup_cosine"
    warmup: int = 100
    min_lr: float = 0.0
    decay_steps: int | None = None
    weight_decay: float = 0.0
    decay_embeddings: bool = False
    betas: list[float] | None = None

    renamed_fields = {"total_steps": "decay_steps"}

    def __post_init__(self) -> None:
        check_choice("optim.optimizer", self.optimizer, OPTIMIZERS)
        check_choice("optim.schedule", self.schedule, SCHEDULES)
        check_positive("optim.lr", self.lr)
        check_positive("optim.warmup", self.warmup, allow_zero=True)
        check_positive("optim.weight_decay", self.weight_decay, allow_zero=True)
        check_positive("optim.min_lr", self.min_lr, allow_zero=True)
        if self.decay_steps is not None:
            check_positive("optim.decay_steps", self.decay_steps)
        if self.schedule == "warmup_cosine" and self.min_lr > self.lr:
            raise ValueError(f"optim.min_lr must be <= optim.lr={self.lr}, got {self.min_lr}")
        if self.betas is not None and (
            len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas)
        ):
            raise ValueError(f"optim.betas must be two numbers in [0, 1), got {self.betas}")

    def check_steps(self, max_steps: int | None) -> None:
        """The schedule fits the run: a cosine needs ``decay_steps`` (or ``train.max_steps``)
        beyond the warmup."""
        if self.schedule != "warmup_cosine":
            return
        total = self.decay_steps or max_steps
        if total is None:
            raise ValueError("optim.schedule 'warmup_cosine' needs optim.decay_steps or train.max_steps")
        if total <= self.warmup:
            raise ValueError(
                f"optim.schedule 'warmup_cosine' decays over {counted(total, 'step')}, which must be more "
                f"than optim.warmup={self.warmup}"
            )


def build_optimizer(
    config: OptimConfig, model: nn.Module, *, max_steps: int | None
) -> tuple[torch.optim.Optimizer, LambdaLR]:
    """The optimizer and the per-step scheduler an ``[optim]`` table describes for ``model``.

    ``max_steps`` (the recipe's ``train.max_steps``) ends the cosine when ``decay_steps`` is
    not set; "noam" reads the width ``d_model`` from ``model.config``.
    """
    c = config
    betas = tuple(c.betas) if c.betas is not None else None
    optimizer = make_optimizer(
        model, c.optimizer, lr=c.lr, weight_decay=c.weight_decay, betas=betas,
        decay_embeddings=c.decay_embeddings,
    )
    if c.schedule == "noam":
        d_model = getattr(getattr(model, "config", None), "d_model", None)
        if d_model is None:
            raise ValueError(
                f"optim.schedule 'noam' needs a model with a width d_model, got {type(model).__name__}"
            )
        schedule = noam(d_model, c.warmup, scale=c.lr)
    elif c.schedule == "warmup_cosine":
        total = c.decay_steps or max_steps
        if total is None:
            raise ValueError("optim.schedule 'warmup_cosine' needs optim.decay_steps or train.max_steps")
        schedule = warmup_cosine(c.warmup, total, c.lr, c.min_lr)
    else:
        schedule = constant(c.lr, c.warmup)
    return optimizer, lambda_lr(optimizer, schedule)
