"""Images and their tokenized captions held in memory, batched for teacher forcing.

A :class:`CaptionSet` is read from a folder of images + captions file (text or JSON lines,
:mod:`attnlab.data.image_captions`; composed scenes are written in that layout too) and keeps
each image's digit boxes when the folder has them. ``collate`` pads the captions on the right
with ``pad_id`` into ``tgt_in = <bos> y_1 … y_n`` and ``tgt_out = y_1 … y_n <eos>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor
from torch.utils.data import Dataset

from attnlab.data.corpora import PathLike
from attnlab.data.image_captions import ImageCaptions, read_scene_digits
from attnlab.data.tokenizers import AnyTokenizer

__all__ = ["CaptionBatch", "CaptionSet"]


class CaptionBatch(NamedTuple):
    """``images (B, C, H, W)``, ``tgt_in (B, T)`` and ``tgt_out (B, T)``, padded with ``pad_id``."""

    images: Tensor
    tgt_in: Tensor
    tgt_out: Tensor


class CaptionSet(Dataset):
    """``images (N, C, H, W)`` float32 in [0, 1], their ``captions`` (text), their caption ids
    (no bos / eos) and, for composed scenes, their ``digits`` (each a list of ``label``,
    ``size``, ``box``; ``None`` for a folder without ``digits.json``)."""

    def __init__(self, images: Tensor, captions: Sequence[str], tokenizer: AnyTokenizer,
                 digits: Sequence[list[dict]] | None = None) -> None:
        if images.shape[0] != len(captions):
            raise ValueError(f"images holds {images.shape[0]} images but captions {len(captions)}")
        self.images, self.captions, self.digits = images, list(captions), digits
        self.ids = tokenizer.encode_batch(self.captions)
        self.pad_id, self.bos_id, self.eos_id = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id

    @staticmethod
    def read_folder(folder: PathLike, *, channels: int, size: int) -> tuple[Tensor, list[str], list | None]:
        """``(images (N, C, size, size), captions, digits | None)`` of a folder of images and
        its ``captions.txt`` or ``captions.jsonl`` (one pair a caption line: an image with k
        captions appears k times)."""
        data = ImageCaptions(folder, channels=channels, size=size)
        if len(data) == 0:
            raise ValueError(f"{data.captions_path} has no captions")
        images = torch.stack([data[i][0] for i in range(len(data))])
        captions = [text for _, text in data.pairs]
        boxes = read_scene_digits(folder)
        digits = None if boxes is None else [boxes[Path(p).name] for p, _ in data.pairs]
        return images, captions, digits

    def __len__(self) -> int:
        return len(self.captions)

    def __getitem__(self, index: int) -> int:
        return index  # collate gathers the rows at once

    def collate(self, indices: Sequence[int]) -> CaptionBatch:
        rows = [self.ids[i] for i in indices]
        longest = max(len(r) for r in rows) + 1
        tgt_in = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        tgt_out = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        for b, ids in enumerate(rows):
            tgt_in[b, : len(ids) + 1] = torch.tensor([self.bos_id, *ids])
            tgt_out[b, : len(ids) + 1] = torch.tensor([*ids, self.eos_id])
        return CaptionBatch(self.images[list(indices)], tgt_in, tgt_out)

    def loader(self, batch_size: int, *, shuffle: bool, seed: int = 0) -> torch.utils.data.DataLoader:
        """Batches of ``batch_size`` (a seeded shuffle each epoch when ``shuffle``)."""
        generator = torch.Generator().manual_seed(seed) if shuffle else None
        return torch.utils.data.DataLoader(
            self, batch_size=batch_size, shuffle=shuffle, generator=generator, collate_fn=self.collate
        )
