"""Text in, text out: a translation model with its tokenizers, decoding whole sentences.

:func:`translate` encodes sources as in training (no ``<bos>``/``<eos>``), decodes them with
beam search or greedily (:mod:`attnlab.generation`) and detokenizes. :class:`Translator` holds
a model and its two tokenizers, loads them from a checkpoint directory and draws the
alignment of a translation (Bahdanau et al. 2015, Figure 3; the encoder-decoder attention of
Ba (CSC413 Lecture 8), "Transformer Machine Translation").
:func:`read_chunks` feeds it a stream (stdin) chunk by chunk, so output can follow input.
"""

from __future__ import annotations

import dataclasses
import select
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab.data import load_tokenizers
from attnlab.data.tokenizers import AnyTokenizer
from attnlab.devices import model_device
from attnlab.generation import beam_search, greedy_search
from attnlab.generation.state import inference
from attnlab.models import load_pretrained
from attnlab.models.base import draws_attention
from attnlab.parsing import read_json
from attnlab.tasks.recipe import RECIPE_FILE
from attnlab.training.progress import progress_bar
from attnlab.validation import indefinite

if TYPE_CHECKING:
    from attnlab.tasks.translation_recipe import DecodeConfig


def translate(
    model: nn.Module,
    src_tok: AnyTokenizer,
    tgt_tok: AnyTokenizer,
    sentences: Sequence[str],
    *,
    beam_size: int = 5,
    length_penalty: float = 0.6,
    batch_size: int = 64,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    max_len: int | None = None,
    progress: bool = False,
    before_step: Callable[[], None] | None = None,
) -> list[str]:
    """Translate ``sentences`` (detokenized text in, detokenized text out, order kept).

    Sources are encoded as in training (no ``<bos>``/``<eos>``) and decoded with beam search
    (``beam_size = 1``: greedy) at most ``batch_size`` at a time, in batches of equal source
    length (so no padding). Each sentence may produce ``max_len_a · source length + max_len_b``
    subwords (``max_len`` when given): a per-sentence limit, so a translation does not depend on
    the other input lines. Blank sentences translate to ``""``. ``progress``: a bar over the
    sentences (:func:`~attnlab.training.progress.progress_bar`). ``before_step``: called before
    every decoding step (what it raises ends the translation).
    """
    encoded = src_tok.encode_batch([s.strip() for s in sentences])
    out = [""] * len(sentences)
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        if ids:
            by_length.setdefault(len(ids), []).append(i)
    device = model_device(model)
    batches = [
        group[j : j + batch_size]
        for _, group in sorted(by_length.items())
        for j in range(0, len(group), batch_size)
    ]
    bar = progress_bar(sum(map(len, batches)), unit="sentence", desc="decoding", enabled=progress,
                       leave=False)
    with bar:
        for rows in batches:
            src = torch.tensor([encoded[i] for i in rows], device=device)  # (B, S)
            limit = max_len or int(max_len_a * src.shape[1] + max_len_b)
            kwargs = dict(max_new_tokens=max(limit, 1), bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id,
                          before_step=before_step)
            if beam_size == 1:
                hyps = greedy_search(model, src, **kwargs)
            else:
                best = beam_search(model, src, beam_size=beam_size, length_penalty=length_penalty, **kwargs)
                hyps = [h[0].tokens for h in best]
            for i, tokens in zip(rows, hyps, strict=True):
                out[i] = tgt_tok.decode(tokens)
            bar.update(len(rows))
    return out


class LayerAlignment(NamedTuple):
    """One decoder layer's encoder-decoder attention over a translation (:meth:`Translator.alignment`)."""

    weights: Tensor  # (H, T, S)
    source: list[str]  # S source subwords
    target: list[str]  # T output subwords and <eos>
    layer: int  # 1-based
    layers: int


