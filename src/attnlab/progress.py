"""Every progress bar attnlab shows: tqdm on stderr, as wide as the terminal, shown only when
asked (a recipe's ``train.progress``; off in tests and pipes that want quiet output)."""

from __future__ import annotations

from tqdm.auto import tqdm

__all__ = ["progress_bar"]


def progress_bar(total: int | None, *, unit: str, enabled: bool, initial: int = 0,
                 desc: str | None = None, leave: bool = True) -> tqdm:
    """attnlab's progress bar over ``total`` ``unit``s (shown only when ``enabled``)."""
    return tqdm(total=total, initial=initial, unit=unit, desc=desc, leave=leave, dynamic_ncols=True,
                disable=not enabled)
