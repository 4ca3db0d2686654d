"""The 10,000 real handwritten digits of the MNIST test set, and their fixed split.

Source: LeCun, Cortes & Burges, "The MNIST database of handwritten digits" — the test set,
``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz`` in ``<data_dir>/mnist/``
(``data_dir`` as :func:`attnlab.data.corpora.data_dir` finds it: the argument, else
``$ATTNLAB_DATA``, else ``~/.cache/attnlab``). Nothing is downloaded. The files are IDX:
a big-endian header (two zero bytes, the element type ``0x08`` = unsigned byte, the number of
dimensions, then each dimension as a 32-bit integer) and the raw bytes. The reader checks the
magic numbers, the shapes (N, 28, 28) and (N,), the byte counts and that labels are 0–9.

**The split** is made on these *source digits*, by index, before anything is composed from
them. Each half of the file is cut into three contiguous blocks::

    split        indices                        digits
    train        0–3999     and 5000–8999        8,000
    validation   4000–4499  and 9000–9499        1,000
    test         4500–4999  and 9500–9999        1,000

Why this cut:

* **Both kinds of handwriting in every split.** The publishers describe the first 5,000 test
  images as drawn from NIST's original training set (cleaner) and the last 5,000 from NIST's
  original test set (harder); a split that took, say, indices 8000–9999 as test would test on
  the hard writers only. Every split here is half one, half the other.
* **No writer on both sides of train | test.** The first half is shuffled, but the second is
  ordered by writer: a digit's stroke width and slant (z-scored within its class) correlate
  with its neighbour's at r ≈ 0.5–0.6, still ≈ 0.3 fifty indices apart, and ≈ 0 beyond ~150
  indices. An interleaved split (index modulo 10) would put every writer of the second half
  into train *and* test. Contiguous blocks share a writer only at a block boundary, and the
  validation block (500 digits, longer than any writer's run) stands between train and test
  in each half, so test handwriting is never seen in training.
* Class counts stay balanced: train / validation / test hold 723–895 / 84–117 / 75–123 of
  each class.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.data.corpora import DATA_ENV, DEFAULT_DATA_DIR, READS_FROM, PathLike
from attnlab.data.corpora import data_dir as _resolve_data_dir
from attnlab.validation import check_choice

__all__ = [
    "IMAGES_FILE", "LABELS_FILE", "MNIST_DIR", "NUM_DIGITS", "SPLITS", "SourceDigits", "mnist_dir",
    "read_idx", "read_mnist", "source_digits", "split_indices",
]

MNIST_DIR = "mnist"
IMAGES_FILE = "t10k-images-idx3-ubyte.gz"
LABELS_FILE = "t10k-labels-idx1-ubyte.gz"
NUM_DIGITS = 10_000
SIDE = 28

SPLITS: dict[str, tuple[range, range]] = {
    "train": (range(0, 4000), range(5000, 9000)),
    "validation": (range(4000, 4500), range(9000, 9500)),
    "test": (range(4500, 5000), range(9500, 10000)),
}
"""Each split's source-digit indices: a block of the first half and a block of the second."""

_UBYTE = 0x08


class SourceDigits(NamedTuple):
    """One split's source digits: ``images (N, 28, 28)`` uint8 (0 = background, 255 = ink),
    ``labels (N,)`` int64 in 0–9, and ``indices (N,)`` int64, each digit's index in the
    10,000-image test file (what a scene records, so that a split can be audited)."""

    images: Tensor
    labels: Tensor
    indices: Tensor


def mnist_dir(data_dir: PathLike | None = None) -> Path:
    """``<data_dir>/mnist``; ``FileNotFoundError`` naming the path (and where ``data_dir``
    came from) when it is not a directory."""
    path = _resolve_data_dir(data_dir) / MNIST_DIR
    if not path.is_dir():
        raise FileNotFoundError(
            f"MNIST directory {path} not found ({_where(data_dir)}): attnlab reads the MNIST test "
            f"digits from <data_dir>/{MNIST_DIR}/{IMAGES_FILE} and {LABELS_FILE}; {READS_FROM}"
        )
    return path


