"""What sampling plain text needs around a language model: the special tokens kept out of the
draws (:class:`PlainTextModel`), the text streamed as it is drawn (:class:`TextStream`) and the
attention of the query that chose each token (:class:`AttentionRecorder`).

All three wrap a decoder-only model the way :func:`attnlab.generation.sample` drives it:
``forward(idx, cache=...)`` → logits ``(B, n, V)``, and ``new_cache()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from attnlab.data.tokenizers import AnyTokenizer

__all__ = ["AttentionRecorder", "PlainTextModel", "TextStream"]


class PlainTextModel(nn.Module):
    """Generation view of a language model that never draws the ids ``never_drawn`` (its
    tokenizer's :attr:`~attnlab.data.tokenizers.Tokenizer.never_drawn`: attnlab's own
    ``<pad>/<bos>/<eos>/<unk>``, which plain text never has as targets): they are masked out of
    the next-token logits."""

    def __init__(self, model: nn.Module, never_drawn: Sequence[int]) -> None:
        super().__init__()
        self.model, self.config, self.never_drawn = model, model.config, list(never_drawn)

    def new_cache(self):
        return self.model.new_cache()

    def forward(self, idx: Tensor, *, cache=None) -> Tensor:
        logits = self.model(idx, cache=cache)  # (B, n, V)
        if not self.never_drawn:
            return logits
        return logits.index_fill(-1, torch.tensor(self.never_drawn, device=idx.device), -math.inf)


class AttentionRecorder(nn.Module):
    """A decoder-only language model (``model(idx, cache=..., return_weights=True)``) seen
    through ``forward(idx, cache=...)`` → logits, keeping in :attr:`last` the attention of the
    last query of each call: one ``(H, n_k)`` per layer, ``n_k`` the keys it saw (the cache and
    the new tokens). That query is the one whose logits the sampler draws the next token from."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.config = model, model.config
        self.last: list[Tensor] = []

    def new_cache(self):
        return self.model.new_cache()

    def forward(self, idx: Tensor, *, cache=None) -> Tensor:
        logits, weights = self.model(idx, cache=cache, return_weights=True)  # (1, n, V), L × (1, H, n, n_k)
        self.last = [w[0, :, -1] for w in weights]  # L × (H, n_k)
        return logits


class TextStream:
    """``on_token`` for :func:`~attnlab.generation.sample`: decodes the tokens drawn so far and
    writes the new text. A byte-level BPE token may end inside a character (decoded as U+FFFD),
    so a trailing U+FFFD is held back until the next token completes it."""

    def __init__(self, tokenizer: AnyTokenizer, write: Callable[[str], object]) -> None:
        self.tokenizer, self.write, self.ids, self.sent = tokenizer, write, [], 0

    def __call__(self, row: int, token: int) -> None:
        self.ids.append(token)
        stable = self.tokenizer.decode(self.ids).rstrip("\ufffd")
        self._emit(stable)

    def finish(self, text: str) -> None:
        """Write what is still held back of the whole ``text``."""
        self._emit(text)

    def _emit(self, text: str) -> None:
        if len(text) > self.sent:
            self.write(text[self.sent :])
            self.sent = len(text)
