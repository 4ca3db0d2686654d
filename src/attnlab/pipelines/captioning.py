"""Images in, captions out: a captioning model with its word tokenizer, decoding through
:mod:`attnlab.generation` (the image takes the place of a source sentence), and where it looked.

Xu et al. 2015, "Show, Attend and Tell"; Ba (CSC413 Lecture 8), attention-based caption
generation. :meth:`CaptioningPipeline.caption` beam-decodes (or greedily) a batch of images;
:meth:`CaptioningPipeline.attention` reads back, with teacher forcing on a caption, the
attention map that wrote each of its words.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab.data.tokenizers import TOKENIZER_FILE, AnyTokenizer, load_tokenizer
from attnlab.generation.state import inference
from attnlab.models import task_models
from attnlab.pipelines.base import DecodingPipeline
from attnlab.pipelines.decoding import DecodeConfig, search
from attnlab.progress import progress_bar

__all__ = ["CaptionMaps", "CaptioningPipeline"]


class CaptionMaps(NamedTuple):
    """The attention that wrote a caption (:meth:`CaptioningPipeline.attention`)."""

    words: list[str]  # T: the caption's words and <eos>
    maps: Tensor | None  # (T, h, w): row t the attention over the image grid that wrote word t


class CaptioningPipeline(DecodingPipeline):
    """A captioning model (:class:`~attnlab.models.ShowAttendTell`), its word tokenizer and its
    :class:`DecodeConfig` (the checkpoint's ``[eval]``; a caption is at most ``max_len`` words)."""

    model_types = task_models("captioning")
    family = "a captioning model"
    default_decoding = DecodeConfig(beam_size=3, length_penalty=0.0, batch_size=100, max_len=24)

    def __init__(self, model: nn.Module, tokenizer: AnyTokenizer, *, decoding: DecodeConfig | None = None,
                 recipe: dict[str, Any] | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        super().__init__(decoding=decoding, recipe=recipe)

    @classmethod
    def from_files(cls, model: nn.Module, checkpoint: Path, recipe: dict[str, Any]) -> CaptioningPipeline:
        return cls(model, load_tokenizer(checkpoint), recipe=recipe)

    def tokenizer_files(self) -> dict[str, str]:
        return {TOKENIZER_FILE: self.tokenizer.to_json()}

    def read_images(self, paths: Sequence[str | Path]) -> Tensor:
        """The image files at ``paths`` converted to the model's channels and size:
        ``(N, C, H, W)`` in [0, 1] (:func:`~attnlab.data.image_captions.load_image`)."""
        from attnlab.data.image_captions import load_image

        config = self.model.config
        return torch.stack([load_image(p, config.in_channels, config.image_size) for p in paths])

    def caption_ids(
        self, images: Tensor, decoding: DecodeConfig | None = None, *, progress: bool = False
    ) -> list[list[int]]:
        """Caption token ids (no bos / eos) of ``images (N, C, H, W)`` with ``decoding``
        (default: the pipeline's own), ``batch_size`` at a time (``progress``: a bar over the
        images)."""
        decoding = decoding or self.decoding
        if decoding.max_len is None:
            raise ValueError("a caption's decoding needs max_len (an image has no source length), got None")
        out: list[list[int]] = []
        ends = dict(bos_id=self.tokenizer.bos_id, eos_id=self.tokenizer.eos_id)
        bar = progress_bar(images.shape[0], unit="image", desc="decoding", enabled=progress, leave=False)
        with bar:
            for start in range(0, images.shape[0], decoding.batch_size):
                batch = images[start:start + decoding.batch_size].to(self.device)  # (B, C, H, W)
                out += search(self.model, batch, decoding, decoding.max_len, **ends)
                bar.update(batch.shape[0])
        return out

    def caption(
        self, images: Tensor, decoding: DecodeConfig | None = None, *, progress: bool = False
    ) -> list[str]:
        """Captions (text) of ``images (N, C, H, W)``; as :meth:`caption_ids`."""
        return [self.tokenizer.decode(ids) for ids in self.caption_ids(images, decoding, progress=progress)]

    @property
    def draws_attention(self) -> bool:
        """Whether the model attends over the image (else it reads the mean feature)."""
        return bool(self.model.config.attention)

    def attention(self, image: Tensor, ids: Sequence[int]) -> CaptionMaps:
        """The words of caption ``ids`` with its end token, and the attention that wrote each
        ``(T, h, w)`` (teacher forcing on the caption; ``None`` for a model without attention)."""
        tgt_in = torch.tensor([[self.tokenizer.bos_id, *ids]], device=self.device)  # (1, T)
        with inference(self.model):
            memory, mask = self.model.encode(image.unsqueeze(0).to(self.device))  # (1, L, D)
            _, weights = self.model.decode(tgt_in, memory, mask, return_weights=True)  # [] or [(1, 1, T, L)]
        words = [*self.tokenizer.token_strings(list(ids)), "<eos>"]
        if not weights:
            return CaptionMaps(words, None)
        return CaptionMaps(words, weights[0][0, 0].float().cpu().reshape(len(words), *self.model.grid))

    def plot_attention(self, images: Tensor, captions: Sequence[Sequence[int]], path: str | Path,
                       titles: Sequence[str] | None = None) -> Path:
        """Where the model looked for each word of ``captions`` (ids, one an image), one row an
        image titled by ``titles`` (default: the caption), drawn by
        :func:`attnlab.visualize.plot_caption_attention` into ``path``."""
        from attnlab.visualize.captions import CaptionAttention, plot_caption_attention

        if not self.draws_attention:
            kind = self.model.model_type
            raise ValueError(f"this {kind} model has no attention to draw (attention = false)")
        titles = titles or [self.tokenizer.decode(ids) for ids in captions]
        rows = [CaptionAttention(image, *self.attention(image, ids), title)
                for image, ids, title in zip(images, captions, titles, strict=True)]
        return plot_caption_attention(rows, path)
