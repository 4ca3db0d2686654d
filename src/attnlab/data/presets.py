"""The bundled corpora as presets of the generic readers (:mod:`attnlab.data.sources`): a
name that stands for files in the data directory (:func:`attnlab.data.corpora.data_dir`).

* ``tinyshakespeare`` — text: ``tinyshakespeare/input.txt``, its last 10 % validating;
* ``kjv`` — text: the King James Bible's 31,102 verses, one a line, written once from Debian's
  ``sword-text-kjv`` (:mod:`attnlab.data.kjv`; ``make data-kjv``) into the cache as plain text;
* ``multi30k`` — sentence pairs: ``multi30k/{split}.{lang}.gz``, two line-aligned files a split.

Naming a preset or naming its files gives the same batches (a test holds them equal); a
corpus of your own is a path (``./notes``, ``corpus/train``, ``data.tsv``), never a bare
preset name.
"""

from __future__ import annotations

from pathlib import Path

from attnlab.atomic import write_atomic
from attnlab.data.corpora import TINYSHAKESPEARE_SHA256, TINYSHAKESPEARE_URL, PathLike, ensure_file
from attnlab.data.corpora import data_dir as resolve_data_dir
from attnlab.data.kjv import find_kjv_module, load_kjv_verses
from attnlab.data.multi30k import multi30k_file
from attnlab.data.prepared import cache_dir
from attnlab.validation import check_choice

TEXT_PRESETS = ("tinyshakespeare", "kjv")
PAIR_PRESETS = ("multi30k",)


def text_preset(name: str, data_dir: PathLike | None = None) -> list[Path]:
    """The files of text preset ``name`` (a missing one says where it was looked for)."""
    check_choice("data.corpus", name, TEXT_PRESETS)
    if name == "kjv":
        return [kjv_text()]
    path = resolve_data_dir(data_dir) / "tinyshakespeare" / "input.txt"
    url = f"{TINYSHAKESPEARE_URL}/input.txt"
    return [ensure_file(path, url, TINYSHAKESPEARE_SHA256, download_missing=False)]


def kjv_text(sword: PathLike | None = None) -> Path:
    """The KJV's verses as a text file in the cache, one verse a line, written on first use."""
    module = find_kjv_module(sword)  # refused, naming make data-kjv, when it is not installed
    path = cache_dir() / "presets" / "kjv.txt"
    if not path.is_file() or path.stat().st_mtime < module.stat().st_mtime:
        write_atomic(path, "".join(verse + "\n" for verse in load_kjv_verses(sword)))
    return path


def pair_preset(name: str, split: str, src_lang: str, tgt_lang: str,
                data_dir: PathLike | None = None) -> list[Path]:
    """The two line-aligned files of ``split`` of pair preset ``name``."""
    return [multi30k_file(split, lang, data_dir) for lang in (src_lang, tgt_lang)]
