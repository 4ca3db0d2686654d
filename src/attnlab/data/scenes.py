"""Scenes of real handwritten digits, composed by a seeded generator, with their captions.

The multi-digit setting of Ba, Mnih & Kavukcuoglu (2014), "Multiple Object Recognition with
Visual Attention", captioned for Xu et al. (2015), "Show, Attend and Tell". A **scene** is a
square canvas ``(1, canvas, canvas)``, float in [0, 1] (0 = background), holding 1–4 MNIST
digits of one split (:mod:`attnlab.data.mnist`) at random positions:

* each digit is cropped to its ink, then resized (bilinear, antialiased) so that the longer
  side of its box is ``small`` (20 px) or ``large`` (28 px) — drawn with probability ½ each —
  keeping its aspect ratio; its **box** ``(x0, y0, x1, y1)`` is that patch on the canvas
  (``x1``, ``y1`` exclusive), so the box is the digit's ink box;
* boxes keep ``gap`` pixels apart (never overlap) and are drawn one at a time, largest first,
  each uniformly among the positions still free; a layout is also **unambiguous** for the
  caption: two digits have ``| |dx| - |dy| | >= clearance`` between their box centres, and
  three or four digits have box centres at least ``clearance`` apart horizontally. A dead end
  restarts the layout; after ``RESTARTS`` restarts the digits (not their sizes) are redrawn.

**Caption grammar** (deterministic; number words ``zero`` … ``nine``, sizes ``small`` /
``large``; punctuation is a token of its own)::

    1 digit    a SIZE NUMBER                          "a large seven"
    2 digits   a SIZE NUMBER above a SIZE NUMBER      "a small seven above a large two"
               a SIZE NUMBER left of a SIZE NUMBER    "a large one left of a small four"
    3 digits   three digits : N , N and N , from left to right
    4 digits   four digits : N , N , N and N , from left to right

Two digits are related by their box centres: ``above`` when ``|dy| > |dx|`` (the upper digit
named first), else ``left of`` (the left digit first). Three or four are listed by the x of
their box centres. :func:`caption_digits` gives, for each token, the index (into
``scene.digits``) of the digit it describes — the number word and, for one or two digits, its
size word — or −1; the count word of "three digits" names no digit. :func:`digit_slots` parses
any caption of this grammar (a generated one too) into the same per-token positions in reading
order, which :func:`reading_order` maps to digits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.data.corpora import PathLike
from attnlab.data.mnist import source_digits
from attnlab.validation import check_choice, check_positive

__all__ = [
    "NUMBER_WORDS", "SIZE_WORDS", "PlacedDigit", "Scene", "caption", "caption_digits", "caption_text",
    "box_reading_order", "compose_scene", "digit_slots", "make_scenes", "reading_order",
    "split_caption",
]

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SIZE_WORDS = ("small", "large")
COUNTS = (1, 2, 3, 4)
RESTARTS = 20  # layouts tried for one draw of digits
REDRAWS = 50  # draws of digits before a request is declared impossible
PUNCTUATION = (",", ":")


@dataclass(frozen=True)
class PlacedDigit:
    """One digit of a scene: its class, size word, box ``(x0, y0, x1, y1)`` in canvas pixels
    (``x1``, ``y1`` exclusive) and ``source``, its index among the 10,000 MNIST test digits."""

    label: int
    size: str
    box: tuple[int, int, int, int]
    source: int

    @property
    def centre(self) -> tuple[float, float]:
        """``(x, y)`` of the box centre, in pixels."""
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2, (y0 + y1) / 2


@dataclass(frozen=True, eq=False)
class Scene:
    """A composed scene: ``image (1, H, W)`` float32 in [0, 1] and its digits, in the order drawn."""

    image: Tensor
    digits: tuple[PlacedDigit, ...]


def _check_layout(count: int, canvas: int, small: int, large: int, gap: int, clearance: int) -> None:
    check_choice("count", count, COUNTS)
    for name, value in (("canvas", canvas), ("small", small), ("large", large)):
        check_positive(name, value)
    check_positive("gap", gap, allow_zero=True)
    check_positive("clearance", clearance, allow_zero=True)
    if small >= large:
        raise ValueError(f"small must be less than large, got small={small} and large={large}")
    if large > canvas:
        raise ValueError(f"canvas={canvas} is too small for a large digit (large={large})")
    if count > 1 and 2 * large + gap > canvas:
        raise ValueError(
            f"canvas={canvas} is too small for {count} large digits: two side by side need "
            f"2 * large + gap = {2 * large + gap} pixels (large={large}, gap={gap})"
        )


def _ink(image: Tensor) -> Tensor:
    """The digit cropped to its ink: ``(28, 28)`` uint8 → ``(h, w)`` float in [0, 1]."""
    rows, cols = image.any(dim=1).nonzero(), image.any(dim=0).nonzero()
    if rows.numel() == 0:
        return image.float() / 255  # a blank digit: keep the whole frame
    return image[int(rows[0]):int(rows[-1]) + 1, int(cols[0]):int(cols[-1]) + 1].float() / 255


def _resize(ink: Tensor, side: int) -> Tensor:
    """``ink (h, w)`` scaled so its longer side is ``side`` → ``(h', w')`` in [0, 1]."""
    h, w = ink.shape
    scale = side / max(h, w)
    size = (max(1, round(h * scale)), max(1, round(w * scale)))
    out = F.interpolate(ink[None, None], size=size, mode="bilinear", align_corners=False, antialias=True)
    return out[0, 0].clamp(0.0, 1.0)  # (h', w')


def _free(canvas: int, h: int, w: int, boxes: list[tuple[int, int, int, int]], count: int,
          gap: int, clearance: int) -> Tensor:
    """Top-left corners ``(y, x)`` where an ``h × w`` box fits: ``(canvas-h+1, canvas-w+1)`` bool."""
    ys = torch.arange(canvas - h + 1)[:, None]  # (Y, 1)
    xs = torch.arange(canvas - w + 1)[None, :]  # (1, X)
    ok = torch.ones(canvas - h + 1, canvas - w + 1, dtype=torch.bool)
    for x0, y0, x1, y1 in boxes:
        ok &= ~((xs < x1 + gap) & (xs + w + gap > x0) & (ys < y1 + gap) & (ys + h + gap > y0))
        dx = (2 * xs + w - x0 - x1).abs()  # twice the centres' distance, so integers
        dy = (2 * ys + h - y0 - y1).abs()
        if count == 2:
            ok &= (dx - dy).abs() >= 2 * clearance
        elif count > 2:
            ok &= dx >= 2 * clearance
    return ok


def _layout(shapes: list[tuple[int, int]], canvas: int, gap: int, clearance: int,
            generator: torch.Generator) -> list[tuple[int, int, int, int]] | None:
    """Boxes for patches of ``shapes`` (same order), or None when ``RESTARTS`` layouts dead-end."""
    order = sorted(range(len(shapes)), key=lambda i: -shapes[i][0] * shapes[i][1])
    for _ in range(RESTARTS):
        boxes: dict[int, tuple[int, int, int, int]] = {}
        for i in order:
            h, w = shapes[i]
            free = _free(canvas, h, w, list(boxes.values()), len(shapes), gap, clearance).nonzero()
            if free.shape[0] == 0:
                break
            y, x = (int(v) for v in free[int(torch.randint(free.shape[0], (1,), generator=generator))])
            boxes[i] = (x, y, x + w, y + h)
        else:
            return [boxes[i] for i in range(len(shapes))]
    return None


def compose_scene(
    digits: Tensor, labels: Tensor, count: int, generator: torch.Generator, canvas: int = 64, *,
    indices: Tensor | None = None, small: int = 20, large: int = 28, gap: int = 2, clearance: int = 4,
) -> Scene:
    """One scene of ``count`` distinct digits drawn from ``digits (N, 28, 28)`` uint8 with
    ``labels (N,)``; ``indices (N,)`` are their MNIST indices (default ``0 … N-1``), recorded as
    each digit's ``source``. Uses only ``generator`` for randomness.

    Raises:
        ValueError: ``count`` not in 1–4, sizes that do not fit ``canvas`` (naming the values),
            fewer than ``count`` source digits, or no layout found in ``REDRAWS`` draws.
    """
    _check_layout(count, canvas, small, large, gap, clearance)
    if digits.dim() != 3 or labels.shape != digits.shape[:1]:
        raise ValueError(f"digits must be (N, H, W) with labels (N,), got digits {tuple(digits.shape)} "
                         f"and labels {tuple(labels.shape)}")
    if digits.dtype != torch.uint8:
        raise ValueError(f"digits must be uint8 grey levels 0–255 (as MNIST stores them), got {digits.dtype}")
    if digits.shape[0] < count:
        raise ValueError(f"count={count} needs at least {count} source digits, got {digits.shape[0]}")
    indices = torch.arange(digits.shape[0]) if indices is None else indices
    sizes = [large if bool(torch.randint(2, (1,), generator=generator)) else small for _ in range(count)]
    for _ in range(REDRAWS):
        chosen = torch.randperm(digits.shape[0], generator=generator)[:count].tolist()
        patches = [_resize(_ink(digits[i]), side) for i, side in zip(chosen, sizes, strict=True)]
        boxes = _layout([tuple(p.shape) for p in patches], canvas, gap, clearance, generator)
        if boxes is not None:
            break
    else:
        raise ValueError(
            f"could not place {count} digits of sizes {sizes} on a {canvas} × {canvas} canvas with "
            f"gap={gap} and clearance={clearance} in {REDRAWS} draws: use a larger canvas or smaller sizes"
        )
    image = torch.zeros(1, canvas, canvas)  # (1, H, W)
    placed = []
    for i, side, patch, box in zip(chosen, sizes, patches, boxes, strict=True):
        x0, y0, x1, y1 = box
        image[0, y0:y1, x0:x1] = patch
        size = "large" if side == large else "small"
        placed.append(PlacedDigit(int(labels[i]), size, box, int(indices[i])))
    return Scene(image, tuple(placed))


def make_scenes(
    split: str, n: int, seed: int, data_dir: PathLike | None = None, *, canvas: int = 64,
    counts: tuple[int, ...] = COUNTS, small: int = 20, large: int = 28, gap: int = 2, clearance: int = 4,
) -> list[Scene]:
    """``n`` scenes from the source digits of ``split`` only; each scene's digit count is drawn
    uniformly from ``counts``. The same arguments give the same scenes (one
    ``torch.Generator`` seeded with ``seed``)."""
    check_positive("n", n)
    if not counts:
        raise ValueError("counts must name at least one digit count (1–4), got ()")
    for count in counts:
        _check_layout(count, canvas, small, large, gap, clearance)
    source = source_digits(split, data_dir)
    generator = torch.Generator().manual_seed(seed)
    scenes = []
    for _ in range(n):
        count = counts[int(torch.randint(len(counts), (1,), generator=generator))]
        scenes.append(compose_scene(source.images, source.labels, count, generator, canvas,
                                    indices=source.indices, small=small, large=large, gap=gap,
                                    clearance=clearance))
    return scenes


# --- captions -----------------------------------------------------------------------------


def reading_order(scene: Scene) -> list[int]:
    """Indices into ``scene.digits`` in the order the caption names them."""
    return box_reading_order([d.box for d in scene.digits])


def box_reading_order(boxes: list[tuple[int, int, int, int]]) -> list[int]:
    """The caption's order of digits with ``boxes (x0, y0, x1, y1)``: two by the larger of the
    vertical and horizontal gap between box centres (the upper, else the left one first); three
    or four by the x (then y) of their centres."""
    centres = [((x0 + x1) / 2, (y0 + y1) / 2) for x0, y0, x1, y1 in boxes]
    if len(centres) == 2:
        (ax, ay), (bx, by) = centres
        if abs(by - ay) > abs(bx - ax):
            return [0, 1] if ay < by else [1, 0]  # the upper one first
        return [0, 1] if ax < bx else [1, 0]  # the left one first
    return sorted(range(len(centres)), key=lambda i: centres[i])  # by x (then y)


def _relation(scene: Scene) -> list[str]:
    (ax, ay), (bx, by) = scene.digits[0].centre, scene.digits[1].centre
    return ["above"] if abs(by - ay) > abs(bx - ax) else ["left", "of"]


def caption(scene: Scene) -> list[str]:
    """The scene's caption as tokens (the grammar above)."""
    named = [scene.digits[i] for i in reading_order(scene)]
    if len(named) == 1:
        return ["a", named[0].size, NUMBER_WORDS[named[0].label]]
    if len(named) == 2:
        first, second = (["a", d.size, NUMBER_WORDS[d.label]] for d in named)
        return [*first, *_relation(scene), *second]
    words = [NUMBER_WORDS[d.label] for d in named]
    listed = []
    for k, word in enumerate(words):
        if k == len(words) - 1:
            listed.append("and")
        elif k > 0:
            listed.append(",")
        listed.append(word)
    return [NUMBER_WORDS[len(named)], "digits", ":", *listed, ",", "from", "left", "to", "right"]


