"""GPT-1-style transfer: a pretrained GPT body plus a linear classification head.

Ba (CSC413 Lecture 8), "Transformer Language Pre-training": pre-train a language model, then fine-tune
it on a supervised task. Radford et al. (2018), §3.2:

    P(y | x¹ … x^m) = softmax(h_l^m W_y)                          (eq. 3)
    L2(C) = Σ_(x, y) log P(y | x¹ … x^m)                          (eq. 4)
    L3(C) = L2(C) + λ · L1(C)      (auxiliary language-model loss, eq. 5)

``h_l^m`` is the last block's hidden state at the final token (the "extract" token
``<eos>`` when the input is ``<bos> text <eos>``; ``pooling="last"``), or the mean over the
real tokens (``pooling="mean"``). The whole network is fine-tuned: body and head.

>>> clf = GPTForSequenceClassification.from_pretrained("runs/shakespeare_char", num_classes=2)
>>> logits = clf(idx, lengths)                        # (B, 2)
>>> loss, parts = clf.loss(idx, labels, lengths, lm_weight=0.5)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.masks import lengths_to_mask
from attnlab.checkpoint import load_config
from attnlab.config import Config
from attnlab.models.base import PretrainedModel, register_model
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.modules.sequence_pooling import pool
from attnlab.validation import check_choice, check_probability, check_rank, shape_str

POOLINGS = ("last", "mean")
"""The sequence poolings a GPT classifier offers (of :data:`attnlab.modules.POOLINGS`; a causal
model's first token has seen only itself, so ``cls`` and ``max`` are left out)."""


@dataclass
class GPTClassifierConfig(Config):
    """A GPT body (its :class:`~attnlab.config.GPTConfig`) and the head on top of it.

    ``dropout`` applies to the pooled feature before ``W_y`` (GPT-1 used 0.1).
    """

    gpt: GPTConfig
    num_classes: int = 2
    pooling: str = "last"
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.gpt, dict):
            self.gpt = GPTConfig.from_dict(self.gpt)
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        check_choice("pooling", self.pooling, POOLINGS)
        check_probability("dropout", self.dropout)