def _where(data_dir: PathLike | None) -> str:
    if data_dir is not None:
        return f"data_dir={data_dir}"
    env = os.environ.get(DATA_ENV)
    return f"${DATA_ENV}={env}" if env else f"${DATA_ENV} is unset, so {DEFAULT_DATA_DIR}"


def read_idx(path: PathLike) -> Tensor:
    """An IDX file of unsigned bytes (plain or gzip) as a uint8 tensor of the shape its header
    gives.

    Raises:
        FileNotFoundError: ``path`` does not exist (naming it).
        ValueError: a corrupt gzip stream, a bad magic number, an element type other than
            unsigned byte, or a byte count that disagrees with the header (naming the file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise ValueError(f"{path}: truncated or corrupt gzip file ({err})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (magic number {raw[:4].hex() or 'missing'}, "
                         "expected 0000 08 followed by the number of dimensions)")
    if raw[2] != _UBYTE:
        raise ValueError(f"{path}: IDX element type 0x{raw[2]:02x}, expected 0x08 (unsigned byte)")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise ValueError(f"{path}: IDX header truncated or without dimensions (ndim={ndim})")
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    expected = header + _product(shape)
    if len(raw) != expected:
        raise ValueError(
            f"{path}: {len(raw)} bytes but an IDX header of shape {tuple(shape)} needs {expected} "
            "(truncated or corrupt)"
        )
    if expected == header:  # a dimension of size 0
        return torch.zeros(shape, dtype=torch.uint8)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8, offset=header).reshape(shape)


def _product(shape: list[int]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def read_mnist(data_dir: PathLike | None = None) -> tuple[Tensor, Tensor]:
    """All 10,000 MNIST test digits: ``images (N, 28, 28)`` uint8 and ``labels (N,)`` int64.

    Raises:
        FileNotFoundError: ``<data_dir>/mnist`` or one of its two files is missing (naming the
            path looked in).
        ValueError: a file is corrupt, has the wrong IDX magic or shape, labels outside 0–9, or
            the two files disagree on N (naming the file).
    """
    folder = mnist_dir(data_dir)
    images_path, labels_path = folder / IMAGES_FILE, folder / LABELS_FILE
    for path in (images_path, labels_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found ({_where(data_dir)}): the MNIST test set needs {IMAGES_FILE} and "
                f"{LABELS_FILE} in {folder}"
            )
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.dim() != 3 or tuple(images.shape[1:]) != (SIDE, SIDE):
        raise ValueError(f"{images_path}: expected images of shape (N, {SIDE}, {SIDE}), "
                         f"got {tuple(images.shape)} (magic 0x00000803)")
    if labels.dim() != 1:
        raise ValueError(f"{labels_path}: expected labels of shape (N,), got {tuple(labels.shape)} "
                         "(magic 0x00000801)")
    if labels.shape[0] != images.shape[0]:
        raise ValueError(f"{labels_path} holds {labels.shape[0]} labels but {images_path} holds "
                         f"{images.shape[0]} images")
    if labels.numel() and int(labels.max()) > 9:
        raise ValueError(f"{labels_path}: labels must be digits 0–9, got a maximum of {int(labels.max())}")
    return images, labels.long()


def split_indices(split: str) -> Tensor:
    """The source-digit indices of ``split`` (``(N,)`` int64, ascending); see :data:`SPLITS`."""
    check_choice("split", split, list(SPLITS))
    return torch.cat([torch.arange(block.start, block.stop) for block in SPLITS[split]])


def source_digits(split: str, data_dir: PathLike | None = None) -> SourceDigits:
    """The source digits of ``split`` (``"train"``, ``"validation"`` or ``"test"``).

    Raises:
        ValueError: an unknown split, or a test file that does not hold the 10,000 digits the
            split is defined on (naming the file).
        FileNotFoundError: the MNIST directory or a file is missing (naming the path).
    """
    check_choice("split", split, list(SPLITS))
    images, labels = read_mnist(data_dir)
    if images.shape[0] != NUM_DIGITS:
        path = mnist_dir(data_dir) / IMAGES_FILE
        raise ValueError(f"{path} holds {images.shape[0]} images, but the splits are defined on the "
                         f"{NUM_DIGITS:,} of the MNIST test set")
    indices = split_indices(split)
    return SourceDigits(images[indices], labels[indices], indices)
