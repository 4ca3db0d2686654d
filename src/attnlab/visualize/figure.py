"""Saving a matplotlib ``Figure`` (object-oriented API, Agg backend: no display, no pyplot state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.atomic import atomic_file, check_target


def picture_format(path: str | Path) -> str:
    """The picture format ``path`` asks for: its suffix when matplotlib can write it (``.png``,
    ``.pdf``, ``.svg``, ...), ``"png"`` when it has none; any other suffix, or a path no file
    can be written at (a directory, a parent that is a file: :func:`~attnlab.atomic.check_target`)
    is a ``ValueError`` naming it. Commands call it before their work, so a picture they could
    not save is refused first."""
    from matplotlib.backend_bases import FigureCanvasBase

    check_target(path)

    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    accepted = FigureCanvasBase.get_supported_filetypes()
    if suffix not in accepted:
        raise ValueError(f"picture {path} must end in one of {', '.join('.' + s for s in accepted)} "
                         f"(or have no suffix, for PNG)")
    return suffix


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to exactly ``path`` (in :func:`picture_format`, 120 dpi) atomically (a
    failed write leaves the old file or none), creating its directory; returns ``path``."""
    path = Path(path)
    fmt = picture_format(path)
    with atomic_file(path) as f:
        fig.savefig(f, format=fmt, dpi=120)
    return path
