"""Decoding settings and the one search a pipeline decodes with.

:class:`DecodeConfig` is how a translator or a captioner decodes: beam search (or greedy) with
the GNMT length penalty, a batch size and an output limit. A task's ``[eval]`` table extends it
and every checkpoint saves it in its ``recipe.json``, so a pipeline read back from a checkpoint
decodes as the run's own test decoding did (:func:`saved_decoding`); a command line overrides
what it names (:func:`with_overrides`). :func:`search` runs greedy or beam search
(:mod:`attnlab.generation`) over one batch of inputs, source sentences or images alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from attnlab.generation import beam_search, greedy_search
from attnlab.generation.state import BeforeStep
from attnlab.validation import check_positive

__all__ = ["DecodeConfig", "saved_decoding", "search", "with_overrides"]


@dataclass
class DecodeConfig:
    """How sentences are decoded: beam search (``beam_size`` 1: greedy) with the GNMT length
    penalty α = ``length_penalty``, ``batch_size`` sentences at a time, each output at most
    ``max_len`` subwords, or ``max_len_a · source length + max_len_b`` when ``max_len`` is
    ``None``."""

    beam_size: int = 5
    length_penalty: float = 0.6
    batch_size: int = 64
    max_len_a: float = 1.5
    max_len_b: int = 10
    max_len: int | None = None

    def __post_init__(self) -> None:
        for name in ("beam_size", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"eval.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("length_penalty", "max_len_a", "max_len_b"):
            check_positive(f"eval.{name}", getattr(self, name), allow_zero=True)
        if self.max_len is not None:
            check_positive("eval.max_len", self.max_len)
        if self.max_len is None and self.max_len_b < 1 and self.max_len_a == 0:
            raise ValueError("eval.max_len_a · source length + eval.max_len_b must allow >= 1 token")

    def limit(self, source_length: int) -> int:
        """The most tokens an output of an input of ``source_length`` may have (at least 1)."""
        return max(1, self.max_len or int(self.max_len_a * source_length + self.max_len_b))


FIELDS = frozenset(f.name for f in dataclasses.fields(DecodeConfig))


def saved_decoding(recipe: Mapping[str, Any], base: DecodeConfig | None = None) -> DecodeConfig:
    """The decoding settings a checkpoint's ``recipe.json`` saved in its ``[eval]`` table, over
    ``base`` (default :class:`DecodeConfig`'s) where it has none."""
    saved = {k: v for k, v in recipe.get("eval", {}).items() if k in FIELDS}
    return dataclasses.replace(base or DecodeConfig(), **saved)


def with_overrides(decoding: DecodeConfig, **overrides: Any) -> DecodeConfig:
    """``decoding`` with the ``overrides`` that are not ``None`` (a command line's ``--beam``
    and so on: an option not given keeps the checkpoint's setting)."""
    return dataclasses.replace(decoding, **{k: v for k, v in overrides.items() if v is not None})


def search(
    model: nn.Module, inputs: Tensor, decoding: DecodeConfig, max_new_tokens: int, *, bos_id: int,
    eos_id: int, before_step: BeforeStep | None = None,
) -> list[list[int]]:
    """The best output ids of each input row (without ``bos_id`` and the end token): greedy
    when ``decoding.beam_size`` is 1, else beam search with ``decoding.length_penalty``.
    ``inputs`` are what the model's ``encode`` reads: source ids ``(B, S)`` or images
    ``(B, C, H, W)``, on the model's device. ``before_step`` is called before every model step
    (what it raises ends the search: the explorer's cancellation)."""
    ids = dict(max_new_tokens=max_new_tokens, bos_id=bos_id, eos_id=eos_id, before_step=before_step)
    if decoding.beam_size == 1:
        return greedy_search(model, inputs, **ids)
    best = beam_search(model, inputs, beam_size=decoding.beam_size, length_penalty=decoding.length_penalty,
                       **ids)
    return [hypotheses[0].tokens for hypotheses in best]