def digit_slots(tokens: list[str]) -> list[int]:
    """For each token of a caption in the grammar, the position (0, 1, …) in reading order of
    the digit it describes, or −1. Works on generated captions: it reads the structure, not a
    scene."""
    slots = [-1] * len(tokens)
    if len(tokens) > 1 and tokens[1] == "digits":  # "three digits : N , N and N , from left to right"
        slot = 0
        for t, token in enumerate(tokens[2:], start=2):
            if token == "from":
                break
            if token in NUMBER_WORDS:
                slots[t], slot = slot, slot + 1
        return slots
    slot = -1  # "a SIZE NUMBER ..." — each "a" opens the next digit's phrase
    for t, token in enumerate(tokens):
        if token == "a":
            slot += 1
        elif slot >= 0 and (token in NUMBER_WORDS or token in SIZE_WORDS):
            slots[t] = slot
    return slots


def caption_digits(scene: Scene) -> list[int]:
    """For each token of :func:`caption`, the index into ``scene.digits`` of the digit it
    describes (its number word, and its size word when there is one), or −1."""
    order = reading_order(scene)
    return [order[s] if 0 <= s < len(order) else -1 for s in digit_slots(caption(scene))]


def caption_text(tokens: list[str]) -> str:
    """Tokens as a sentence: ``"three digits: four, nine and one, from left to right"``."""
    text = ""
    for token in tokens:
        text += token if token in PUNCTUATION or not text else " " + token
    return text


def split_caption(text: str) -> list[str]:
    """The inverse of :func:`caption_text`: words split on spaces, ``,`` and ``:`` tokens apart."""
    for mark in PUNCTUATION:
        text = text.replace(mark, f" {mark} ")
    return text.split()
