"""Every progress bar attnlab shows: tqdm on stderr, as wide as the terminal, shown only when
asked (a recipe's ``train.progress``; off in tests and pipes that want quiet output).

In a notebook with ``ipywidgets`` installed the bar is tqdm's widget; without it, tqdm's text
bar (``tqdm.auto`` would print an "IProgress not found" warning there instead)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib.util import find_spec
from typing import Any, TypeVar

from tqdm import tqdm as text_tqdm

__all__ = ["progress", "progress_bar"]

T = TypeVar("T")


def _tqdm_class() -> type[text_tqdm]:
    """tqdm's notebook-aware class where its widget can draw, else the text bar."""
    if find_spec("ipywidgets") is None:
        return text_tqdm
    from tqdm.auto import tqdm

    return tqdm


def progress_bar(total: int | None, *, unit: str, enabled: bool, initial: int = 0,
                 desc: str | None = None, leave: bool = True, **options: Any) -> text_tqdm:
    """attnlab's progress bar over ``total`` ``unit``s (shown only when ``enabled``); ``options``
    go to tqdm (e.g. ``unit_scale=True`` for bytes)."""
    return _tqdm_class()(total=total, initial=initial, unit=unit, desc=desc, leave=leave,
                         dynamic_ncols=True, disable=not enabled, **options)


def progress(items: Iterable[T], *, desc: str, enabled: bool, leave: bool = True,
             unit: str = "it") -> Iterator[T]:
    """Iterate over ``items`` with attnlab's progress bar (its length when it has one)."""
    items = list(items) if not hasattr(items, "__len__") else items
    with progress_bar(len(items), unit=unit, enabled=enabled, desc=desc, leave=leave) as bar:
        for item in items:
            yield item
            bar.update(1)
