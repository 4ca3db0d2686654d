"""Whether a captioner looked at what it named: the **share of attention mass inside the box**
of the digit a number word names, beside the box's share of the image (what uniform attention
would give). Xu et al. 2015, "Show, Attend and Tell", Figures 3 and 5, measured on scenes of
handwritten digits (:mod:`attnlab.data.scenes`), whose boxes are known."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from attnlab.data.scenes import NUMBER_WORDS, box_reading_order, digit_slots
from attnlab.pipelines import CaptioningPipeline

__all__ = ["attention_on_digits", "box_share", "word_boxes"]

Box = tuple[int, int, int, int]


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


def word_boxes(words: Sequence[str], digits: Sequence[dict]) -> list[Box | None]:
    """For each word, the box of the scene digit it names, when the caption names as many
    digits as the scene holds (else the words cannot be matched to digits: all ``None``)."""
    slots = digit_slots(list(words))
    order = box_reading_order([tuple(d["box"]) for d in digits])
    if max(slots, default=-1) + 1 != len(digits):
        return [None] * len(words)
    return [tuple(digits[order[s]]["box"]) if s >= 0 else None for s in slots]


def attention_on_digits(captioner: CaptioningPipeline, images: Tensor, captions: Sequence[Sequence[int]],
                        digits: Sequence[Sequence[dict]]) -> dict[str, float]:
    """Over every number word of ``captions`` that names a scene digit: the mean attention mass
    inside that digit's box (``box_attention``) and the mean share of the image the box covers
    (``box_area``, uniform attention's mass), with how many words were counted (``{}`` for a
    model without attention)."""
    inside, area, words_counted = 0.0, 0.0, 0
    size = tuple(images.shape[-2:])
    for image, ids, scene in zip(images, captions, digits, strict=True):
        words, maps = captioner.attention(image, ids)
        if maps is None:
            return {}
        for t, box in enumerate(word_boxes(words, scene)):
            if box is None or words[t] not in NUMBER_WORDS:
                continue
            inside += box_share(maps[t], box, size)
            area += (box[2] - box[0]) * (box[3] - box[1]) / (size[0] * size[1])
            words_counted += 1
    if not words_counted:
        return {"box_attention": float("nan"), "box_area": float("nan"), "box_words": 0}
    return {"box_attention": inside / words_counted, "box_area": area / words_counted,
            "box_words": words_counted}
