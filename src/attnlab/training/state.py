"""Trainer state: what ``trainer.pt`` holds so that a resumed run continues exactly.

``trainer.pt`` (one file inside a checkpoint directory, see docs/design.md) stores the optimizer
and scheduler state dicts, the random-number-generator states of python, numpy and torch
(CPU and CUDA), and the loop position (step, epoch, micro-batches consumed in the epoch,
best validation metric, early-stopping counter). Everything is plain containers, numbers,
strings and tensors, so it loads with ``torch.load(weights_only=True)``: loading never
executes pickled code. :func:`check_weights_only_safe` enforces that at save time.
"""

from __future__ import annotations

import pickle
import random
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from attnlab.atomic import atomic_file
from attnlab.validation import counted

FORMAT = "attnlab.trainer/1"
_SAFE_LEAVES = (torch.Tensor, type(None), bool, int, float, str, torch.dtype, torch.device)


@dataclass
class TrainerState:
    """Where the training loop is.

    ``step`` counts optimizer updates; ``batch_in_epoch`` counts the micro-batches of
    ``epoch`` already consumed (a resumed run skips that many); ``bad_evals`` counts
    evaluations since the best one (early stopping); ``last_eval`` is the newest finished
    evaluation, ``{"step": ..., "val_loss": ...}`` (a resumed run repeats an evaluation of
    its step that is not recorded here, and does not repeat one that is)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    tokens_seen: int = 0
    best_metric: float | None = None
    bad_evals: int = 0
    last_eval: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainerState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def seed_everything(seed: int) -> None:
    """Seed python's ``random``, numpy's global generator and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The global RNG states of python, numpy and torch (CPU, and CUDA when initialised),
    as weights_only-loadable values."""
    _, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    random.setstate(_as_python_state(state["python"]))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_python_state(s: Any) -> tuple:
    version, internal, gauss = s
    return (version, tuple(internal), gauss)


def check_weights_only_safe(obj: Any, where: str = "trainer state") -> None:
    """Raise ``TypeError`` naming the first value ``torch.load(weights_only=True)`` would
    refuse (anything but dict/list/tuple/numbers/strings/None/tensors/dtypes)."""
    stack: list[tuple[str, Any]] = [(where, obj)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, _SAFE_LEAVES):
            continue
        if isinstance(x, dict):
            for k, v in x.items():
                if not isinstance(k, int | str | float | bool | type(None)):
                    raise TypeError(f"{path} has a key of type {type(k).__name__}: {k!r}")
                stack.append((f"{path}[{k!r}]", v))
        elif isinstance(x, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(x))
        else:
            raise TypeError(
                f"{path} is a {type(x).__module__}.{type(x).__name__}, which "
                "torch.load(weights_only=True) cannot load; store plain numbers, strings, "
                "lists, dicts or tensors"
            )


def save_trainer_state(
    path: str | Path | BinaryIO,
    *,
    state: TrainerState,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    rng: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write ``trainer.pt`` (to a path, atomically, or a binary buffer). ``rng`` is one
    :func:`rng_state` per rank (index = rank); ``extra`` is any weights_only-safe dict (e.g.
    the train config as a dict)."""
    payload = {
        "format": FORMAT,
        "state": state.to_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng if rng is not None else [rng_state()],
        "extra": extra or {},
    }
    check_weights_only_safe(payload)
    if hasattr(path, "write"):
        torch.save(payload, path)
        return
    with atomic_file(path) as f:
        torch.save(payload, f)


def load_trainer_state(path: str | Path) -> dict[str, Any]:
    """Read ``trainer.pt`` with ``weights_only=True``; ``result["state"]`` is a
    :class:`TrainerState`. A missing or unreadable file raises with the path in the message."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trainer state {path} does not exist")
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols: the errors below say it
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a pickled object torch refused, or a corrupt or truncated file
        raise _unreadable(path, err) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"trainer state {path} must have format {FORMAT!r}, got {got!r}")
    payload["state"] = TrainerState.from_dict(payload["state"])
    return payload


def _unreadable(path: Path, err: Exception) -> ValueError:
    """One line for a ``trainer.pt`` that ``torch.load(weights_only=True)`` refused: pickled
    objects (a class or a function to call), or a damaged file, in attnlab's words — never
    torch's advice to load it with ``weights_only=False``."""
    text = str(err)
    if isinstance(err, pickle.UnpicklingError) and ("GLOBAL" in text or "add_safe_globals" in text):
        return ValueError(
            f"trainer state {path} holds pickled objects, which attnlab never loads (its trainer.pt "
            "holds only numbers, strings and tensors): this file was not written by attnlab"
        )
    _, _, reason = text.partition("WeightsUnpickler error:")  # torch's reason, without its advice
    lines = [line.strip() for line in (reason or text).splitlines() if line.strip()]
    return ValueError(f"trainer state {path} could not be read (corrupt, or not written by attnlab): "
                      f"{lines[0] if lines else type(err).__name__}")


def restore_trainer_state(
    path: str | Path,
    *,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    rank: int = 0,
) -> tuple[TrainerState, dict[str, Any]]:
    """Load ``trainer.pt`` into ``optimizer`` / ``scheduler``, restore this rank's RNG
    states, and return ``(state, extra)``."""
    payload = load_trainer_state(path)
    optimizer.load_state_dict(payload["optimizer"])
    if scheduler is not None and payload["scheduler"] is not None:
        scheduler.load_state_dict(payload["scheduler"])
    rngs = payload["rng"]
    if rank >= len(rngs):
        raise ValueError(
            f"trainer state {path} holds RNG states for {counted(len(rngs), 'rank')} but this is rank "
            f"{rank}; resume with the same world size"
        )
    set_rng_state(rngs[rank])
    return payload["state"], payload["extra"]
