"""Saving a matplotlib ``Figure`` (object-oriented API, Agg backend: no display, no pyplot state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix, 120 dpi), creating its directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