@dataclass
class Translator:
    """A translation model (``encode`` / ``decode``, e.g. :class:`~attnlab.models.Transformer`)
    and its source and target tokenizers."""

    model: nn.Module
    src_tok: AnyTokenizer
    tgt_tok: AnyTokenizer

    @classmethod
    def load(
        cls, checkpoint: str | Path, *, device: str | torch.device = "cpu"
    ) -> tuple[Translator, dict[str, Any]]:
        """The translator of a checkpoint directory on ``device``, and its ``recipe.json`` as a
        dict (empty when the checkpoint has none)."""
        model = load_pretrained(checkpoint, device=device)
        if not callable(getattr(model, "decode", None)):
            raise ValueError(
                f"checkpoint {checkpoint} is not a translation model (model_type {model.model_type!r})"
            )
        src_tok, tgt_tok = load_tokenizers(checkpoint)
        recipe_file = Path(checkpoint) / RECIPE_FILE
        recipe = read_json(recipe_file, "recipe") if recipe_file.is_file() else {}
        return cls(model, src_tok, tgt_tok), recipe

    def translate(
        self, sentences: Sequence[str], decoding: DecodeConfig, *, progress: bool = False,
        before_step: Callable[[], None] | None = None,
    ) -> list[str]:
        """:func:`translate` with the settings of ``decoding`` (``progress``: show a bar)."""
        return translate(self.model, self.src_tok, self.tgt_tok, sentences, progress=progress,
                         before_step=before_step, **dataclasses.asdict(decoding))

    @property
    def draws_attention(self) -> bool:
        """Whether the model's decoder attends over the source (Cho et al.'s does not)."""
        return draws_attention(self.model.decode)

    def alignment(self, source: str, translation: str, *, layer: int = -1) -> LayerAlignment:
        """The encoder-decoder attention while the model reads its own ``translation`` of
        ``source``: weights ``(H, T, S)`` of decoder layer ``layer`` (rows: output subwords and
        ``<eos>``; columns: source subwords; an RNN decoder has one layer and one head), the
        two label lists and which layer of how many."""
        if not self.draws_attention:
            raise ValueError(
                f"{indefinite(self.model.model_type)} model has no attention to draw (its decoder sees one "
                "fixed context vector)"
            )
        src_ids = self.src_tok.encode(source) or [self.src_tok.unk_id]
        out_ids = self.tgt_tok.encode(translation)
        device = model_device(self.model)
        src = torch.tensor([src_ids], device=device)  # (1, S)
        tgt_in = torch.tensor([[self.tgt_tok.bos_id, *out_ids]], device=device)  # (1, T)
        with inference(self.model):
            memory, src_mask = self.model.encode(src)  # (1, S, d), (1, S)
            _, weights = self.model.decode(tgt_in, memory, src_mask, return_weights=True)
        if not -len(weights) <= layer < len(weights):
            raise ValueError(f"layer must be in [-{len(weights)}, {len(weights) - 1}], got {layer}")
        chosen = weights[layer][0].float().cpu()  # (H, T, S)
        targets = [*self.tgt_tok.token_strings(out_ids), "<eos>"]
        return LayerAlignment(
            chosen, self.src_tok.token_strings(src_ids), targets, layer % len(weights) + 1, len(weights)
        )

    def plot_alignment(self, source: str, translation: str, path: str | Path, *, layer: int = -1) -> Path:
        """:meth:`alignment` drawn by :func:`attnlab.visualize.plot_alignment` into ``path``."""
        from attnlab.visualize import plot_alignment

        found = self.alignment(source, translation, layer=layer)
        score = getattr(self.model.config, "score", None)
        kind = self.model.model_type + (f" ({score} score)" if score else "")
        where = "" if found.layers == 1 else f", decoder layer {found.layer} of {found.layers}"
        return plot_alignment(
            found.weights, path, source=found.source, target=found.target, title=f"{kind}{where}"
        )


def read_chunks(stream: IO, max_lines: int, *, errors: str = "strict") -> Iterator[list[str]]:
    """The lines of ``stream`` (split on ``\\n`` only, line ends removed), in chunks of at most
    ``max_lines``. A chunk also ends when no more input is waiting, so lines typed at a terminal
    are answered one by one. A binary stream is decoded as UTF-8: a line that is not valid
    UTF-8 raises ``ValueError`` naming its number, unless ``errors="replace"`` replaces the
    undecodable bytes with U+FFFD."""
    chunk: list[str] = []
    end = stream.read(0)  # "" or b"": what readline returns at the end of the stream
    for number, line in enumerate(iter(stream.readline, end), start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8", errors=errors)
            except UnicodeDecodeError as err:
                if chunk:  # the lines before it are still answered
                    yield chunk
                raise ValueError(
                    f"input line {number} is not valid UTF-8 ({err.reason} at byte {err.start}); "
                    "--errors replace replaces the undecodable bytes"
                ) from None
        chunk.append(line.removesuffix("\n").removesuffix("\r"))
        if len(chunk) >= max_lines or not _more_waiting(stream):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _more_waiting(stream: IO) -> bool:
    """Whether reading ``stream`` now would not block (always true for files and buffers)."""
    try:
        ready, _, _ = select.select([stream], [], [], 0)
    except (OSError, ValueError, TypeError):  # no file descriptor: an in-memory stream
        return True
    return bool(ready)
