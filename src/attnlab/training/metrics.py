"""``metrics.jsonl``: the record of a run, one JSON object per line.

Every object has ``"event"`` (``"train"`` or ``"eval"``) and ``"step"``; train events add
``loss``, ``lr``, ``tokens_per_s``, ``epoch``, ``elapsed_s`` (and ``grad_norm`` when
clipping); eval events add whatever ``eval_fn`` returned (``val_loss``, ``bleu``, ...).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from attnlab.atomic import write_atomic
from attnlab.parsing import parse_json

METRICS_NAME = "metrics.jsonl"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # tensors and numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no nan / inf
    return value


class MetricsLog:
    """Appends events to ``run_dir/metrics.jsonl`` (flushed per line)."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / METRICS_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, event: dict[str, Any]) -> None:
        line = json.dumps({k: _jsonable(v) for k, v in event.items()})
        with self.path.open("a") as f:
            f.write(line + "\n")
            f.flush()

    def reset(self) -> None:
        """Start an empty log (a fresh run: events of an earlier attempt that saved no
        checkpoint would mix with its own)."""
        self.path.unlink(missing_ok=True)

    def truncate_after(self, step: int, *, evaluated: bool = True) -> None:
        """Drop events after ``step`` and, unless ``evaluated``, the evaluation at ``step``
        (a resumed run logs them again), rewriting the file atomically: a kill or a full disk
        in the middle leaves the old log."""
        if not self.path.is_file():
            return
        kept = [e for e in read_metrics(self.path) if int(e.get("step", 0)) < step
                or int(e.get("step", 0)) == step and (evaluated or e.get("event") != "eval")]
        write_atomic(self.path, "".join(json.dumps(e) + "\n" for e in kept))


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The events of a ``metrics.jsonl`` file (or of ``run_dir/metrics.jsonl``).

    A last line without its newline that is not valid JSON was torn by a kill in the middle of
    a write: it is dropped and every complete event kept. Any other line that is not a JSON
    object is an error naming it (``metrics.jsonl:12``).
    """
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_NAME
    if not path.is_file():
        raise FileNotFoundError(f"metrics file {path} does not exist")
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    torn = len(lines) if lines and not text.endswith("\n") else None
    events = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(parse_json(line, f"{path}:{lineno}"))
        except ValueError:
            if lineno == torn:
                break  # the write a kill interrupted
            raise
    return events
