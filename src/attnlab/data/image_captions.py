"""Image-caption data as a folder of images and a captions file (the Flickr8k layout), and
composed digit scenes written in that layout, so that both load through one code path.

**Captions file**: UTF-8 text (or gzip), one caption a line, ``IMAGE<TAB>CAPTION``. ``IMAGE``
is a file name relative to the image folder and may end in ``#k``, the caption number of
Flickr8k's token file (``1000268201_693b08cb0e.jpg#0<TAB>A child in a pink dress ...``), which
is dropped. An image may have several captions, one line each; blank lines are skipped.
Or **JSON lines** (a name ending in ``.jsonl``, gzip too): one record a caption,
``{"image": "photos/dog.png", "caption": "A dog runs ."}``, the image's path absolute or
relative to the folder of the ``.jsonl`` file. A folder holds ``captions.txt`` or
``captions.jsonl`` (not both).

**Images**: any format Pillow reads, converted to ``channels`` (1: grey by Pillow's ITU-R
601-2 luma; 3: RGB; an alpha channel is dropped) and, with ``size``, resized (bilinear) to
``(H, W)``; returned as ``(C, H, W)`` float32 in [0, 1]. 16-bit and floating-point images are
refused rather than silently clipped to 8 bits.

Errors name the file: a missing captions file or image is a ``FileNotFoundError``; a captions
file without captions, a malformed line or a JSON line without ``image`` or ``caption``
(``file:line``) or a file Pillow cannot decode is a ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset

from attnlab.atomic import atomic_directory
from attnlab.data.corpora import PathLike, read_lines
from attnlab.data.scenes import Scene, caption, caption_text
from attnlab.data.sources import is_records, records, text_field
from attnlab.parsing import read_json
from attnlab.validation import check_choice, check_positive

__all__ = [
    "CAPTIONS_FILE", "CAPTIONS_JSONL", "DIGITS_FILE", "ImageCaptions", "captions_file", "load_image",
    "load_image_captions", "read_captions", "read_scene_digits", "write_scene_folder",
]

CAPTIONS_FILE = "captions.txt"
CAPTIONS_JSONL = "captions.jsonl"
DIGITS_FILE = "digits.json"
_MODES = {1: "L", 3: "RGB"}
_WIDE_MODES = ("I", "F")  # 32-bit integer and float; "I;16*" are matched by prefix


def read_captions(path: PathLike) -> list[tuple[str, str]]:
    """``(image name, caption)`` pairs of a captions file (text or JSON lines), in file order
    (``#k`` dropped).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line without a tab, with an empty name or caption, a JSON line without
            ``image`` or ``caption`` (``path:line``), or a file with no captions at all.
    """
    return [(name, text) for _, name, text in numbered_captions(path)]


def numbered_captions(path: PathLike) -> list[tuple[int, str, str]]:
    """:func:`read_captions` with each caption's line number: ``(line, image name, caption)``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"captions file {path} not found")
    rows = list(_json_captions(path) if is_records(path) else _text_captions(path))
    for number, name, text in rows:
        if not name or not text:
            raise ValueError(f"{path}:{number}: the {'image name' if not name else 'caption'} is empty")
    if not rows:
        raise ValueError(f"captions file {path} holds no captions (empty or only blank lines)")
    return rows


def _text_captions(path: Path) -> Iterator[tuple[int, str, str]]:
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        name, tab, text = line.partition("\t")
        if not tab:
            raise ValueError(f"{path}:{number}: expected IMAGE<TAB>CAPTION, got a line without a tab")
        name, text = name.strip(), text.strip()
        if "#" in name and name.rpartition("#")[2].isdigit():
            name = name.rpartition("#")[0]  # Flickr8k's caption number
        yield number, name, text


def _json_captions(path: Path) -> Iterator[tuple[int, str, str]]:
    for number, record in records(path):
        image = text_field(record, "image", path, number).strip()
        yield number, image, text_field(record, "caption", path, number).strip()


def captions_file(folder: PathLike) -> Path:
    """The captions file of an image folder: its ``captions.txt`` or its ``captions.jsonl``.

    Raises:
        FileNotFoundError: the folder holds neither.
        ValueError: it holds both (which one is meant?).
    """
    folder = Path(folder)
    found = [folder / name for name in (CAPTIONS_FILE, CAPTIONS_JSONL) if (folder / name).is_file()]
    if len(found) > 1:
        raise ValueError(f"image folder {folder} holds both {CAPTIONS_FILE} and {CAPTIONS_JSONL}; keep one")
    if not found:
        raise FileNotFoundError(f"captions file {folder / CAPTIONS_FILE} not found (nor {CAPTIONS_JSONL})")
    return found[0]


def _size(size: int | Sequence[int] | None) -> tuple[int, int] | None:
    if size is None:
        return None
    h, w = (size, size) if isinstance(size, int) else tuple(size)
    check_positive("size (height)", h)
    check_positive("size (width)", w)
    return int(h), int(w)


def load_image(path: PathLike, channels: int = 3, size: int | Sequence[int] | None = None) -> Tensor:
    """The image at ``path`` as ``(channels, H, W)`` float32 in [0, 1]; ``size`` is ``(H, W)``
    or one side of a square (default: the file's own size).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is a directory or not a regular file, not an image Pillow can
            decode, or a 16-bit / float image (naming the file); ``channels`` not 1 or 3.
    """
    check_choice("channels", channels, tuple(_MODES))
    shape = _size(size)
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"image {path} is a directory, not an image file")
    if not path.exists():
        raise FileNotFoundError(f"image {path} not found")
    if not path.is_file():
        raise ValueError(f"image {path} is not a regular file (a device, a pipe, a socket?)")
    try:
        with Image.open(path) as img:
            img.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise ValueError(f"{path}: not a readable image ({type(err).__name__}: {err})") from None
    if img.mode in _WIDE_MODES or img.mode.startswith("I;16"):
        raise ValueError(f"{path}: image mode {img.mode} (16-bit or float) is not supported; "
                         "convert it to 8-bit grey or RGB")
    img = img.convert(_MODES[channels])
    if shape is not None and img.size != (shape[1], shape[0]):
        img = img.resize((shape[1], shape[0]), Image.Resampling.BILINEAR)
    pixels = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy())  # (H, W) or (H, W, 3)
    pixels = pixels[None] if channels == 1 else pixels.permute(2, 0, 1)  # (C, H, W)
    return pixels.float() / 255


