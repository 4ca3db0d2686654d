"""Text in, text out: a translation model with its two tokenizers and its decoding settings.

:meth:`TranslationPipeline.translate` encodes sources as in training (no ``<bos>``/``<eos>``),
decodes them with beam search or greedily (:func:`~attnlab.pipelines.decoding.search`) and
detokenizes. :meth:`TranslationPipeline.attention` reads the encoder-decoder attention of a
translation back, every decoder layer and head: the alignment of Bahdanau et al. 2015,
Figure 3, and the cross-attention of Ba (CSC413 Lecture 8), "Transformer Machine Translation".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab.data.tokenizers import AnyTokenizer, load_tokenizers, tokenizer_files
from attnlab.generation.state import BeforeStep, inference
from attnlab.models.base import draws_attention, task_models
from attnlab.pipelines.base import DecodingPipeline
from attnlab.pipelines.decoding import DecodeConfig, search
from attnlab.progress import progress_bar
from attnlab.validation import indefinite

__all__ = ["Alignment", "TranslationPipeline"]


class Alignment(NamedTuple):
    """The encoder-decoder attention over one translation (:meth:`TranslationPipeline.attention`)."""

    weights: Tensor  # (L, H, T, S): decoder layers, heads, output subwords and <eos>, source subwords
    source: list[str]  # S source subwords
    target: list[str]  # T output subwords and <eos>

    def layer(self, layer: int) -> Tensor:
        """The weights ``(H, T, S)`` of decoder layer ``layer`` (``-1``: the last)."""
        layers = self.weights.shape[0]
        if not -layers <= layer < layers:
            raise ValueError(f"layer must be in [-{layers}, {layers - 1}], got {layer}")
        return self.weights[layer]


class TranslationPipeline(DecodingPipeline):
    """A translation model (``encode`` / ``decode``: :class:`~attnlab.models.Transformer`, the
    RNN encoder-decoders), its source and target tokenizers (the same object when the
    vocabulary is joint) and its :class:`DecodeConfig` (the checkpoint's ``[eval]``)."""

    model_types = task_models("translation")
    family = "a translation model"

    def __init__(self, model: nn.Module, src_tok: AnyTokenizer, tgt_tok: AnyTokenizer, *,
                 decoding: DecodeConfig | None = None, recipe: dict[str, Any] | None = None) -> None:
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        super().__init__(decoding=decoding, recipe=recipe)

    @classmethod
    def from_files(cls, model: nn.Module, checkpoint: Path, recipe: dict[str, Any]) -> TranslationPipeline:
        return cls(model, *load_tokenizers(checkpoint), recipe=recipe)

    def tokenizer_files(self) -> dict[str, str]:
        return tokenizer_files(self.src_tok, self.tgt_tok)

    def translate(
        self, sentences: Sequence[str], decoding: DecodeConfig | None = None, *, progress: bool = False,
        before_step: BeforeStep | None = None,
    ) -> list[str]:
        """Translate ``sentences`` (detokenized text in, detokenized text out, order kept) with
        ``decoding`` (default: the pipeline's own).

        Sources are encoded as in training and decoded at most ``batch_size`` at a time, in
        batches of equal source length (so no padding). Each sentence may produce
        :meth:`DecodeConfig.limit` subwords of its source length: a per-sentence limit, so a
        translation does not depend on the other input lines. Blank sentences translate to
        ``""``. ``progress``: a bar over the sentences; ``before_step``: called before every
        decoding step (:func:`~attnlab.pipelines.decoding.search`).
        """
        decoding = decoding or self.decoding
        encoded = self.src_tok.encode_batch([s.strip() for s in sentences])
        out = [""] * len(sentences)
        by_length: dict[int, list[int]] = {}
        for i, ids in enumerate(encoded):
            if ids:
                by_length.setdefault(len(ids), []).append(i)
        batches = [group[j:j + decoding.batch_size] for _, group in sorted(by_length.items())
                   for j in range(0, len(group), decoding.batch_size)]
        ends = dict(bos_id=self.tgt_tok.bos_id, eos_id=self.tgt_tok.eos_id)
        with progress_bar(sum(map(len, batches)), unit="sentence", desc="decoding", enabled=progress,
                          leave=False) as bar:
            for rows in batches:
                src = torch.tensor([encoded[i] for i in rows], device=self.device)  # (B, S)
                hyps = search(self.model, src, decoding, decoding.limit(src.shape[1]), **ends,
                              before_step=before_step)
                for i, tokens in zip(rows, hyps, strict=True):
                    out[i] = self.tgt_tok.decode(tokens)
                bar.update(len(rows))
        return out

    @property
    def draws_attention(self) -> bool:
        """Whether the model's decoder attends over the source (Cho et al.'s does not)."""
        return draws_attention(self.model.decode)

    def attention(self, source: str, translation: str) -> Alignment:
        """The encoder-decoder attention while the model reads its own ``translation`` of
        ``source`` (teacher forcing): weights ``(L, H, T, S)``, rows the output subwords and
        ``<eos>``, columns the source subwords (an RNN decoder: one layer, one head), and the
        two label lists. ``ValueError`` for a model without attention."""
        if not self.draws_attention:
            raise ValueError(
                f"{indefinite(self.model.model_type)} model has no attention to draw (its decoder sees one "
                "fixed context vector)"
            )
        src_ids = self.src_tok.encode(source) or [self.src_tok.unk_id]
        out_ids = self.tgt_tok.encode(translation)
        src = torch.tensor([src_ids], device=self.device)  # (1, S)
        tgt_in = torch.tensor([[self.tgt_tok.bos_id, *out_ids]], device=self.device)  # (1, T)
        with inference(self.model):
            memory, src_mask = self.model.encode(src)  # (1, S, d), (1, S)
            _, weights = self.model.decode(tgt_in, memory, src_mask, return_weights=True)
        layers = torch.stack([w[0].float().cpu() for w in weights])  # (L, H, T, S)
        targets = [*self.tgt_tok.token_strings(out_ids), "<eos>"]
        return Alignment(layers, self.src_tok.token_strings(src_ids), targets)

    def plot_attention(self, source: str, translation: str, path: str | Path, *, layer: int = -1) -> Path:
        """Decoder layer ``layer`` of :meth:`attention` (its heads' mean, then each head) drawn
        by :func:`attnlab.visualize.plot_alignment` into ``path``."""
        from attnlab.visualize import plot_alignment

        found = self.attention(source, translation)
        weights, layers = found.layer(layer), found.weights.shape[0]
        score = getattr(self.model.config, "score", None)
        kind = self.model.model_type + (f" ({score} score)" if score else "")
        where = "" if layers == 1 else f", decoder layer {layer % layers + 1} of {layers}"
        return plot_alignment(weights, path, source=found.source, target=found.target, title=f"{kind}{where}")
