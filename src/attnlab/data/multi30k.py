"""Multi30k (Elliott et al., 2016): image captions in English, German, French and Czech.

Files are the official raw ones of the multi30k/dataset repository,
``data/task1/raw/{split}.{lang}.gz``, read from ``<data_dir>/multi30k/`` (see
:func:`attnlab.data.corpora.data_dir`). With ``download=True`` missing files are fetched from
``$ATTNLAB_MULTI30K_URL`` or the ``base_url`` argument (default: GitHub) and their sha256 is
checked against :data:`SHA256`.

>>> pairs = load_multi30k("train", "de", "en")   # 29,000 (German, English) pairs
"""

from __future__ import annotations

import os
from pathlib import Path

from attnlab.data.corpora import PathLike, ensure_file
from attnlab.data.corpora import data_dir as _resolve_data_dir
from attnlab.data.sources import read_parallel
from attnlab.validation import check_choice

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
URL_ENV = "ATTNLAB_MULTI30K_URL"

SPLITS = ("train", "val", "test_2016_flickr")
LANGUAGES = ("en", "de", "fr", "cs")
NUM_PAIRS = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}

SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}


def multi30k_file(
    split: str,
    lang: str,
    data_dir: PathLike | None = None,
    download: bool = False,
    *,
    base_url: str | None = None,
) -> Path:
    """Path of ``{split}.{lang}.gz``, downloading it first when missing and ``download``."""
    check_choice("split", split, SPLITS)
    check_choice("lang", lang, LANGUAGES)
    name = f"{split}.{lang}.gz"
    base = base_url or os.environ.get(URL_ENV) or BASE_URL
    path = _resolve_data_dir(data_dir) / "multi30k" / name
    return ensure_file(path, f"{base.rstrip('/')}/{name}", SHA256[name], download_missing=download)


def load_multi30k(
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_dir: PathLike | None = None,
    download: bool = False,
    *,
    base_url: str | None = None,
) -> list[tuple[str, str]]:
    """``(source, target)`` sentence pairs of one Multi30k split, in file order.

    Args:
        split: ``"train"`` (29,000 pairs), ``"val"`` (1,014) or ``"test_2016_flickr"`` (1,000).
        src_lang, tgt_lang: two different languages of ``"en"``, ``"de"``, ``"fr"``, ``"cs"``.
        data_dir: directory holding ``multi30k/``; default ``$ATTNLAB_DATA``, else
            ``~/.cache/attnlab``.
        download: fetch missing files (sha256-verified) instead of raising ``FileNotFoundError``.
        base_url: where to download from; default ``$ATTNLAB_MULTI30K_URL`` or :data:`BASE_URL`.
    """
    if src_lang == tgt_lang:
        raise ValueError(f"src_lang and tgt_lang must differ, got {src_lang!r} for both")
    src, tgt = (
        multi30k_file(split, lang, data_dir, download, base_url=base_url)
        for lang in (src_lang, tgt_lang)
    )
    return read_parallel(src, tgt)
