"""Images in, captions out: a captioning model with its tokenizer, decoding through
:mod:`attnlab.generation` (the image takes the place of a source sentence), and where it looked.

:class:`Captioner` captions a batch of images with beam search (or greedily), reads the
attention that wrote each word back with teacher forcing on its own caption, and measures
whether that attention fell on the digit the word names: the **share of attention mass inside
the digit's box**, beside the box's share of the image (what uniform attention would give).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnlab.data import load_tokenizer
from attnlab.data.scenes import NUMBER_WORDS, box_reading_order, digit_slots
from attnlab.data.tokenizers import AnyTokenizer
from attnlab.devices import model_device
from attnlab.generation import beam_search, greedy_search
from attnlab.generation.state import inference
from attnlab.models import load_pretrained
from attnlab.training.progress import progress_bar

__all__ = ["Captioner", "box_share"]


def box_share(weights: Tensor, box: Sequence[int], image_size: tuple[int, int]) -> float:
    """The attention mass inside ``box (x0, y0, x1, y1)`` (pixels, ends exclusive): the grid
    weights ``(h, w)`` spread evenly over the pixels of their cells (each cell covers
    ``H / h × W / w`` pixels), summed over the box's pixels."""
    height, width = image_size
    h, w = weights.shape
    pixels = weights.float().repeat_interleave(height // h, 0).repeat_interleave(width // w, 1)
    pixels = pixels / ((height // h) * (width // w))  # (H, W), sums to Σ weights
    x0, y0, x1, y1 = box
    return float(pixels[y0:y1, x0:x1].sum())


class Captioner:
    """A captioning model (:class:`~attnlab.models.ShowAttendTell`) and its word tokenizer."""

    def __init__(self, model: nn.Module, tokenizer: AnyTokenizer) -> None:
        self.model, self.tok = model, tokenizer

    @classmethod
    def from_checkpoint(cls, checkpoint: str | Path, *, device: str = "cpu") -> Captioner:
        return cls(load_pretrained(checkpoint, device=device), load_tokenizer(checkpoint))

    def caption_ids(self, images: Tensor, *, beam_size: int = 3, length_penalty: float = 0.0,
                    max_len: int = 24, batch_size: int = 100, progress: bool = False) -> list[list[int]]:
        """Caption token ids (no bos / eos) of ``images (N, C, H, W)``, ``batch_size`` at a time
        (``progress``: a bar over the images, :func:`~attnlab.training.progress.progress_bar`)."""
        out: list[list[int]] = []
        device = model_device(self.model)
        kwargs = dict(max_new_tokens=max_len, bos_id=self.tok.bos_id, eos_id=self.tok.eos_id)
        bar = progress_bar(images.shape[0], unit="image", desc="decoding", enabled=progress, leave=False)
        with bar:
            for start in range(0, images.shape[0], batch_size):
                batch = images[start:start + batch_size].to(device)
                if beam_size == 1:
                    out += greedy_search(self.model, batch, **kwargs)
                else:
                    best = beam_search(
                        self.model, batch, beam_size=beam_size, length_penalty=length_penalty, **kwargs
                    )
                    out += [h[0].tokens for h in best]
                bar.update(batch.shape[0])
        return out

    def caption(self, images: Tensor, **decoding: Any) -> list[str]:
        """Captions (text) of ``images (N, C, H, W)``; ``decoding`` as :meth:`caption_ids`."""
        return [self.tok.decode(ids) for ids in self.caption_ids(images, **decoding)]

    def attention_maps(self, image: Tensor, ids: Sequence[int]) -> tuple[list[str], Tensor | None]:
        """The words of caption ``ids`` with its end token, and the attention that wrote each
        ``(T, h, w)`` (teacher forcing on the caption; ``None`` for a model without attention)."""
        device = model_device(self.model)
        tgt_in = torch.tensor([[self.tok.bos_id, *ids]], device=device)  # (1, T)
        with inference(self.model):
            _, weights = self.model(image.unsqueeze(0).to(device), tgt_in, return_weights=True)
        words = [*self.tok.token_strings(list(ids)), "<eos>"]
        if not weights:
            return words, None
        return words, weights[0][0, 0].float().cpu().reshape(len(words), *self.model.grid)

    def word_boxes(
        self, words: Sequence[str], digits: Sequence[dict]
    ) -> list[tuple[int, int, int, int] | None]:
        """For each word, the box of the scene digit it names, when the caption names as many
        digits as the scene holds (else the words cannot be matched to digits: all ``None``)."""
        slots = digit_slots(list(words))
        order = box_reading_order([tuple(d["box"]) for d in digits])
        if max(slots, default=-1) + 1 != len(digits):
            return [None] * len(words)
        return [tuple(digits[order[s]]["box"]) if s >= 0 else None for s in slots]

    def attention_on_digits(self, images: Tensor, captions: Sequence[Sequence[int]],
                            digits: Sequence[Sequence[dict]]) -> dict[str, float]:
        """Over every generated number word that names a scene digit: the mean attention mass
        inside that digit's box (``box_attention``) and the mean share of the image the box
        covers (``box_area``, uniform attention's mass), with how many words were counted."""
        inside, area, words_counted = 0.0, 0.0, 0
        size = tuple(images.shape[-2:])
        for image, ids, scene in zip(images, captions, digits, strict=True):
            words, maps = self.attention_maps(image, ids)
            if maps is None:
                return {}
            for t, box in enumerate(self.word_boxes(words, scene)):
                if box is None or words[t] not in NUMBER_WORDS:
                    continue
                inside += box_share(maps[t], box, size)
                area += (box[2] - box[0]) * (box[3] - box[1]) / (size[0] * size[1])
                words_counted += 1
        if not words_counted:
            return {"box_attention": float("nan"), "box_area": float("nan"), "box_words": 0}
        return {"box_attention": inside / words_counted, "box_area": area / words_counted,
                "box_words": words_counted}

