"""A captioner's attention in a notebook: where it looked for each word it wrote.

Xu et al. 2015, "Show, Attend and Tell", Figure 3 (Ba (CSC413 Lecture 8), "Attention-based caption
generation"): the image, then one tile a word, the image darkened where the step that wrote the
word gave little weight — ``1 - α / max α`` of its ``h × w`` grid, upsampled bilinearly over the
image — and the weight of the region under the pointer. The maps travel as the explorer's records
(:func:`attnlab.explorer.quantize.quantize_heads`: a word's map one row, scaled to its largest).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from attnlab.explorer.quantize import quantize_heads
from attnlab.views.encode import as_tensor, image_payload, token_labels
from attnlab.views.html import View


class CaptionView(View):
    """An ``image (C, H, W)``, its caption's ``words`` (T) and ``maps (T, h, w)``."""

    kind = "caption"

    def __init__(self, image: Any, words: list[str], maps: Any, title: str | None) -> None:
        self.image, self.words, self.maps, self.title = image, words, maps, title

    def data(self) -> dict[str, Any]:
        steps, h, w = self.maps.shape
        (record,) = quantize_heads(self.maps.reshape(1, 1, steps, h * w), causal=False)
        return {"image": image_payload(self.image), "words": self.words, "grid": [h, w],
                "maps": base64.b64encode(record).decode("ascii")}

    def figure(self) -> Any:
        from attnlab.visualize.captions import CaptionAttention, caption_figure

        image = self.image if self.image.dim() == 3 else self.image.unsqueeze(0)
        return caption_figure([CaptionAttention(image, self.words, self.maps, self.title or "")])


def caption_attention(image: Any, words: Sequence[Any], maps: Any, *,
                      title: str | None = None) -> CaptionView:
    """Where a captioner looked for each of its ``words``: ``image`` ``(C, H, W)`` or ``(H, W)``
    in [0, 1] and ``maps`` ``(T, h, w)`` (:meth:`~attnlab.pipelines.CaptioningPipeline.attention`:
    row t the attention over the image's grid that wrote word t), non-negative."""
    pixels = as_tensor(image, "image")
    image_payload(pixels)  # checked here, at the entry point
    grids = as_tensor(maps, "maps")
    if grids.dim() != 3:
        raise ValueError(f"maps must be (T, h, w), one map a word, got shape {tuple(grids.shape)}")
    if float(grids.min()) < 0:
        raise ValueError(f"maps must be ≥ 0 (attention weights), got a minimum of {float(grids.min()):.4g}")
    labels = token_labels(words, grids.shape[0], "words", "maps")
    return CaptionView(pixels, labels, grids, title)