@register_model(task="classification", default=True)
class GPTForSequenceClassification(PretrainedModel):
    """``clf(idx, lengths)``: ``idx`` ``(B, n)`` right-padded ids, ``lengths`` ``(B,)`` real
    lengths (None: all ``n``) → class logits ``(B, num_classes)``.

    ``clf.gpt`` is the body (a :class:`~attnlab.models.gpt.GPT`, LM head included for the
    auxiliary loss); ``clf.head`` is ``W_y`` (with a bias).
    """

    model_type = "gpt_classifier"
    config_class = GPTClassifierConfig

    def __init__(
        self, gpt: GPT, num_classes: int, pooling: str = "last", *, dropout: float = 0.0
    ) -> None:
        super().__init__()
        if not isinstance(gpt, GPT):
            raise TypeError(f"gpt must be an attnlab GPT, got {type(gpt).__name__}")
        self.config = GPTClassifierConfig(gpt.config, num_classes, pooling, dropout)
        self.gpt = gpt
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(gpt.config.d_model, num_classes)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_config(cls, config: GPTClassifierConfig | dict) -> GPTForSequenceClassification:
        """A fresh (randomly initialised) classifier: body and head."""
        if not isinstance(config, GPTClassifierConfig):
            config = GPTClassifierConfig.from_dict(config)
        return cls(GPT(config.gpt), config.num_classes, config.pooling, dropout=config.dropout)

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        num_classes: int | None = None,
        *,
        pooling: str = "last",
        dropout: float = 0.0,
        device: str | torch.device = "cpu",
    ) -> GPTForSequenceClassification:
        """Load a ``"gpt"`` checkpoint as the body under a new head of ``num_classes``, or
        reload a saved ``"gpt_classifier"``. The model is returned in eval mode.

        Raises:
            ValueError: the checkpoint is another kind of model, or ``num_classes`` is
                missing (GPT body) or differs from the saved classifier's.
        """
        kind = load_config(directory).get("model_type")
        if kind == cls.model_type:
            model = super().from_pretrained(directory, device=device)
            if num_classes is not None and num_classes != model.config.num_classes:
                raise ValueError(
                    f"num_classes={num_classes} but checkpoint {directory} has "
                    f"{model.config.num_classes} classes"
                )
            return model
        if kind != GPT.model_type:
            raise ValueError(
                f"checkpoint {directory} has model_type {kind!r}; {cls.__name__} needs a "
                f"{GPT.model_type!r} checkpoint (pretrained body) or a {cls.model_type!r} one"
            )
        if num_classes is None:
            raise ValueError(
                f"num_classes is required to put a new head on GPT checkpoint {directory}"
            )
        gpt = GPT.from_pretrained(directory, device=device)
        return cls(gpt, num_classes, pooling, dropout=dropout).to(device).eval()

    def _lengths(self, idx: Tensor, lengths: Tensor | None) -> Tensor:
        check_rank("idx", idx, 2, "(B, n)")
        if lengths is None:
            return torch.full((idx.shape[0],), idx.shape[1], dtype=torch.long, device=idx.device)
        check_rank("lengths", lengths, 1, "(B,)")
        if lengths.shape[0] != idx.shape[0]:
            raise ValueError(
                f"lengths has shape {shape_str(lengths.shape)} but idx has batch {idx.shape[0]}"
            )
        if lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > idx.shape[1]):
            raise ValueError(
                f"lengths must be in [1, n={idx.shape[1]}], got min {int(lengths.min())}, "
                f"max {int(lengths.max())}"
            )
        return lengths.to(idx.device)

    def pool(self, h: Tensor, lengths: Tensor) -> Tensor:
        """``h`` ``(B, n, d)`` → ``(B, d)``: last real token's state, or the real tokens' mean."""
        return pool(h, lengths_to_mask(lengths, h.shape[1]), self.config.pooling)  # (B, d)

    def forward(self, idx: Tensor, lengths: Tensor | None = None) -> Tensor:
        """``idx`` ``(B, n)``, ``lengths`` ``(B,)`` → class logits ``(B, num_classes)`` (eq. 3)."""
        lengths = self._lengths(idx, lengths)
        h = self.gpt.hidden_states(idx)  # (B, n, d)
        return self.head(self.dropout(self.pool(h, lengths)))  # (B, C)

    def loss(
        self, idx: Tensor, labels: Tensor, lengths: Tensor | None = None, *, lm_weight: float = 0.0,
        special_ids: int = 0,
    ) -> tuple[Tensor, dict[str, float]]:
        """GPT-1's L3 = L2 + λ·L1 (eq. 5) as mean cross-entropies; also ``{"cls", "lm"}``.

        The LM term predicts each next token of the text; targets below ``special_ids`` (the
        tokenizer's special tokens: pad, ``<bos>``, ``<eos>``, ``<unk>``) are ignored, so padding
        and the delimiters are learned through the classification loss only. ``lm_weight=0``
        skips it.
        """
        if lm_weight < 0:
            raise ValueError(f"lm_weight must be >= 0, got {lm_weight}")
        lengths = self._lengths(idx, lengths)
        check_rank("labels", labels, 1, "(B,)")
        if labels.shape[0] != idx.shape[0]:
            raise ValueError(
                f"labels has shape {shape_str(labels.shape)} but idx has batch {idx.shape[0]}"
            )
        h = self.gpt.hidden_states(idx)  # (B, n, d)
        logits = self.head(self.dropout(self.pool(h, lengths)))  # (B, C)
        cls_loss = F.cross_entropy(logits, labels.to(idx.device))
        parts = {"cls": float(cls_loss.detach())}
        if lm_weight == 0:
            return cls_loss, parts
        lm_logits = self.gpt.head(h[:, :-1])  # (B, n-1, V)
        targets = idx[:, 1:].masked_fill(idx[:, 1:] < special_ids, -100)  # (B, n-1)
        if not bool((targets != -100).any()):
            raise ValueError("lm_weight > 0 but the batch has no text tokens to predict")
        lm_loss = F.cross_entropy(lm_logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        parts["lm"] = float(lm_loss.detach())
        return cls_loss + lm_weight * lm_loss, parts
