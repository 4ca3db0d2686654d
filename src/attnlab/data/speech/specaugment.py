"""SpecAugment's masks on training features: bands of mel channels and spans of frames set to
zero, drawn from a seeded generator.

Park, Chan, Zhang, Chiu, Zoph, Cubuk & Le (2019), "SpecAugment: A Simple Data Augmentation
Method for Automatic Speech Recognition", §2 (time warping left out); the listener they train
is Chan et al.'s "Listen, Attend and Spell" (Hasegawa-Johnson, ECE 417 Lecture 21). For
normalised features ``x`` ``(F, D)`` (mean 0, so a masked value is the mean):

* ``freq_masks`` times: a width ``f ~ U{0, freq_width}``, a first channel ``f0 ~ U{0, D - f}``,
  ``x[:, f0 : f0 + f] = 0``;
* ``time_masks`` times: a width ``t ~ U{0, min(time_width, ⌊time_ratio · F⌋)}``, a first frame
  ``t0 ~ U{0, F - t}``, ``x[t0 : t0 + t, :] = 0``.

Every draw comes from the ``torch.Generator`` given, so a seed decides every mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.validation import check_positive, check_rank


@dataclass(frozen=True)
class SpecAugment:
    """How many frequency and time masks, their widest, and the largest share of an utterance
    one time mask may cover. ``freq_masks = time_masks = 0``: no masking."""

    freq_masks: int = 2
    freq_width: int = 15
    time_masks: int = 2
    time_width: int = 40
    time_ratio: float = 0.2

    def __post_init__(self) -> None:
        for name in ("freq_masks", "freq_width", "time_masks", "time_width"):
            check_positive(f"specaugment.{name}", getattr(self, name), allow_zero=True)
        if not 0.0 <= self.time_ratio <= 1.0:
            raise ValueError(f"specaugment.time_ratio must be in [0, 1], got {self.time_ratio}")

    @property
    def enabled(self) -> bool:
        return self.freq_masks + self.time_masks > 0

    def spans(self, frames: int, channels: int, generator: torch.Generator) -> list[tuple[int, int, int]]:
        """The masks of one utterance of ``frames`` × ``channels``: ``(axis, start, width)``,
        axis 0 for frames and 1 for channels."""
        out = []
        for axis, count, widest, size in (
            (1, self.freq_masks, min(self.freq_width, channels), channels),
            (0, self.time_masks, min(self.time_width, int(self.time_ratio * frames)), frames),
        ):
            for _ in range(count):
                width = int(torch.randint(0, widest + 1, (), generator=generator))
                start = int(torch.randint(0, size - width + 1, (), generator=generator))
                out.append((axis, start, width))
        return out

    def __call__(self, features: Tensor, generator: torch.Generator) -> Tensor:
        """``features`` ``(F, D)`` with the masks of :meth:`spans` set to 0 (a copy)."""
        check_rank("features", features, 2, "(F, D)")
        out = features.clone()
        for axis, start, width in self.spans(*features.shape, generator):
            if axis == 0:
                out[start:start + width] = 0.0
            else:
                out[:, start:start + width] = 0.0
        return out
