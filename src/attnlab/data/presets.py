"""The bundled corpora as presets of the generic readers (:mod:`attnlab.data.sources`): a
name that stands for files in the data directory (:func:`attnlab.data.corpora.data_dir`).

* ``tinyshakespeare`` — text: ``tinyshakespeare/input.txt``, its last 10 % validating;
* ``multi30k`` — sentence pairs: ``multi30k/{split}.{lang}.gz``, two line-aligned files a split.

Naming a preset or naming its files gives the same batches (a test holds them equal); a
corpus of your own is a path (``./notes``, ``corpus/train``, ``data.tsv``), never a bare
preset name.
"""

from __future__ import annotations

from pathlib import Path

from attnlab.data.corpora import TINYSHAKESPEARE_SHA256, TINYSHAKESPEARE_URL, PathLike, ensure_file
from attnlab.data.corpora import data_dir as resolve_data_dir
from attnlab.data.multi30k import multi30k_file

TEXT_PRESETS = ("tinyshakespeare",)
PAIR_PRESETS = ("multi30k",)


def text_preset(name: str, data_dir: PathLike | None = None) -> list[Path]:
    """The files of text preset ``name`` (a missing one says where it was looked for)."""
    path = resolve_data_dir(data_dir) / "tinyshakespeare" / "input.txt"
    url = f"{TINYSHAKESPEARE_URL}/input.txt"
    return [ensure_file(path, url, TINYSHAKESPEARE_SHA256, download_missing=False)]


def pair_preset(name: str, split: str, src_lang: str, tgt_lang: str, data_dir: PathLike | None = None) -> list[Path]:
    """The two line-aligned files of ``split`` of pair preset ``name``."""
    return [multi30k_file(split, lang, data_dir) for lang in (src_lang, tgt_lang)]