class ImageCaptions(Dataset):
    """A folder of images and its captions file: item ``i`` is ``(image (C, H, W), caption)``.

    ``captions`` defaults to ``<folder>/captions.txt`` or ``<folder>/captions.jsonl``
    (:func:`captions_file`). Images are named relative to ``folder`` (a ``.jsonl``'s: to its
    own folder). Every image named must exist (checked here, ``FileNotFoundError`` naming the
    image and its caption's ``file:line``); images are decoded when an item is read, so a
    corrupt one raises ``ValueError`` then.
    """

    def __init__(self, folder: PathLike, captions: PathLike | None = None, *, channels: int = 3,
                 size: int | Sequence[int] | None = None) -> None:
        check_choice("channels", channels, tuple(_MODES))
        self.size = _size(size)
        self.channels = channels
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"image folder {self.folder} not found")
        self.captions_path = Path(captions) if captions is not None else captions_file(self.folder)
        base = self.captions_path.parent if is_records(self.captions_path) else self.folder
        self.pairs: list[tuple[Path, str]] = []
        for number, name, text in numbered_captions(self.captions_path):
            image = base / Path(name).expanduser()
            if not image.is_file():
                raise FileNotFoundError(f"image {image} not found (named by {self.captions_path}:{number})")
            self.pairs.append((image, text))

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> tuple[Tensor, str]:
        path, text = self.pairs[index]
        return load_image(path, self.channels, self.size), text


def load_image_captions(folder: PathLike, captions: PathLike | None = None, *, channels: int = 3,
                        size: int | Sequence[int] | None = None) -> list[tuple[Tensor, str]]:
    """Every ``(image (C, H, W), caption)`` pair of a folder, decoded now (see :class:`ImageCaptions`)."""
    data = ImageCaptions(folder, captions, channels=channels, size=size)
    return [data[i] for i in range(len(data))]


def write_scene_folder(scenes: Sequence[Scene], folder: PathLike) -> Path:
    """Write ``scenes`` as ``scene_00000.png`` … (8-bit grey), ``captions.txt`` (their
    captions as text) and ``digits.json`` (each image's digits: label, size word, box) into
    ``folder``, replacing it in one atomic step; return ``folder``.

    :class:`ImageCaptions` (``channels=1``) reads it back: each image equals the scene's within
    the 8-bit rounding, ``round(255 · x) / 255``.
    """
    if not scenes:
        raise ValueError("scenes must hold at least one scene, got none")
    folder = Path(folder)
    lines = []
    with atomic_directory(folder) as tmp:
        for i, scene in enumerate(scenes):
            name = f"scene_{i:05d}.png"
            pixels = (scene.image[0] * 255).round().clamp(0, 255).to(torch.uint8)  # (H, W)
            Image.fromarray(pixels.numpy()).save(tmp / name)  # 2-D uint8: mode "L"
            lines.append(f"{name}\t{caption_text(caption(scene))}\n")
        (tmp / CAPTIONS_FILE).write_text("".join(lines), encoding="utf-8")
        digits = {
            f"scene_{i:05d}.png": [
                {"label": d.label, "size": d.size, "box": list(d.box)} for d in scene.digits
            ]
            for i, scene in enumerate(scenes)
        }
        (tmp / DIGITS_FILE).write_text(json.dumps(digits), encoding="utf-8")
    return folder


def read_scene_digits(folder: PathLike) -> dict[str, list[dict]] | None:
    """The ``digits.json`` of a folder :func:`write_scene_folder` wrote (image name -> its
    digits' ``label``, ``size`` and ``box (x0, y0, x1, y1)``), or ``None`` for a folder
    without one (real photos have no boxes)."""
    path = Path(folder) / DIGITS_FILE
    if not path.is_file():
        return None
    return read_json(path, "scene digits")
