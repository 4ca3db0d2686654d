"""The checkpoints of a training run: where they live, how they are written and pruned.

A run directory looks like::

    run_dir/
      metrics.jsonl                 one JSON object per log / eval event
      checkpoints/step_00001000/    model.safetensors, config.json, tokenizer files, trainer.pt
      checkpoints/step_00002000/
      best/                         the checkpoint with the best validation metric

Each checkpoint is one directory (DESIGN.md) written with
:func:`attnlab.checkpoint.save_pretrained`, i.e. into a temporary sibling directory renamed
into place only when complete: an interrupted write leaves the previous checkpoints intact,
and a half-written directory is never mistaken for a checkpoint.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from torch import nn

from attnlab.checkpoint import CONFIG_NAME, WEIGHTS_NAME, load_into, load_state, save_pretrained

TRAINER_NAME = "trainer.pt"
_STEP_DIR = re.compile(r"^step_(\d+)$")

ExtraFiles = Mapping[str, "str | Path | bytes"]
SaveFn = Callable[[nn.Module, Path, ExtraFiles], object]


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """``run_dir/checkpoints/step_{step:08d}``."""
    return Path(run_dir) / "checkpoints" / f"step_{step:08d}"


def is_checkpoint(directory: Path) -> bool:
    """A complete training checkpoint: weights, config and trainer state present."""
    return all((directory / n).is_file() for n in (WEIGHTS_NAME, CONFIG_NAME, TRAINER_NAME))


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """The complete ``step_*`` checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), d)
        for d in root.iterdir()
        if (m := _STEP_DIR.match(d.name)) and d.is_dir() and is_checkpoint(d)
    ]
    return [d for _, d in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def resolve_resume(path: str | Path) -> Path:
    """A checkpoint directory to resume from: ``path`` itself when it is one, else the
    newest checkpoint of the run directory ``path``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"resume path {path} does not exist")
    if is_checkpoint(path):
        return path
    latest = latest_checkpoint(path)
    if latest is None:
        raise FileNotFoundError(
            f"resume path {path} is neither a checkpoint (with {WEIGHTS_NAME}, {CONFIG_NAME}, "
            f"{TRAINER_NAME}) nor a run directory holding checkpoints/step_*"
        )
    return latest


def prune_checkpoints(run_dir: str | Path, keep_last_k: int) -> list[Path]:
    """Delete all but the newest ``keep_last_k`` step checkpoints (0 keeps all); returns
    the deleted paths."""
    if keep_last_k <= 0:
        return []
    old = list_checkpoints(run_dir)[:-keep_last_k]
    for d in old:
        shutil.rmtree(d, ignore_errors=True)
    return old


def default_save_fn(model: nn.Module, directory: Path, extra: ExtraFiles) -> None:
    """Write ``model`` with :func:`attnlab.checkpoint.save_pretrained` (the model needs a
    ``config`` with ``to_dict()``), adding the ``extra`` files, all atomically."""
    save_pretrained(model, directory, extra=extra)


def write_checkpoint(
    directory: Path,
    model: nn.Module,
    trainer_pt: bytes,
    files: ExtraFiles | None = None,
    save_fn: SaveFn = default_save_fn,
) -> Path:
    """Write one checkpoint directory: the model, ``files`` (e.g. tokenizer files) and
    ``trainer.pt`` (already serialised), atomically through ``save_fn``."""
    extra = dict(files or {})
    extra[TRAINER_NAME] = trainer_pt
    save_fn(model, Path(directory), extra)
    return Path(directory)


def load_model_weights(model: nn.Module, directory: str | Path) -> None:
    """Load a checkpoint's ``model.safetensors`` into ``model`` (strict; safetensors only)."""
    _, state = load_state(directory)
    load_into(model, state, directory)
