"""Tables Hugging Face ``datasets`` reads from local disk: a ``save_to_disk`` folder (one split:
the folder holding ``state.json``), Parquet, CSV (with a header line) and Arrow files — each
row a record, read like a JSON line (:mod:`attnlab.data.sources`). Behind the optional extra
(``pip install 'attnlab[datasets]'``, or ``make datasets``), and never a network call:
``datasets`` runs offline here, caching what it converts under ``$ATTNLAB_CACHE/hf``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TABLE_SUFFIXES = (".parquet", ".csv", ".arrow")
SPLIT_MARKERS = ("state.json", "dataset_info.json")  # a save_to_disk folder of one split
DICT_MARKER = "dataset_dict.json"  # a save_to_disk folder of several splits
INSTALL = "pip install 'attnlab[datasets]' (make datasets)"


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder ``save_to_disk`` wrote (one split, or a dict of splits)."""
    return path.is_dir() and any((path / m).is_file() for m in (*SPLIT_MARKERS, DICT_MARKER))


def _datasets() -> Any:
    os.environ["HF_DATASETS_OFFLINE"] = "1"  # read before the import: nothing is fetched
    try:
        import datasets
    except ImportError:
        raise ValueError(f"reading Parquet, CSV, Arrow and save_to_disk folders needs Hugging Face "
                         f"datasets: {INSTALL}") from None
    datasets.config.HF_DATASETS_OFFLINE = True  # also when it was imported before
    datasets.disable_progress_bars()
    return datasets


def table_records(path: Path, cache: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, record)`` of each row of the table at ``path`` (numbered from 1).

    Raises:
        ValueError: ``datasets`` is not installed; a folder of several splits (name one:
            ``PATH/train``); a file ``datasets`` cannot read (its message, naming the file).
    """
    ds = _datasets()
    if path.is_dir() and (path / DICT_MARKER).is_file():
        splits = ", ".join(sorted(p.name for p in path.iterdir() if is_saved_dataset(p)))
        raise ValueError(f"{path} holds several splits ({splits}): name one, e.g. {path}/train")
    try:
        if path.is_dir():
            table = ds.load_from_disk(str(path))
        else:
            kind = Path(path.name.lower().removesuffix(".gz")).suffix.lstrip(".")
            table = ds.load_dataset(kind, data_files=str(path), split="train", cache_dir=str(cache / "hf"))
    except Exception as err:  # datasets' and pyarrow's own (untyped) read errors
        raise ValueError(f"{path}: not readable as a table ({type(err).__name__}: {err})") from None
    yield from enumerate(table, start=1)
