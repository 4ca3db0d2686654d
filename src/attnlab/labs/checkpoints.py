"""The trained checkpoint a lab reads (labs ``alignment``, ``heads``, ``memory``, ``captions``).

A lab takes ``--checkpoint`` (``LabOptions.checkpoint``): a checkpoint directory, or a run
directory, whose ``final/`` (the averaged model a translation or captioning run reports), else
``best/``, else its newest ``checkpoints/step_*`` is read. Without it the lab looks through its
own list of default runs (:class:`DefaultRun`, relative to the working directory, e.g.
``runs/multi30k_bahdanau``). When nothing fits, :func:`find_checkpoints` raises
:class:`~attnlab.labs.registry.LabUnavailable` with the commands that train the default runs
(``attnlab train --config configs/digits_caption.toml``, say, or ``make demo``), so
``attnlab lab all`` records the reason and moves on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from attnlab.checkpoint import CONFIG_NAME, WEIGHTS_NAME, latest_checkpoint, load_config
from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions
from attnlab.validation import indefinite

__all__ = ["DefaultRun", "checkpoint_in", "corpora_needed", "find_checkpoints", "model_type_of"]

RUN_CHECKPOINTS = ("final", "best")
"""The checkpoints of a run directory a lab prefers, in order, before its newest step."""


@dataclass(frozen=True)
class DefaultRun:
    """A run a lab reads when no checkpoint is given: its directory and the command that makes it."""

    run_dir: str
    command: str


def _holds_model(directory: Path) -> bool:
    return (directory / WEIGHTS_NAME).is_file() and (directory / CONFIG_NAME).is_file()


def checkpoint_in(path: str | Path) -> Path | None:
    """``path`` itself when it holds a model (weights and ``config.json``), else the run
    directory's ``final/``, ``best/`` or newest ``checkpoints/step_*``; ``None`` when none."""
    path = Path(path)
    if _holds_model(path):
        return path
    for name in RUN_CHECKPOINTS:
        if _holds_model(path / name):
            return path / name
    return latest_checkpoint(path)


def model_type_of(checkpoint: str | Path) -> str:
    """The ``model_type`` a checkpoint's ``config.json`` names (``""`` when it names none)."""
    return str(load_config(checkpoint).get("model_type", ""))


def _given(lab: str, path: str, model_types: Collection[str]) -> Path:
    found = checkpoint_in(path)
    if found is None:
        raise LabUnavailable(
            f"lab {lab}: --checkpoint {path} is neither a checkpoint ({WEIGHTS_NAME} + {CONFIG_NAME}) "
            "nor a run directory holding final/, best/ or checkpoints/step_*"
        )
    kind = model_type_of(found)
    if kind not in model_types:
        raise LabUnavailable(
            f"lab {lab} reads {indefinite(' or '.join(model_types))} checkpoint, but {found} holds "
            f"{indefinite(kind or 'unnamed')} model"
        )
    return found


def find_checkpoints(
    lab: str, options: LabOptions, defaults: Sequence[DefaultRun], model_types: Collection[str],
    *, every: bool = False,
) -> list[Path]:
    """The checkpoint(s) lab ``lab`` reads: ``options.checkpoint`` alone when given (its model
    type must be one of ``model_types``), else the first default run holding a checkpoint of
    one of those types (``every``: each such default run, in order).

    Raises :class:`LabUnavailable` naming the commands that train the defaults when none fits.
    """
    if options.checkpoint is not None:
        return [_given(lab, options.checkpoint, model_types)]
    found = []
    for default in defaults:
        checkpoint = checkpoint_in(default.run_dir)
        if checkpoint is not None and model_type_of(checkpoint) in model_types:
            found.append(checkpoint)
            if not every:
                break
    if not found:
        where = ", ".join(d.run_dir for d in defaults)
        commands = " or ".join(f"`{d.command}`" for d in defaults)
        raise LabUnavailable(
            f"lab {lab} reads a trained checkpoint and none of {where} holds one: make one with "
            f"{commands}, or pass --checkpoint"
        )
    return found


@contextmanager
def corpora_needed(lab: str) -> Iterator[None]:
    """Turn a missing corpus file (Multi30k, tinyshakespeare, MNIST) into :class:`LabUnavailable`
    saying where the corpora are looked for."""
    try:
        yield
    except FileNotFoundError as missing:
        raise LabUnavailable(
            f"lab {lab}: {missing}; pass --data-dir or set ATTNLAB_DATA to the corpora folder"
        ) from None
